"""``python -m coord.rafttest``: see coord.rafttest.cli."""

import sys

from coord.rafttest.cli import main

sys.exit(main())
