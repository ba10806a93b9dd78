"""Shared fixtures: the real pages in ../shared/data and a deterministic hypothesis profile."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from crawling import SITE, serve
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` first, the longest first (``slow(SECONDS)``, 10 when not given):
    handed to xdist's workers one by one (``--maxschedchunk 1``), the longest ones start early
    and none is left alone at the end."""

    def seconds(item: pytest.Item) -> float:
        slow = item.get_closest_marker("slow")
        return (slow.args[0] if slow.args else 10) if slow else 0

    items.sort(key=seconds, reverse=True)  # stable: each file's tests stay in their order


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
def cleanportaleval_dir() -> Path:
    return _need(SHARED_DATA / "cleanportaleval")


@pytest.fixture(scope="session")
def zh_texts() -> list[str]:
    folder = _need(SHARED_DATA / "zh")
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("article-*.txt"))]


BACKENDS = ("sqlite", "memory", "toy", "redis", "postgres")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A real PostgreSQL server on 127.0.0.1 (``pg_server``), started for the test run."""
    import pg_server

    try:
        url, data = pg_server.start()
    except pg_server.Unavailable as exc:
        pytest.skip(str(exc))
    yield url
    pg_server.stop(data)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A real redis-server on 127.0.0.1 (a free port), started for the test run and stopped after it."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    folder = tmp_path_factory.mktemp("redis")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", ""]
    process = subprocess.Popen([server, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(10)


def make_index(backend: str, config, folder: Path, name: str = "index.db", redis_url: str | None = None):
    """A new index of ``backend`` for ``config`` (a file in ``folder``, or a fresh Redis prefix)."""
    from scrapy_neardup.index import MemoryIndex, SQLiteIndex

    if backend == "sqlite":
        return SQLiteIndex(folder / name, config)
    if backend == "memory":
        return MemoryIndex(config)
    if backend == "toy":
        from toy_index import ToyIndex

        return ToyIndex(folder / f"{name}.json", config)
    if backend == "redis":
        from scrapy_neardup.index.engines.redis import RedisIndex

        return RedisIndex(redis_url, config, prefix=f"test:{uuid.uuid4().hex}")
    if backend == "postgres":
        from scrapy_neardup.index.engines.postgres import PostgresIndex

        return PostgresIndex(redis_url, config, prefix=f"test_{uuid.uuid4().hex}")
    raise ValueError(backend)


@pytest.fixture(params=BACKENDS)
def open_detector(request, tmp_path):
    """``open_detector(config)``: a Detector over a new index of each storage backend in turn."""
    from scrapy_neardup.detector import Detector

    made = []
    url = request.getfixturevalue(f"{request.param}_url") if request.param in ("redis", "postgres") else None

    def open_(config, name: str = "index.db"):
        made.append(Detector(config, make_index(request.param, config, tmp_path, name, url)))
        return made[-1]

    open_.backend = request.param
    yield open_
    for detector in made:
        if request.param in ("redis", "postgres"):
            detector.index.remove()
        detector.close()


@pytest.fixture(scope="module")
def site() -> str:
    """The test site (tests/site) served on 127.0.0.1."""
    with serve(SITE) as url:
        yield url


@pytest.fixture
def copied_pages(tmp_path, aeb_pages) -> Path:
    """A folder of six real pages and byte-different copies of three of them (3 duplicates)."""
    folder = tmp_path / "pages"
    folder.mkdir()
    for i, body in enumerate(list(aeb_pages.values())[:6]):
        (folder / f"{i}.html").write_bytes(body)
        if i % 2 == 0:
            (folder / f"{i}-copy.html").write_bytes(body.replace(b"<body", b"<body data-copy='1'", 1))
    return folder
