"""The `coord` command line: serving members, the dev cluster, status, benchmarks and the
client commands."""
