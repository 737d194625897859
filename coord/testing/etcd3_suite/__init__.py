"""python-etcd3's own test suite (the `etcd3` package's upstream tests, from its sdist)
run against a one-member etcd 3.4 and a one-member coord, outcomes compared per test:
`fetch` the suite into a cache, `address` (the pytest plugin that points it at a
server), `outcomes` (its results and their comparison), `run` (`python -m
coord.testing.etcd3_suite`, `make etcd3-suite`)."""
