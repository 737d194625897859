"""Generated code for the etcd v3 wire API subset coord serves (`make proto` makes it
from proto/coord/etcdpb/; it is not committed)."""
