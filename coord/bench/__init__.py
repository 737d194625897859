"""Benchmarks (`coord bench ...`): each starts its own clusters and prints its figures
beside its peer's from the same run. Never imported by the server."""
