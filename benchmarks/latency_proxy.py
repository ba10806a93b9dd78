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

import contextlib
import multiprocessing
import queue
import socket
import threading
import time
from typing import Any


class LatencyProxy:
    """Forwards 127.0.0.1:``port`` to ``host``:``target``, ``rtt_ms`` slower a round trip.

    It runs in a process of its own: in the benchmark's process its thread would wait for the
    interpreter lock behind the threads serving the crawled site, up to a switch interval (5 ms)
    a chunk, and so add far more than ``rtt_ms`` (a real network holds no such lock)."""

    def __init__(self, host: str, target: int, rtt_ms: float) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        context = multiprocessing.get_context("spawn")
        self._trips = context.Value("q", 0, lock=False)
        self._ready = context.Event()
        relay = _Relay(host, target, rtt_ms / 2000, self.port, self._trips)
        self._process = context.Process(
            target=relay.serve, args=(self._ready,), daemon=True, name="latency-proxy"
        )

    @property
    def round_trips(self) -> int:
        return self._trips.value

    def __enter__(self) -> LatencyProxy:
        self._process.start()
        if not self._ready.wait(30):
            raise RuntimeError("the latency proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(10)


class _Relay:
    """The proxy's own process: two threads a connection, one each way, each chunk held by a
    sleep (precise to some 0.1 ms, where an event loop's timers round up to whole ms)."""

    def __init__(self, host: str, target: int, delay: float, port: int, trips: Any) -> None:
        self.host, self.target, self.delay, self.port, self.trips = host, target, delay, port, trips

    def serve(self, ready: Any) -> None:
        with socket.create_server(("127.0.0.1", self.port)) as listener:
            ready.set()
            while True:
                client, _ = listener.accept()
                try:
                    server = socket.create_connection((self.host, self.target))
                except OSError:
                    client.close()
                    continue
                for sock in (client, server):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                turn = {"server spoke": True}  # a client's first bytes begin a round trip
                for source, sink, from_client in ((client, server, True), (server, client, False)):
                    args = (source, sink, turn, from_client)
                    threading.Thread(target=self._pipe, args=args, daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, turn: dict[str, bool], client: bool) -> None:
        """Copy ``source`` to ``sink``, each chunk held ``delay`` seconds, in order."""
        held: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

        def deliver() -> None:
            with contextlib.suppress(OSError):
                while chunk := (item := held.get())[1]:
                    wait = item[0] - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    sink.sendall(chunk)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

        threading.Thread(target=deliver, daemon=True).start()
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if client and turn["server spoke"]:
                    self.trips.value += 1
                turn["server spoke"] = not client
                held.put((time.monotonic() + self.delay, chunk))
        held.put((0.0, b""))
