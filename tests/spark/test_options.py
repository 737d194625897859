"""The data source's options: bad input is one clear error naming the option."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coord.client import TLS
from coord.spark.options import parse_options
from coord.spark.sinks import ParquetDirSink, SqliteSink, open_sink

GOOD = {"endpoints": "127.0.0.1:1, 127.0.0.1:2", "job": "orders-daily", "sink": "sqlite",
        "path": "/tmp/x.db", "table": "orders"}


def test_good_options():
    opts = parse_options({**GOOD, "Version": "20261125", "ttl": "5"})
    assert opts.endpoints == ("127.0.0.1:1", "127.0.0.1:2")
    assert (opts.job, opts.version, opts.ttl, opts.fence) == ("orders-daily", 20261125, 5.0,
                                                              True)
    assert parse_options(GOOD).version is None


@pytest.mark.parametrize("bad, named", [
    ({"endpoints": ""}, "endpoints"),
    ({"job": ""}, "job"),
    ({"job": "a/b"}, "job"),
    ({"version": "-1"}, "version"),
    ({"version": "v2"}, "version"),
    ({"ttl": "0.1"}, "ttl"),
    ({"ttl": "soon"}, "ttl"),
    ({"fence": "maybe"}, "fence"),
])
def test_bad_options_name_the_option(bad, named):
    with pytest.raises(ValueError, match=named):
        parse_options({**GOOD, **bad})


def test_tls_options():
    opts = parse_options({**GOOD, "cacert": "/p/ca.pem", "Cert": "/p/me.pem", "key": "/p/me.key"})
    assert opts.tls == TLS("/p/ca.pem", "/p/me.pem", "/p/me.key")
    assert parse_options({**GOOD, "cacert": "/p/ca.pem"}).tls == TLS("/p/ca.pem")
    assert parse_options(GOOD).tls is None  # each process's $COORD_CACERT...


@pytest.mark.parametrize("half", [{"cert": "/p/me.pem"}, {"key": "/p/me.key"}])
def test_a_certificate_without_its_key_is_refused(half):
    with pytest.raises(ValueError, match="options cert and key go together"):
        parse_options({**GOOD, "cacert": "/p/ca.pem", **half})


def test_open_sink_checks_its_options(tmp_path):
    with pytest.raises(ValueError, match="sink"):
        open_sink({"sink": "csv", "path": str(tmp_path)})
    with pytest.raises(ValueError, match="path"):
        open_sink({"sink": "parquet"})
    with pytest.raises(ValueError, match="table"):
        open_sink({"sink": "sqlite", "path": str(tmp_path / "x.db")})
    with pytest.raises(ValueError, match="table"):
        open_sink({"sink": "sqlite", "path": str(tmp_path / "x.db"), "table": "a; drop"})
    with pytest.raises(ValueError, match="option url is required for the postgres sink"):
        open_sink({"sink": "postgres", "path": str(tmp_path / "x.db"), "table": "t"})
    with pytest.raises(ValueError, match="table"):
        open_sink({"sink": "postgres", "url": "postgresql://127.0.0.1:1/x"})
    assert isinstance(open_sink({"sink": "parquet", "path": str(tmp_path / "d")}),
                      ParquetDirSink)
    sink = open_sink({"sink": "sqlite", "path": str(tmp_path / "new" / "x.db"), "table": "t"})
    assert isinstance(sink, SqliteSink)
    with pytest.raises(ValueError, match="cannot store"):
        sink.prepare(pa.schema([("m", pa.map_(pa.string(), pa.int64()))]))
    for use in ("committed_version", "discard", "fence"):  # a job names a directory
        with pytest.raises(ValueError, match="job"):
            method = getattr(ParquetDirSink(str(tmp_path / "d")), use)
            method("../escape", *({"discard": [{}], "fence": [0]}.get(use, [])))
