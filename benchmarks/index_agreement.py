"""Do two indexes give the same verdicts? Each data set's pages through a Detector over each.

Used by ``bench_quality.py --index postgres`` (``make bench-quality INDEX=postgres``): every
page of a set is checked in its order against a fresh SQLite file and a fresh index of the
other backend, and each verdict (duplicate or not, and of which page) is compared. The pages
are fingerprinted once, so the two runs see the same signatures.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scrapy_neardup import DedupConfig
from scrapy_neardup.detector import Arrival, Detector
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.index import SQLiteIndex


class Server:
    """A throwaway server of ``backend`` (postgres, redis) for the run."""

    def __init__(self, backend: str, folder: str) -> None:
        self.backend, self.stop = backend, lambda: None
        if backend == "postgres":
            import pg_server

            self.url, data = pg_server.start()
            self.stop = lambda: pg_server.stop(data)
        elif backend == "redis":
            from bench_redis import start_redis

            process, port = start_redis(folder)
            self.url, self.stop = f"redis://127.0.0.1:{port}/0", process.terminate
        else:
            raise SystemExit(f"index_agreement: no server backend {backend!r} (postgres, redis)")

    def index(self, config: DedupConfig):
        if self.backend == "postgres":
            from scrapy_neardup.index.engines.postgres import PostgresIndex

            return PostgresIndex(self.url, config, prefix=f"quality_{uuid.uuid4().hex}")
        from scrapy_neardup.index.engines.redis import RedisIndex

        return RedisIndex(self.url, config, prefix=f"quality:{uuid.uuid4().hex}")


def verdicts(index, config: DedupConfig, pages: list) -> list[tuple[bool, int | None]]:
    """(duplicate, the page number it duplicates) of each page, in order."""
    numbers: dict[int, int] = {}
    found = []
    with Detector(config, index) as detector:
        for number, (url, fp) in enumerate(pages):
            verdict = detector.decide(Arrival(url, "", revisit=False), fp)
            if verdict.doc_id is not None:
                numbers[verdict.doc_id] = number
            found.append((verdict.duplicate, numbers.get(verdict.duplicate_of)))
        if hasattr(index, "remove"):
            index.remove()
    return found


def agreement(sets: dict, backend: str, config: DedupConfig) -> list[tuple[str, int, int, int]]:
    """For each set: (name, pages, verdicts that agree, duplicates SQLite found)."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        server = Server(backend, folder)
        try:
            for name, data in sets.items():
                pages = [
                    (f"https://{name}.example/{i}", fingerprint(body, config))
                    for i, body in enumerate(data.bodies)
                ]
                base = verdicts(
                    SQLiteIndex(Path(folder) / f"{uuid.uuid4().hex}.sqlite", config), config, pages
                )
                other = verdicts(server.index(config), config, pages)
                same = sum(a == b for a, b in zip(base, other, strict=True))
                rows.append((name, len(pages), same, sum(d for d, _ in base)))
        finally:
            server.stop()
    return rows
