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


@pytest.fixture(scope="module")
def site() -> str:
    """The test site (tests/site) served on 127.0.0.1."""
    with serve(SITE) as url:
        yield url
