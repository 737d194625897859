import sys

from coord.testing.etcd3_suite.run import main

sys.exit(main())
