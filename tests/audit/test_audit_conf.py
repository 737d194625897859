"""`coord audit --conf KEY=VALUE`: Spark settings as spark-submit takes them, checked
before Spark starts and handed to the session."""

from __future__ import annotations

import pytest

from coord.audit.spark import parse_conf
from coord.cli.main import main


class _Started(Exception):
    """Raised by the stand-in session: the settings reached it, and nothing runs."""


@pytest.fixture
def history(tmp_path):
    out = tmp_path / "h"
    assert main(["history", "synth", "--commands", "20", "--out", str(out)]) == 0
    return out


def test_settings_parse_as_spark_submit_takes_them():
    assert parse_conf([]) == {}
    assert parse_conf(["spark.driver.memory=4g", "spark.executor.extraJavaOptions=-Da=b",
                       "spark.driver.memory=2g"]) == {
        "spark.driver.memory": "2g", "spark.executor.extraJavaOptions": "-Da=b"}


@pytest.mark.parametrize("item, says", [
    ("spark.driver.memory", "expected KEY=VALUE"),
    ("=4g", "expected KEY=VALUE"),
    ("driver.memory=4g", "is not a Spark setting"),
    ("spark.master=local[1]", "the master is --master's to set"),
])
def test_a_malformed_setting_is_refused_by_name(item, says):
    with pytest.raises(ValueError, match=says):
        parse_conf([item])


def test_the_audit_refuses_a_bad_setting_before_spark_starts_and_passes_good_ones(
        history, capsys, monkeypatch):
    seen = []

    def session(master, *args, **kwargs):
        seen.append((master, kwargs.get("conf")))
        raise _Started

    monkeypatch.setattr("coord.audit.spark.session", session)
    assert main(["audit", str(history), "--conf", "driver.memory=4g"]) == 2
    assert "driver.memory is not a Spark setting" in capsys.readouterr().err
    assert seen == []
    with pytest.raises(_Started):
        main(["audit", str(history), "--master", "local[1]", "--conf",
              "spark.driver.memory=3g", "--conf", "spark.sql.shuffle.partitions=3"])
    assert seen == [("local[1]", {"spark.driver.memory": "3g",
                                  "spark.sql.shuffle.partitions": "3"})]
