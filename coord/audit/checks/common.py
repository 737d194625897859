"""What every checker shares: the violation shape and how rows are cited."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F


def cite(prefix: str = "") -> Column:
    """One row as evidence: `index:seq kind session=.. gen=.. rev=..` (prefix: an alias)."""
    col = (lambda n: F.col(f"{prefix}.{n}")) if prefix else F.col
    return F.concat_ws(
        " ", F.concat(col("index").cast("string"), F.lit(":"), col("seq").cast("string")),
        col("kind"),
        F.when(col("session").isNotNull(), F.concat(F.lit("session="), col("session"))),
        F.when(col("group").isNotNull(),
               F.concat(F.lit("res="), col("group"), F.lit("/"), col("resource"))),
        F.when(col("generation").isNotNull(), F.concat(F.lit("gen="), col("generation"))),
        F.when(col("pid").isNotNull(), F.concat(F.lit("pid="), col("pid"))),
        F.when(col("epoch").isNotNull(), F.concat(F.lit("epoch="), col("epoch"))),
        F.concat(F.lit("rev="), col("revision")),
        F.concat(F.lit("t="), col("time_ms")),
        F.when(col("leader").isNotNull(), F.concat(F.lit("leader="), col("leader"))),
    )


CITED = ("index", "seq", "kind", "session", "group", "resource", "generation", "pid", "epoch",
         "revision", "time_ms", "leader")


def cited() -> Column:
    """The columns `cite` reads, as one struct. A window carries an earlier row as this
    and only the few rows that violate are cited from it: building every row's string
    cost more than the check itself."""
    return F.struct(*CITED)


def cite_row(name: str) -> Column:
    """`cite` of the struct column `name` made by `cited()`; null where it is null (no
    earlier row)."""
    return F.when(F.col(name).isNotNull(), cite(name))


def violations(df: Any, check: str, index: Column, revision: Column, subject: Column,
               detail: Column, evidence: Column) -> Any:
    return df.select(F.lit(check).alias("check"), index.cast("long").alias("index"),
                     revision.cast("long").alias("revision"),
                     subject.cast("string").alias("subject"), detail.alias("detail"),
                     evidence.alias("evidence"))


def commands(df: Any) -> Any:
    """The command rows (seq 0) that succeeded."""
    return df.filter((F.col("seq") == 0) & F.col("ok"))


def resource(prefix: str = "") -> Column:
    col = (lambda n: F.col(f"{prefix}.{n}")) if prefix else F.col
    return F.concat(col("group"), F.lit("/"), col("resource"))
