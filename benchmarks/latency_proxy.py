"""A TCP proxy on 127.0.0.1 that adds a round trip's delay, and counts the round trips it carries.

    with LatencyProxy("127.0.0.1", 6379, rtt_ms=1.0) as proxy:   # a server "in the same zone"
        ...  # connect to 127.0.0.1:proxy.port
        proxy.round_trips

Every chunk is held for half the round trip in each direction (the order of a connection's
bytes kept). A round trip is counted each time a client sends after the server last spoke
on that connection (a request, or a batch of them, and its answer): what the network's
latency is paid for, whatever the client library does.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import Any


class LatencyProxy:
    """Forwards 127.0.0.1:``port`` to ``host``:``target``, ``rtt_ms`` slower a round trip."""

    def __init__(self, host: str, target: int, rtt_ms: float) -> None:
        self.host, self.target, self.delay = host, target, rtt_ms / 2000
        self.round_trips = 0
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="latency-proxy")

    def __enter__(self) -> LatencyProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()
        for task in asyncio.all_tasks(self._loop):  # connections still open: ended quietly
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(self._loop), return_exceptions=True))

    async def _connection(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        try:
            server_in, server_out = await asyncio.open_connection(self.host, self.target)
        except OSError:
            client_out.close()
            return
        turn = {"server spoke": True}  # a client's first bytes begin a round trip
        with contextlib.suppress(asyncio.CancelledError):  # the proxy stopped
            await asyncio.gather(
                self._pipe(client_in, server_out, turn, client=True),
                self._pipe(server_in, client_out, turn, client=False),
                return_exceptions=True,
            )

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, turn: dict[str, Any], client: bool
    ) -> None:
        """Copy ``source`` to ``sink``, each chunk held ``delay`` seconds, in order."""
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await held.get()
                if not chunk:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                sink.write(chunk)
                await sink.drain()
            sink.close()

        delivering = asyncio.ensure_future(deliver())
        try:
            while chunk := await source.read(65536):
                if client and turn["server spoke"]:
                    self.round_trips += 1
                turn["server spoke"] = not client
                held.put_nowait((time.monotonic() + self.delay, chunk))
        except (ConnectionError, OSError):
            pass
        finally:
            held.put_nowait((0.0, b""))
            await asyncio.gather(delivering, return_exceptions=True)
