"""The `:` command line: view names and their aliases (k9s style), and quitting."""

from __future__ import annotations

VIEWS = ("members", "sessions", "owners", "producers", "keys", "events", "users", "roles", "pulses")

ALIASES = {
    "members": ("members", "member", "mem", "m", "nodes", "no"),
    "sessions": ("sessions", "session", "sess", "se", "s"),
    "owners": ("owners", "owner", "own", "ow", "o"),
    "producers": ("producers", "producer", "pids", "pid", "prod", "p"),
    "keys": ("keys", "key", "kv", "k"),
    "events": ("events", "event", "ev", "e"),
    "users": ("users", "user", "usr"),
    "roles": ("roles", "role", "rol"),
    "pulses": ("pulses", "pulse", "pu"),
}
QUIT = ("q", "q!", "quit", "exit", "qa")

_BY_ALIAS = {alias: view for view, aliases in ALIASES.items() for alias in aliases}


def parse(line: str) -> tuple[str, str]:
    """("view", name) | ("quit", "") | ("error", message) for one `:` line."""
    word = line.strip().lstrip(":").strip().lower()
    if word in QUIT:
        return "quit", ""
    view = _BY_ALIAS.get(word)
    if view is not None:
        return "view", view
    known = ", ".join(f":{v}" for v in VIEWS)
    return "error", f"unknown command {word!r}: try {known}, :q"
