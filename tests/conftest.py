"""Shared fixtures: the real pages in ../shared/data and a deterministic hypothesis profile."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from crawling import SITE, serve
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"test data not found: {path} (the shared/ folder beside the checkout)")
    return path


@pytest.fixture(scope="session")
def aeb_dir() -> Path:
    return _need(SHARED_DATA / "aeb")


@pytest.fixture(scope="session")
def aeb_pages(aeb_dir: Path) -> dict[str, bytes]:
    """The 181 real news and blog pages, raw bytes by id; no two are duplicates."""
    return {
        p.name.split(".")[0]: gzip.decompress(p.read_bytes()) for p in sorted((aeb_dir / "html").glob("*.gz"))
    }


@pytest.fixture(scope="session")
def aeb_truth(aeb_dir: Path) -> dict[str, dict]:
    return json.loads((aeb_dir / "ground-truth.json").read_text())


@pytest.fixture(scope="session")
def zh_texts() -> list[str]:
    folder = _need(SHARED_DATA / "zh")
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("article-*.txt"))]


BACKENDS = ("sqlite", "memory")


def make_index(backend: str, config, folder: Path, name: str = "index.db"):
    """A new index of ``backend`` for ``config`` (a file in ``folder`` where it keeps one)."""
    from scrapy_neardup.index import MemoryIndex, SQLiteIndex

    if backend == "sqlite":
        return SQLiteIndex(folder / name, config)
    if backend == "memory":
        return MemoryIndex(config)
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def open_detector(request, tmp_path):
    """``open_detector(config)``: a Detector over a new index of each storage backend in turn."""
    from scrapy_neardup.detector import Detector

    made = []

    def open_(config, name: str = "index.db"):
        made.append(Detector(config, make_index(request.param, config, tmp_path, name)))
        return made[-1]

    open_.backend = request.param
    yield open_
    for detector in made:
        detector.close()


@pytest.fixture(scope="module")
def site() -> str:
    """The test site (tests/site) served on 127.0.0.1."""
    with serve(SITE) as url:
        yield url
