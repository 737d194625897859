"""The Spark session the audit runs in: local by default, any master by URL."""

from __future__ import annotations

import os
import sys
from typing import Any


def session(master: str = "local[*]", app: str = "coord-audit", *,
            shuffle_partitions: int | None = None, progress: bool = True,
            conf: dict[str, str] | None = None) -> Any:
    """A SparkSession for `master` (`local[*]`, `local[2]`, `local-cluster[2,1,1024]`,
    `spark://host:7077`, `yarn`, ...). Shuffle partitions default to 4 per local core
    (Spark's 200 is for clusters; on a laptop they cost more than they save)."""
    from pyspark.sql import SparkSession

    if shuffle_partitions is None:
        shuffle_partitions = 4 * (os.cpu_count() or 2) if master.startswith("local") else 200
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "true" if progress else "false")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.adaptive.enabled", "true"))
    if master.startswith("local"):
        builder = local_only(builder)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def local_only(builder: Any) -> Any:
    """`builder` (a SparkSession builder) for a master on this machine: Python workers
    run this interpreter (it has coord; an in-process SparkContext reads the worker's
    Python from the environment only), and Spark listens on loopback only (it binds the
    address the host name resolves to, else the first interface's; a local-cluster's
    worker and executor JVMs read the variable)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (builder.config("spark.pyspark.python", sys.executable)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1"))


def parse_conf(items: list[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` settings, as spark-submit takes them, into a dict; a setting
    without `=`, or with an empty key or one not under `spark.` (spark-submit would drop
    it with only a warning), is refused by name, and so is `spark.master`, which
    `--master` sets (the later of the two would win unseen)."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--conf {item!r}: expected KEY=VALUE, e.g. "
                             "spark.driver.memory=4g")
        if not key.startswith("spark."):
            raise ValueError(f"--conf {item!r}: {key} is not a Spark setting (they start "
                             "with spark.)")
        if key == "spark.master":
            raise ValueError(f"--conf {item!r}: the master is --master's to set")
        conf[key] = value
    return conf

