"""`coord.tagged_calls.TaggedCalls`, the calling side of both pipelined streams: calls
made in one loop turn leave in one message, answers settle out of order, a call given
up (expired or cancelled) is abandoned at the far end, a failed stream fails them all."""

from __future__ import annotations

import asyncio

import pytest

from coord.tagged_calls import MAX_BATCH, TaggedCalls


def test_one_message_per_loop_turn_and_answers_out_of_order():
    async def main() -> None:
        calls: TaggedCalls[tuple[int, str]] = TaggedCalls()
        sent: list[list[tuple[int, str]]] = []

        async def write(batch: list[tuple[int, str]]) -> None:
            sent.append(batch)
            for tag, _ in reversed(batch):  # the far end answers the last one first
                calls.settle(tag, f"answer {tag}")

        sender = asyncio.ensure_future(calls.send_loop(write))
        got = await asyncio.gather(*(calls.call(lambda t, x=x: (t, x), 1.0, TimeoutError)
                                     for x in "abc"))
        assert got == ["answer 1", "answer 2", "answer 3"]
        assert sent == [[(1, "a"), (2, "b"), (3, "c")]]
        assert not calls.pending
        sender.cancel()

    asyncio.run(main())


def test_a_call_given_up_is_abandoned_and_a_failed_stream_fails_the_rest():
    async def main() -> None:
        calls: TaggedCalls[int] = TaggedCalls()
        abandoned: list[int] = []
        with pytest.raises(TimeoutError, match="0.01"):
            await calls.call(lambda t: t, 0.01, lambda s: TimeoutError(f"{s}"), abandoned.append)
        task = asyncio.ensure_future(calls.call(lambda t: t, 5.0, TimeoutError, abandoned.append))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert abandoned == [1, 2] and not calls.pending
        calls.settle(2, "late")  # an answer to a call given up is dropped
        waiting = [asyncio.ensure_future(calls.call(lambda t: t, 5.0, TimeoutError))
                   for _ in range(3)]
        await asyncio.sleep(0)
        calls.fail_all(lambda: ConnectionError("stream gone"))
        for w in waiting:
            with pytest.raises(ConnectionError):
                await w
        assert not calls.pending and not calls.outbox

    asyncio.run(main())


def test_a_stream_that_ended_stops_its_tasks_and_fails_its_calls_once():
    """`ended` for the open stream cancels it and its other task and fails what is in
    flight; for a stream already replaced (a late report of an old one) it does nothing."""
    class _Stream:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    async def main() -> None:
        calls: TaggedCalls[int] = TaggedCalls()
        old, new = _Stream(), _Stream()
        forever = asyncio.Event()
        calls.opened(old, forever.wait(), forever.wait())
        tasks = list(calls._tasks)
        waiting = asyncio.ensure_future(calls.call(lambda t: t, 5.0, TimeoutError))
        await asyncio.sleep(0)
        calls.ended(old, lambda: ConnectionError("old stream gone"))
        with pytest.raises(ConnectionError):
            await waiting
        await asyncio.gather(*tasks, return_exceptions=True)
        assert old.cancelled and calls.stream is None and all(t.cancelled() for t in tasks)
        calls.opened(new, forever.wait())
        waiting = asyncio.ensure_future(calls.call(lambda t: t, 5.0, TimeoutError))
        await asyncio.sleep(0)
        calls.ended(old, lambda: ConnectionError("reported late"))  # not the open one
        assert calls.stream is new and not new.cancelled and not waiting.done()
        calls.settle(2, "answer")
        assert await waiting == "answer"
        calls.ended(new, lambda: ConnectionError("done"))

    asyncio.run(main())


def test_no_message_carries_more_than_max_batch_requests():
    """The serving end refuses a longer message (server/transport/tagged_stream)."""
    async def main() -> None:
        calls: TaggedCalls[int] = TaggedCalls()
        sent: list[int] = []

        async def write(batch: list[int]) -> None:
            sent.append(len(batch))
            for tag in batch:
                calls.settle(tag, tag)

        sender = asyncio.ensure_future(calls.send_loop(write))
        got = await asyncio.gather(*(calls.call(lambda t: t, 5.0, TimeoutError)
                                     for _ in range(2 * MAX_BATCH + 1)))
        assert got == list(range(1, 2 * MAX_BATCH + 2))
        assert sent == [MAX_BATCH, MAX_BATCH, 1]
        sender.cancel()

    asyncio.run(main())
