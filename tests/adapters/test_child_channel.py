"""The one way the service talks to its children (``adapters.child_process``): a real child
process, its requests numbered and answered by number in any order, what it prints kept
out of the channel, and every request waiting when it ends refused with ``ChildGone``."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from spark_offset_sidecar.adapters.child_process import (
    Channel,
    ChildGone,
    ChildOutput,
    Supervisor,
    frame,
)

# A child that prints to its standard output (as a library might), answers each request
# after the delay it names (so later requests overtake earlier ones), and ends on "end".
CHILD = """
import os, sys, threading, time
from spark_offset_sidecar.adapters.child_process import ChannelEnd
channel = ChannelEnd()
print("a library's word on standard output", flush=True)
os.write(1, b"and one written straight to its descriptor\\n")
def answer(number, request):
    time.sleep(request["delay"])
    channel.reply(number, {"echo": request["value"], "pid": os.getpid()})
for number, request in channel.requests():
    if request == "end":
        os._exit(3)
    threading.Thread(target=answer, args=(number, request)).start()
"""


def test_requests_waiting_at_once_are_answered_by_number_and_refused_once_it_ends() -> None:
    async def scenario() -> None:
        child = Supervisor("test child", (sys.executable, "-c", CHILD), death_signal=signal.SIGKILL)
        channel = Channel(await child.start())
        try:
            delays = [0.6, 0.4, 0.2, 0.0]  # the last asked is answered first
            async with asyncio.timeout(60):  # a channel its prints corrupted never answers
                replies = await asyncio.gather(
                    *(channel.ask({"delay": d, "value": i}) for i, d in enumerate(delays))
                )
            assert [r["echo"] for r in replies] == [0, 1, 2, 3]
            assert {r["pid"] for r in replies} == {child.pid}
            slow = asyncio.ensure_future(channel.ask({"delay": 30.0, "value": "late"}))
            await asyncio.sleep(0)  # sent
            with pytest.raises(ChildGone):
                await channel.ask("end")  # it ends without answering
            with pytest.raises(ChildGone, match="ended before it answered"):
                await slow  # waiting when it ended
            assert await child.wait() == 3
            with pytest.raises(ChildGone, match="has ended"):
                await channel.ask({"delay": 0.0, "value": "after"})  # and every later one
        finally:
            await child.stop()

    asyncio.run(scenario())


def test_the_output_hands_each_whole_frame_over_however_it_arrives_then_its_end() -> None:
    async def scenario() -> None:
        output = ChildOutput(asyncio.get_running_loop())
        data = frame((0, "early")) + frame((1, {"big": "x" * 100_000})) + frame((2, None))
        output.feed_data(data[:7])  # read before the channel takes it: kept
        frames: list[object] = []
        ends: list[BaseException | None] = []
        output.deliver(frames.append, ends.append)
        assert frames == []
        for start in range(7, len(data), 4096):  # as a pipe hands it over, in pieces
            output.feed_data(data[start : start + 4096])
        assert frames == [(0, "early"), (1, {"big": "x" * 100_000}), (2, None)]
        output.feed_data(frame((3, "cut"))[:-1])
        output.feed_eof()
        assert len(frames) == 3, "a frame cut short is never handed over"
        assert ends == [None]

    asyncio.run(scenario())
