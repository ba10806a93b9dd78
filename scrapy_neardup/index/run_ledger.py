"""Crawl runs in a ledger, over any engine: each run's heartbeat, which runs are this crawl,
which died, and the pages a run admitted while it runs (``pending``), fetched again by a live
run when it dies. Written once; the engine's transactions make a claim on a dead run, and
the record of a page, atomic for every crawler sharing the index."""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from . import stores
from .engine import Engine, retried
from .runs import Runs, alive

RUN, PENDING, DOC = stores.RUN.name, stores.PENDING.name, stores.DOC.name  # (``stores``)
DUPLICATES = stores.DUPLICATES.name


class RunLedger:
    """The crawl runs of a ledger (``ledger.Ledger``) over its ``engine``."""

    engine: Engine
    runs: Runs
    _runs: Any  # ``ledger._Shared``: with the records this run made (``mine``)
    transaction: Callable[[], AbstractContextManager[None]]

    def begin_run(self, action: str) -> None:
        """Start a crawl run. Runs open and alive now run beside it: one crawl. What a run that
        died without closing admitted may never have reached its output, so it is *unconfirmed*."""
        engine, now = self.engine, time.time()

        def begin() -> tuple[int, dict[int, dict]]:
            with self.transaction():
                open_runs = self._open_runs()
                run = engine.new_id(RUN)
                engine.put(RUN, run, {"started_at": now, "beat_at": now, "action": action,
                                      "host": socket.gethostname(), "pid": os.getpid()})  # fmt: skip
            return run, open_runs

        run, open_runs = retried(begin)
        self.runs = Runs(run).seen(open_runs, now)

    def _open_runs(self) -> dict[int, dict[str, Any]]:
        ids = list(self.engine.listing(RUN))
        found = zip(ids, self.engine.get(RUN, ids), strict=True)
        return {i: run for i, run in found if run and run.get("ended_at") is None}

    def live_runs(self) -> list[tuple[int, dict[str, Any]]]:
        """The runs not ended whose processes still run: crawls using the index now."""
        now = time.time()
        return [(i, run) for i, run in self._open_runs().items() if alive(run, now)]

    def beat(self) -> list[int]:
        """Show this run alive, and look at the others: runs found dead are unconfirmed from now on.
        The dead runs whose pages wait to be fetched again (``pending``) that no live run claims."""
        run, now = self.runs.current, time.time()
        if run is None:
            return []

        def work() -> dict[int, dict]:
            with self.transaction():
                self.engine.put(RUN, run, {"beat_at": now})
                return self._open_runs()

        open_runs = retried(work)
        self.runs = self.runs.seen(open_runs, now)
        waiting = []
        for dead in sorted(self.runs.dead):
            found = open_runs[dead]
            claimer = found.get("claimed_by")
            if found.get("recovered_at") is not None or not (claimer == run or self._claimable(claimer)):
                continue  # fetched again, or another live run does it
            if not self.pending(dead, 1):
                self._set_run(dead, {"recovered_at": now})  # nothing (more) to fetch again
            elif claimer != run:
                waiting.append(dead)
        return waiting

    def _set_run(self, run: int, fields: dict[str, Any]) -> None:
        def work() -> None:
            with self.transaction():
                self.engine.put(RUN, run, fields)

        retried(work)

    def _claimable(self, claimer: Any) -> bool:
        """Whether a dead run's pages are nobody's to fetch again: no claim, or its claimer's run
        is over (ended, or dead itself)."""
        return claimer != self.runs.current and not self.runs.this_crawl(claimer)

    def claim(self, dead: int) -> bool:
        """Take on fetching again what the dead run admitted (one live run does, for every crawler)."""

        def work() -> bool:
            with self.transaction():
                found = self.engine.get(RUN, [dead], ("claimed_by", "ended_at"))[0] or {"ended_at": 0}
                claimer = found.get("claimed_by")
                if found.get("ended_at") is not None or not self._claimable(claimer):
                    return False
                return self.engine.compare_and_set(RUN, dead, "claimed_by", claimer, self.runs.current)

        return self.runs.current is not None and retried(work)

    def pending(self, run: int, most: int | None = None) -> list[tuple[int, bytes]]:
        """The pages ``run`` admitted whose items it may not have delivered, with the requests
        that fetch them again: (document id, kept request), at most ``most``."""
        found: list[tuple[int, bytes]] = []
        ids = self.engine.listing(PENDING)
        while chunk := list(itertools.islice(ids, 500)):
            for doc, row in zip(chunk, self.engine.get(PENDING, chunk, ("run", "request")), strict=True):
                if row and row.get("run") == run and isinstance(row.get("request"), bytes):
                    found.append((doc, row["request"]))
                    if most is not None and len(found) >= most:
                        return found
        return found

    def fetched_again(self, doc: int, dead: int) -> None:
        """A page the ``dead`` run admitted was fetched again: no longer that run's to recover
        (the live run that recorded it again keeps it pending in its own name)."""

        def work() -> None:
            with self.transaction():
                found = self.engine.get(PENDING, [doc], ("run",))[0]
                if found and found.get("run") == dead:
                    self.engine.delete(PENDING, doc)

        retried(work)

    def _pending(self, doc_id: int, request: bytes | None) -> None:
        """This run delivers the page's items: until it closes, they may be lost with it."""
        if request and self.runs.current is not None:
            self.engine.put(PENDING, doc_id, {"run": self.runs.current, "request": request})

    def end_run(self) -> None:
        """Close the run cleanly, once what it admitted reached the output (the feeds are stored)."""
        run = self.runs.current
        if run is None:
            return
        self.runs = Runs()
        own = [doc for doc, _ in self.pending(run)]
        for start in range(0, len(own), 1000):

            def confirm(chunk: list[int] = own[start : start + 1000]) -> None:
                with self.transaction():
                    for doc in chunk:
                        self.engine.delete(PENDING, doc)

            retried(confirm)

        self._set_run(run, {"ended_at": time.time()})

    @property
    def interrupted_runs(self) -> bool:
        return bool(self.runs.dead)

    def _runs_of(self, ids: list[int]) -> list[tuple[int, Any]]:
        """The run of each of ``ids`` that exists; those this run made are known, the rest read."""
        mine, current = self._runs.mine, self.runs.current
        unknown = [i for i in ids if i not in mine]
        found = dict(zip(unknown, self.engine.get(DOC, unknown, ("run",)), strict=True)) if unknown else {}
        return [(i, current if i in mine else found[i].get("run")) for i in ids if i in mine or found.get(i)]

    def unconfirmed(self, ids: list[int]) -> set[int]:
        """Those of ``ids`` admitted by a run that died."""
        if not self.runs.dead or not ids:
            return set()
        return {i for i, run in self._runs_of(ids) if run in self.runs.dead}

    def stood_for(self, doc_id: int) -> bool:
        """Whether a page this crawl admitted while ``doc_id`` was unconfirmed stands for it: let
        through beside it (its weak link), by a run that did not die. Its group's copies, ``doc_id``
        fetched again included, are then duplicates of that page."""
        beside = sorted(self.engine.members(DUPLICATES, [doc_id])[0])
        if not beside:
            return False
        rows = zip(beside, self.engine.get(DOC, beside, ("status", "run")), strict=True)
        return any(
            row and row.get("status") == "unique" and self.runs.this_crawl(row.get("run"))
            and row.get("run") not in self.runs.dead
            for _, row in rows
        )  # fmt: skip

    def from_earlier_crawls(self, ids: list[int]) -> set[int]:
        if self.runs.current is None or not ids:
            return set()
        return {i for i, run in self._runs_of(ids) if self.runs.earlier(run)}
