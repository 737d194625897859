"""`coord bench audit --masters`: a local-cluster master's own commas do not split it
(the full run is `make bench-audit`)."""

from __future__ import annotations

from coord.bench.audit import masters


def test_masters_split_on_the_commas_outside_brackets():
    assert masters("local[2],local-cluster[2,1,1024]") == ["local[2]", "local-cluster[2,1,1024]"]
    assert masters("local-cluster[2,1,1024]") == ["local-cluster[2,1,1024]"]
    assert masters("spark://127.0.0.1:7077,local[*]") == ["spark://127.0.0.1:7077", "local[*]"]
