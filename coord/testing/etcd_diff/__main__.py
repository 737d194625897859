import sys

from coord.testing.etcd_diff.run import main

sys.exit(main())
