"""Parquet written by a second process, so that making rows and writing them use two cores.

Making a history's rows (the synthesizer and the state machine it drives, or a replay)
is sequential, but turning the rows into columns and encoding Parquet is not tied to
it: in one process the writer was about a fifth of the CPU per row. Here the rows go,
pickled a chunk at a time, through a pipe to a child process that runs the same
`PartitionedParquetWriter` into the same directory. A chunk of row dicts pickles in
about a tenth of what the writer spends on it (the dicts share their key strings and
many values, which pickle's memo sends once), so the producing process keeps nearly
all of its core for making rows.

Memory stays bounded: the pipe carries one chunk at a time, the child's reader thread
holds at most `QUEUED_CHUNKS` chunks it has not written yet (when they are full the
producer waits on the pipe), and the child's writer bounds its own buffers.

A failure on either side ends the whole write: an error in the child comes back as
`ParquetProcessError` with the child's traceback (and the child closes its files
without writing its buffers); an error in the producer, or its death, closes the pipe,
and the child then aborts at once, without writing the chunks it still holds. Either
way `write_parquet_in_child` returns only once the child has exited, so the caller (the
sink, whose manifest is the commit) can throw the run's files away knowing that
nothing is still writing them. The child ignores Ctrl-C: the producer's own end
(the pipe closing) is what stops it.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the child process writing Parquet imports this, not the machine
    from coord.history.rows import Row

CHUNK_ROWS = 4_096
"""Rows pickled and sent together (one pipe message)."""

QUEUED_CHUNKS = 8
"""Chunks the child holds received but not yet written, at most."""

JOIN_S = 60.0
"""How long the producer waits for the child to exit after the last chunk or an abort
(closing its files; the child's work is bounded by its buffers) before killing it."""


class ParquetProcessError(RuntimeError):
    """The Parquet-writing child process failed; the run's files are incomplete."""


def write_parquet_in_child(rows: Iterable[Row], out: Path, run: str) -> None:
    """Write `rows` as `PartitionedParquetWriter(out, run)` would, in a child process.
    Returns once every file is complete and closed; raises (after the child is gone) if
    either side failed."""
    # A process of its own (not a fork: the producer may run threads, a progress bar's;
    # not multiprocessing's spawn, which re-imports the producer's __main__).
    ours_sock, theirs = socket.socketpair()
    try:
        with theirs:
            child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno()), str(out), run],
                pass_fds=[theirs.fileno()],
            )
    except BaseException:
        ours_sock.close()
        raise
    ours = Connection(ours_sock.detach())
    try:
        try:
            _send(rows, ours)
            ours.send_bytes(b"")  # the end: close the files
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child stopped reading: its own answer says why
        answer = _answer(ours)
    except BaseException:
        ours.close()  # the child sees the end of its input without the end mark: it aborts
        _join(child)
        raise
    ours.close()
    _join(child)
    if answer is None:  # an exit status of -9 is likely the kernel's out-of-memory killer
        raise ParquetProcessError("the Parquet writer process exited without an answer "
                                  f"(exit status {child.returncode})")
    if answer != "ok":
        raise ParquetProcessError(f"the Parquet writer process failed:\n{answer}")
    if child.returncode != 0:
        raise ParquetProcessError(f"the Parquet writer process exited with {child.returncode}")


def _send(rows: Iterable[Row], conn: Connection) -> None:
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= CHUNK_ROWS:
            conn.send_bytes(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
            chunk = []
    if chunk:
        conn.send_bytes(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))


def _answer(conn: Connection) -> str | None:
    """The child's last word: "ok", or its traceback; None if it went without one."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _join(child: subprocess.Popen[bytes]) -> None:
    try:
        child.wait(JOIN_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _child(conn: Connection, out: str, run: str) -> None:
    """The child: chunks in, files out, then "ok" or the traceback."""
    from coord.history.partitioned import PartitionedParquetWriter

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chunks: queue.Queue[bytes | None] = queue.Queue(QUEUED_CHUNKS)
    gone = threading.Event()  # the producer went away without the end mark
    reader = threading.Thread(target=_receive, args=(conn, chunks, gone), daemon=True)
    reader.start()
    writer = None
    try:
        writer = PartitionedParquetWriter(Path(out), run)
        while (data := chunks.get()) is not None and not gone.is_set():
            if not data:
                writer.close()
                conn.send("ok")
                return
            writer.add_rows(pickle.loads(data))
        writer.abort()
    except BaseException:
        if writer is not None:
            writer.abort()
        with contextlib.suppress(OSError):  # the producer may be gone already
            conn.send(traceback.format_exc())


def _receive(conn: Connection, chunks: queue.Queue[bytes | None],
             gone: threading.Event) -> None:
    """The child's reader: the pipe's messages into `chunks` until the end mark. If the
    pipe closes first, or reading fails, it sets `gone` (the writer stops before its
    next chunk) and puts None (in case the writer waits for one)."""
    try:
        while True:
            data = conn.recv_bytes()
            chunks.put(data)
            if not data:
                return
    except BaseException:
        gone.set()
        chunks.put(None)


if __name__ == "__main__":
    _child(Connection(int(sys.argv[1])), sys.argv[2], sys.argv[3])
