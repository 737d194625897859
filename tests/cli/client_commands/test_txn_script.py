"""`coord kv txn`'s stdin format (coord.cli.client_commands.txn_script): a script
parsed into the TxnBuilder it means, and each syntax error naming its line."""

from __future__ import annotations

import pytest

from coord.cli.client_commands.txn_script import TxnSyntaxError, parse_txn
from coord.client.txn import TxnBuilder


def test_parse_txn_full_script():
    script = (
        'version("lock") = 0\n'
        'value("cfg") != "old value"\n'
        "mod(counter) > 3\n"
        "\n"
        "put lock me\n"
        "# a comment\n"
        "put 'a key' 'a value' --prev-kv\n"
        "\n"
        "get lock\n"
        "get jobs/ --prefix --limit 2\n"
        "del a z\n"
        "\n\n"
    )
    got = parse_txn(script).build(request_id="r")
    expected = (
        TxnBuilder()
        .if_version("lock", "=", 0)
        .if_value("cfg", "!=", "old value")
        .if_mod("counter", ">", 3)
        .then_put("lock", "me")
        .then_put("a key", "a value", prev_kv=True)
        .else_get("lock")
        .else_get(prefix="jobs/", limit=2)
        .else_delete("a", "z")
        .build(request_id="r")
    )
    assert got == expected


def test_parse_txn_without_compares_or_failure_ops():
    got = parse_txn("\nput k v\ndel --prefix old/\n").build(request_id="r")
    assert got == TxnBuilder().then_put("k", "v").then_delete(prefix="old/").build(
        request_id="r")


@pytest.mark.parametrize(
    "script,line",
    [
        ("version(k) = x\n", 1),
        ("lease(k) = 1\n", 1),
        ("version(k) = 0\n\nfrob k\n", 3),
        ("\nput k\n", 2),
        ("\nput k v\n\nget\n", 4),
        ("\n\n\n\nput k v\n", 3),
        ('value("k) = 1\n', 1),
        ("\nget a b --prefix\n", 2),
        ("\nget a --limit x\n", 2),
    ],
)
def test_parse_txn_errors_name_the_line(script, line):
    with pytest.raises(TxnSyntaxError, match=f"line {line}:"):
        parse_txn(script)
