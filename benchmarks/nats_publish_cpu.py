"""The adapter's own CPU per ``JetStreamMessagingBackend.publish``, without a server.

    .venv/bin/python benchmarks/nats_publish_cpu.py [N]

A stand-in nats-py client answers every request with a PubAck at once, so what is measured is
the publish path alone (subject, headers, request, PubAck decode, publication ledger, index):
process CPU µs per publish over N publishes (default 20,000) after 500 to warm up. Compare two
trees by running it with each on ``PYTHONPATH``; the machine's load matters less than for
``nats_bench.py`` (CPU time, one process).
"""

import asyncio
import sys
import time

from videoflow_aio.adapters.nats import JetStreamMessagingBackend, _channels
from videoflow_aio.contracts.messaging import make_channel, make_envelope


class Msg:
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


class FakeNC:
    is_closed = False
    is_connected = True

    def __init__(self):
        self.seq = 0

    async def request(self, subject, payload, timeout=None, headers=None):  # noqa: ASYNC109 - nats-py's
        self.seq += 1
        return Msg(b'{"stream":"VF__f__r__n","seq":%d}' % self.seq)

    async def publish(self, *a, **k):
        pass


async def main(n):
    b = JetStreamMessagingBackend("nats://127.0.0.1:1")
    c = b._c
    c.nc = FakeNC()
    c.loop = asyncio.get_running_loop()
    ch = make_channel("f", "r", "n", "work", retention="limits")
    c.chans[ch.channel] = _channels.new_chan(c, ch, "created")
    envs = [make_envelope(ch.channel, f"p{i}", b"v" * 128) for i in range(n)]
    loop = asyncio.get_running_loop()
    for e in envs[:500]:
        await b.publish(e, loop.time() + 5)
    t0 = time.process_time()  # wall-clock: a benchmark (process CPU)
    for e in envs[500:]:
        await b.publish(e, loop.time() + 5)
    dt = time.process_time() - t0
    print(f"{dt / (n - 500) * 1e6:.2f} us/publish")


asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000))
