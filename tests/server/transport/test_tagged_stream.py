"""coord.server.transport.tagged_stream.TaggedStream, the serving side of both pipelined
streams: with its limit of requests in flight, it reads no further message until one of
them is answered, so a caller cannot make it hold more."""

from __future__ import annotations

import asyncio

from coord.server.transport.tagged_stream import TaggedStream

TEST_TIMEOUT = 10.0


def test_no_message_is_read_while_the_limit_of_requests_is_in_flight() -> None:
    async def main() -> None:
        release = {tag: asyncio.Event() for tag in range(1, 6)}
        read: list[int] = []
        answered: list[int] = []

        async def messages():
            for tag in release:  # one request a message
                read.append(tag)
                yield tag

        async def send(results: list[int]) -> None:
            answered.extend(results)

        async def serve(tag: int) -> int:
            await release[tag].wait()
            return tag

        stream = TaggedStream(send, lambda tag, e: -tag, max_in_flight=2)
        run = asyncio.ensure_future(stream.run(messages(), lambda t: stream.start(t, serve(t))))

        async def turns() -> None:
            """Loop turns enough for the reader to read on if it could (everything here
            is in this one loop: no other thread, no timer)."""
            for _ in range(50):
                await asyncio.sleep(0)

        await turns()
        assert read == [1, 2] and sorted(stream.in_flight) == [1, 2]
        release[2].set()
        await turns()
        assert read == [1, 2, 3] and sorted(stream.in_flight) == [1, 3]
        stream.cancel(1)  # a cancelled request makes room too
        await turns()
        assert read == [1, 2, 3, 4] and sorted(stream.in_flight) == [3, 4]
        for event in release.values():
            event.set()
        await asyncio.wait_for(run, TEST_TIMEOUT)
        assert read == [1, 2, 3, 4, 5] and sorted(answered) == [2, 3, 4, 5]

    asyncio.run(main())
