"""Small userspace TCP proxies on loopback for network faults the kernel here cannot
make (no netem): a failover address that switches servers, and a link with latency.

Each runs an asyncio loop on a thread of its own in the test process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from tests.harness.servers import HOST


class Proxy:
    """Accepts on a free loopback port and hands each connection to ``serve``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.writers: set[asyncio.StreamWriter] = set()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, HOST, 0), self.loop).result(5)
        self.port = int(self.server.sockets[0].getsockname()[1])

    def target(self) -> int:
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream = await asyncio.open_connection(HOST, self.target())
        except OSError:
            writer.transport.abort()
            return
        pair = {writer, upstream}
        self.writers |= pair
        await asyncio.gather(self.pipe(reader, upstream), self.pipe(upstream_reader, writer))
        self.writers -= pair

    async def pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sink.transport.abort()

    def call(self, action: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(action)

    def close(self) -> None:
        async def end() -> None:
            self.server.close()
            for writer in list(self.writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(end(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class SwitchProxy(Proxy):
    """To port ``to``; `switch()` drops every connection and sends new ones to another
    port (a failover address)."""

    def __init__(self, to: int) -> None:
        self.to = to
        super().__init__()

    def target(self) -> int:
        return self.to

    def switch(self, to: int) -> None:
        def move() -> None:
            self.to = to
            for writer in list(self.writers):
                writer.transport.abort()

        self.call(move)


class DelayProxy(Proxy):
    """To port ``to``, every byte delayed by half of ``rtt`` seconds each way (set it at
    any time with `set_rtt()`; it applies to what arrives from then on, in order)."""

    def __init__(self, to: int) -> None:
        self.to = to
        self.rtt = 0.0
        super().__init__()

    def target(self) -> int:
        return self.to

    def set_rtt(self, rtt: float) -> None:
        def change() -> None:
            self.rtt = rtt

        self.call(change)

    async def pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                sink.write(data)
                await sink.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while data := await source.read(65536):
                queue.put_nowait((loop.time() + self.rtt / 2, data))
            queue.put_nowait((loop.time() + self.rtt / 2, b""))
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            sink.transport.abort()


__all__ = ["DelayProxy", "Proxy", "SwitchProxy"]
