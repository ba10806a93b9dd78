"""Many processes checking the same duplicate groups at once, against one server's index: each
group must be admitted once and every page recorded (test_redis.py, test_postgres.py)."""

from __future__ import annotations

import collections
import multiprocessing
import random
import uuid

from scrapy_neardup import DedupConfig
from scrapy_neardup.detector import Detector

CONFIG = DedupConfig(extractor="text", min_tokens=5)
_WORDS = [f"w{i}" for i in range(400)] + ["the", "a", "is", "was", "has", "will", "can"] * 20
GROUPS = [" ".join(random.Random(g).choices(_WORDS, k=120)) for g in range(8)]  # distinct pages


def variants(text: str) -> list[str]:
    """A page and two light edits of it: one duplicate group."""
    words = text.split()
    return [text, " ".join(words[:-3]), " ".join([*words[:10], "indeed", *words[10:]])]


def _check_all(opened, url: str, prefix: str, process: int, seed: int, barrier, results) -> None:
    pages = [
        (f"http://p{process}.example/{g}/{v}", t)
        for g, text in enumerate(GROUPS)
        for v, t in enumerate(variants(text))
    ]
    random.Random(seed * 10 + process).shuffle(pages)
    with Detector(CONFIG, opened(url, CONFIG, prefix)) as detector:
        barrier.wait()
        results.put([(page_url, detector.check(page_url, text).duplicate) for page_url, text in pages])


def clean_processes() -> multiprocessing.context.BaseContext:
    """Processes forked from a server process that imported the package and holds nothing else
    (``forkserver``): no lock of this process's threads (an index an earlier test left open), which
    a child forked from here inherits and may wait on forever, and no import to wait for, which
    costs a spawned child most of a second."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["scrapy_neardup.detector", "scrapy_neardup.index", "race"])
    return ctx


def together(target, arguments: list[tuple], start: str = "fork") -> list:
    """``target(*args, barrier, results)`` in a process for each of ``arguments``, started at once
    (a barrier); every list each put on ``results``, joined. ``start="clean"`` for a target that
    opens an index file (``clean_processes``)."""
    ctx = clean_processes() if start == "clean" else multiprocessing.get_context(start)
    barrier, results = ctx.Barrier(len(arguments)), ctx.Queue()
    workers = [ctx.Process(target=target, args=(*args, barrier, results)) for args in arguments]
    for worker in workers:
        worker.start()
    found = [item for _ in workers for item in results.get(timeout=120)]
    for worker in workers:
        worker.join(30)
    return found


def four_processes(opened, url: str, rounds: int, separator: str = ":") -> None:
    """``rounds`` rounds of 4 processes over ``opened(url, config, prefix)``, a fresh index each."""
    for round_ in range(rounds):
        prefix = f"race{separator}{uuid.uuid4().hex}"
        opened(url, CONFIG, prefix).close()  # made once, as a crawl's start does
        verdicts = together(_check_all, [(opened, url, prefix, n, round_) for n in range(4)])
        admitted = collections.Counter(page.split("/")[3] for page, duplicate in verdicts if not duplicate)
        assert admitted == {str(g): 1 for g in range(len(GROUPS))}, f"round {round_}"
        index = opened(url, CONFIG, prefix)
        assert index.stats()["documents"] == 4 * 3 * len(GROUPS)  # every page recorded, nothing lost
        assert index.stats()["unique"] == len(GROUPS)
        index.remove()
