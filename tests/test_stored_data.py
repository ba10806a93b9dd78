"""What an index keeps is data: skipped requests and URL rule keys read back exactly, and a row
planted by someone else (a pickle, a callback naming no spider method, a key of any bytes) is
left out with a warning, never run and never a stopped crawl."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import sys
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import forked
import pytest
from conftest import BACKENDS, make_index
from crawling import ADDON, crawl
from hypothesis import given
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.http import FormRequest
from test_urls import fetched, url_site  # the URL-rule test site
from url_site import pages

from scrapy_neardup import DedupConfig
from scrapy_neardup.crawl import kept_requests
from scrapy_neardup.url_rule import HOST, PARAM, SEGMENT, RuleKey, read_rule
from scrapy_neardup.urls import UrlModel

ARTICLES = 8  # the URL-rule site, a third of its size in test_urls.py: each URL's kind is there


class NewsSpider(Spider):
    name = "news"

    def parse_story(self, response):
        pass

    def failed(self, failure):
        pass


class Planted:
    """A pickle that creates a file when it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


# --- requests kept as data ------------------------------------------------------------------


def test_a_kept_request_comes_back_with_its_callbacks_headers_and_meta():
    spider = NewsSpider()
    request = Request(
        "http://x/a?id=1", callback=spider.parse_story, errback=spider.failed,
        headers={"X-Token": b"\xff\x00"}, meta={"depth": 2, "tags": ["a", None]},
        cookies={"k": "v"}, priority=-3, flags=["f"], cb_kwargs={"n": 1.5},
    )  # fmt: skip
    kept = kept_requests.keep(request, spider)
    assert kept is not None and json.loads(kept)["callback"] == "parse_story"
    back = kept_requests.revive(kept, spider, "http://x/a?id=1")
    assert (back.url, back.method, back.body, back.priority) == (request.url, "GET", b"", -3)
    assert back.callback == spider.parse_story and back.errback == spider.failed
    assert back.headers.getlist("X-Token") == [b"\xff\x00"]
    assert back.meta == request.meta and back.cb_kwargs == {"n": 1.5} and back.flags == ["f"]


def test_how_a_request_travelled_is_not_kept():
    """What Scrapy's components set on the way (a proxy, a slot, credentials, the default headers)
    is left out: the revived request gets it anew from the same components."""
    request = Request(
        "http://x/a", meta={"proxy": "http://proxy:3128", "download_slot": "x", "download_timeout": 9,
                            "redirect_urls": ["http://x/b"], "_neardup_again": 4, "note": "kept"},
        headers={"User-Agent": "Scrapy", "Authorization": "Basic c2VjcmV0", "Cookie": "s=1", "X-Own": "1"},
    )  # fmt: skip
    fields = json.loads(kept_requests.keep(request, NewsSpider()))
    assert fields["meta"] == {"note": "kept"} and fields["headers"] == {"X-Own": ["1"]}


def _steering(**change) -> bytes:
    fields = json.loads(kept_requests.keep(Request("http://x/a"), NewsSpider()))
    return json.dumps({**fields, **change}).encode()


@pytest.mark.parametrize(
    "row",
    [
        _steering(url="http://169.254.169.254/latest/meta-data/"),  # not its row's URL
        _steering(method="POST"),
        _steering(body="aGVsbG8="),
        _steering(meta={"proxy": "http://attacker:8080"}),
        _steering(meta={"download_slot": "internal"}),
        _steering(headers={"Authorization": ["Bearer planted"]}),
        _steering(headers={"cookie": ["session=planted"]}),
    ],
    ids=["another-url", "post", "body", "proxy", "slot", "authorization", "cookie"],
)
def test_a_row_that_says_how_to_travel_or_elsewhere_is_refused(row):
    with pytest.raises(ValueError):
        kept_requests.revive(row, NewsSpider(), "http://x/a")


def test_a_request_read_from_the_index_waits_for_a_host_and_port_the_crawl_asks_for():
    """The crawl's links are told apart by scheme, host and port, however their URLs are
    written (each URL's beginning is remembered, not parsed again)."""
    from scrapy_neardup.crawl.hosts import Hosts

    hosts, scheduled = Hosts(), []
    for url in ("http://x?q=1/a", "HTTP://X:80/b", "http://u@y:81#f/c", "mailto:a@b", "http://z:bad/"):
        hosts.asked(url)
        hosts.asked(url)
    assert hosts.allows("http://x/") and hosts.allows("http://y:81/") and not hosts.allows("https://x/")
    assert not hosts.fetch(Request("https://x/a"), scheduled.append)  # another port: it waits
    hosts.asked("https://x/other")
    assert [r.url for r in scheduled] == ["https://x/a"]


@pytest.mark.parametrize(
    "request_",
    [
        Request("http://x/a", meta={"when": (1, 2)}),  # a tuple reads back as a list
        Request("http://x/a", meta={"obj": object()}),
        Request("http://x/a", meta={1: "int key"}),
        Request("http://x/a", callback=lambda response: None),  # no method of the spider
        FormRequest("http://x/a", formdata={"q": "1"}),  # a subclass's state is its own
        Request("http://x/a", method="POST", body=b"q=1"),  # a page's URL is not what it asks for
    ],
    ids=["tuple", "object", "int-key", "lambda", "subclass", "post"],
)
def test_a_request_that_is_not_plain_data_is_fetched_rather_than_kept(request_):
    assert kept_requests.keep(request_, NewsSpider()) is None


HOSTILE = {
    "pickle": lambda tmp: pickle.dumps(Planted(tmp / "ran")),
    "a class to import": lambda tmp: json.dumps({"_class": "os.system", "url": "http://x/"}).encode(),
    "a dunder callback": lambda tmp: _fields(callback="__init__"),
    "an attribute, not a method": lambda tmp: _fields(callback="name"),
    "a callback of another object": lambda tmp: _fields(callback="logger"),
    "not a name": lambda tmp: _fields(callback="os.system"),
    "a body that is not base64": lambda tmp: _fields(body="%%%"),
    "a URL without scheme": lambda tmp: _fields(url="no scheme"),
    "a wrong type": lambda tmp: _fields(priority="high"),
    "deep JSON": lambda tmp: b"[" * 100_000,
    "no JSON": lambda tmp: b"\x80\x04\x95 garbage",
    "None": lambda tmp: None,
    "a number": lambda tmp: 42,
}


def _fields(**change) -> bytes:
    fields = json.loads(kept_requests.keep(Request("http://x/a"), NewsSpider()))
    return json.dumps({**fields, **change}).encode()


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_row_that_is_not_a_kept_request_is_refused_and_never_run(kind, tmp_path):
    with pytest.raises(ValueError):
        kept_requests.revive(HOSTILE[kind](tmp_path), NewsSpider())
    assert not (tmp_path / "ran").exists()


# --- URL rule keys of any characters --------------------------------------------------------

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


@given(host=ANY_TEXT, section=ANY_TEXT, name=ANY_TEXT, kind=st.sampled_from([PARAM, SEGMENT, HOST]))
def test_a_rule_key_of_any_characters_reads_back_exactly(host, section, name, kind):
    key = RuleKey(host, section, kind, name)
    assert RuleKey.parse(key.text()) == key and key.text().isascii()


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_stores_rule_keys_of_any_characters(backend, tmp_path, request):
    url = request.getfixturevalue(f"{backend}_url") if backend in ("redis", "postgres") else None
    index = make_index(backend, DedupConfig(), tmp_path, redis_url=url)
    names = ["x\ty", "a\nb", "nul\x00", "%09", "\udcff\udc80", "=&?#", "n" * 10_000, "ü€😀", ""]
    keys = [RuleKey("http://h\t", "s\n", PARAM, name) for name in names]
    try:
        index.add_url_evidence({key.text(): (3, 0) for key in keys}, 29)
        index.add_url_skip([keys[0].text()], "http://h/a?x%09y=1", "http://h/a", b"{}")
        read = {
            key: (same, differ, status) for key, same, differ, status in map(read_rule, index.url_rules())
        }
        assert read == {key: (3, 0, "learning") for key in keys}
        assert index.url_skip_counts() == {keys[0].text(): (1, 0)}
    finally:
        if backend == "redis":
            index.remove()
        index.close()


def test_a_url_with_a_tab_in_a_parameter_name_is_evidence_like_any_other():
    model = UrlModel()
    for n in range(3):
        model.observe(f"http://h/a?id={n}", n)
        evidence = model.observe(f"http://h/a?id={n}&x%09y=1", n)
    assert [key.name for key in evidence.same] == ["x\ty"]


@pytest.mark.parametrize(
    "row",
    [
        ("h\t\tparam\tview", 1, 0, "adopted"),  # the old tab-joined key
        ('["h", "", "param"]', 1, 0, "adopted"),
        ('["h", "", "eval", "x"]', 1, 0, "adopted"),
        (RuleKey("h", "", PARAM, "x").text(), b"12x", 0, "adopted"),
        (RuleKey("h", "", PARAM, "x").text(), -1, 0, "adopted"),
        (RuleKey("h", "", PARAM, "x").text(), 1, 0, "owned"),
        (None, 1, 0, "adopted"),
    ],
)
def test_a_rule_row_not_written_by_the_rules_is_refused(row):
    with pytest.raises(ValueError):
        read_rule(row)


# --- a crawl over planted rows ----------------------------------------------------------------


def _plant(index, base: str, ran: Path) -> None:
    """Every stored request a pickle that creates ``ran`` (and other rows that are no request),
    under rules withdrawn so that the crawl's start revives them."""
    rule = RuleKey(base, "", PARAM, "custom").text()
    index.add_url_evidence({rule: (30, 0)}, 29)
    index.add_url_evidence({rule: (0, 1)}, 29)  # revoked
    for kept in (pickle.dumps(Planted(ran)), _fields(callback="__init__"), b"not json"):
        index.add_url_skip([rule], base + "/a?id=5&custom=x", base + "/a?id=5", kept)
    index.add_url_evidence({"h\t\tparam\tview": (40, 0), "[1, 2]": (1, 1)}, 29)  # keys of no rule


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_planted_rows_run_nothing_and_the_crawl_stores_its_pages(backend, tmp_path, request):
    ran = tmp_path / "ran"
    settings = {**ADDON, "NEARDUP_WORKERS": 0, "CONCURRENT_REQUESTS": 4}
    if backend == "redis":
        from scrapy_neardup.index.engines.redis import RedisIndex

        prefix = f"planted:{uuid.uuid4().hex}"
        url = request.getfixturevalue("redis_url")
        settings.update(NEARDUP_INDEX=f"{url}?prefix={prefix}")
        index = RedisIndex(url, DedupConfig(), prefix=prefix)
    else:
        from scrapy_neardup.index import SQLiteIndex

        settings["NEARDUP_INDEX"] = str(tmp_path / "planted.sqlite")
        index = SQLiteIndex(tmp_path / "planted.sqlite", DedupConfig())
    with url_site(ARTICLES) as base:
        _plant(index, base, ran)
        index.close()
        result = crawl(tmp_path, [base + "/list?page=0"], settings)
    assert not ran.exists()
    assert fetched(result) == pages(ARTICLES)
    assert "Traceback" not in result["stderr"]
    said = [line for line in result["stderr"].splitlines() if "cannot be scheduled again" in line]
    assert len(said) == 3 and result["stats"]["neardup/urls/unreadable"] == 3
    assert "URL rules of index" in result["stderr"]  # the rows of no rule, said once


@pytest.mark.slow(15)
def test_a_crawl_of_urls_with_tabs_in_parameter_names_leaves_an_index_the_next_crawl_and_report_read(
    tmp_path,
):
    db = tmp_path / "tabs.sqlite"
    settings = {**ADDON, "NEARDUP_INDEX": str(db), "NEARDUP_WORKERS": 0}
    with url_site(ARTICLES) as base:
        tails = ("", "&x%09y=1", "&n%0Al%00=%ff")
        starts = [f"{base}/a?id={n}{tail}" for n in range(ARTICLES) for tail in tails]
        first = crawl(tmp_path, starts, settings)
        with sqlite3.connect(db) as con:
            names = {RuleKey.parse(rule).name for (rule,) in con.execute("SELECT rule FROM url_rules")}
        assert {"x\ty", "n\nl\x00"} <= names
        again = crawl(tmp_path, starts, settings)
    assert "Traceback" not in first["stderr"] + again["stderr"]
    assert "could not be read" not in again["stderr"]  # the rules with tabs were read back
    stored = {parse_qs(urlsplit(item["url"]).query).get("id", [""])[0] for item in again["items"]}
    # (every one: the re-runs of issue 39)
    assert len(stored & {str(n) for n in range(ARTICLES)}) >= ARTICLES * 3 // 4
    report = forked.run(
        [
            sys.executable,
            "-m",
            "scrapy_neardup.cli",
            "report",
            "--db",
            str(db),
            "-o",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
