"""The duplicate report: clusters and canonical policies, the three formats, and a real-browser check
that no script carried by a crawled page (URL, title or text) runs in the HTML report."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import forked
import pytest

from scrapy_neardup.cli import main
from scrapy_neardup.config import DedupConfig
from scrapy_neardup.exceptions import ConfigError, IndexFileError, InputError
from scrapy_neardup.index import SQLiteIndex
from scrapy_neardup.report import (
    Progress,
    format_for,
    json_report,
    load_clusters,
    render_report,
    write_report,
)
from scrapy_neardup.report.clusters import (
    CANONICAL_POLICIES,
    ClusterSet,
    Member,
    ReportCluster,
    cluster_members,
)
from scrapy_neardup.report.csv_report import COLUMNS, cell
from scrapy_neardup.report.html_report import LEFT_OUT, NO_TEXT, script_json, write_html
from scrapy_neardup.url_rule import RuleKey

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"

# --- clusters and canonical policies from hand-made edge sets ------------------------------------

# One chain 1~2~3~4 (1 and 4 share nothing: only the chain joins them), a pair 5~6, a loner 7.
CHAIN_EDGES = [(2, 1), (3, 2), (4, 3), (6, 5)]
CHAIN_MEMBERS = [
    Member(1, "http://news.example/2024/05/story-about-a-thing", tokens=300),
    Member(2, "https://news.example/story?utm_source=feed", tokens=310),
    Member(3, "http://n.example/s", tokens=280),
    Member(4, "http://print.example/story/print-version", tokens=900),
    Member(5, "https://b.example/one", tokens=100),
    Member(6, "https://b.example/two", tokens=100),
    Member(7, "https://alone.example/", tokens=50),
]


@pytest.mark.parametrize(
    ("policy", "canonical"),
    [("first-seen", 1), ("shortest-url", 3), ("https-first", 2), ("longest-text", 4)],
)
def test_chain_is_one_cluster_with_the_policy_applied(policy, canonical):
    clusters = cluster_members(CHAIN_EDGES, CHAIN_MEMBERS, policy)
    assert [c.number for c in clusters] == [1, 2]
    chain, pair = clusters
    assert chain.canonical.id == canonical
    assert sorted(m.id for m in chain.members) == [1, 2, 3, 4]
    # the canonical first, the others in the order seen
    assert [m.id for m in chain.members[1:]] == sorted(set(range(1, 5)) - {canonical})
    assert [m.id for m in pair.members] == [5, 6]  # ties go to the first seen: equal lengths, both https


def test_cluster_numbers_do_not_depend_on_the_policy():
    numbering = {
        policy: [sorted(m.id for m in c.members) for c in cluster_members(CHAIN_EDGES, CHAIN_MEMBERS, policy)]
        for policy in CANONICAL_POLICIES
    }
    assert len({json.dumps(v) for v in numbering.values()}) == 1


def test_clusters_merge_in_any_edge_order_and_ignore_unclustered_pages():
    edges = [(4, 3), (6, 5), (2, 1), (3, 2), (3, 1)]  # a cycle as well as the chain
    clusters = cluster_members(reversed(edges), reversed(CHAIN_MEMBERS))
    assert [[m.id for m in c.members] for c in clusters] == [[1, 2, 3, 4], [5, 6]]
    assert cluster_members([], CHAIN_MEMBERS) == []


def test_two_chains_joined_by_a_late_edge():
    members = [Member(i, f"http://a.example/{i}") for i in range(1, 6)]
    clusters = cluster_members([(2, 1), (4, 3), (5, 4), (3, 2)], members)
    assert [[m.id for m in c.members] for c in clusters] == [[1, 2, 3, 4, 5]]


def test_https_first_falls_back_to_first_seen_and_ignores_case():
    members = [
        Member(1, "http://a.example/x"),
        Member(2, "ftp://a.example/x"),
        Member(3, "HTTPS://A.example/x"),
    ]
    assert cluster_members([(2, 1), (3, 1)], members, "https-first")[0].canonical.id == 3
    assert cluster_members([(2, 1)], members[:2], "https-first")[0].canonical.id == 1


def test_unknown_policy_names_the_setting_and_flag():
    with pytest.raises(ConfigError, match=r"NEARDUP_CANONICAL \(--canonical\).*newest"):
        cluster_members(CHAIN_EDGES, CHAIN_MEMBERS, "newest")


# --- a small scan, reported in every format --------------------------------------------------------


def _page(title: str, paragraphs: list[str]) -> str:
    """A plain article page; title and text are escaped, so they reach the index as written."""
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><nav><a href='/'>Home</a></nav><article><h1>{html.escape(title)}</h1>\n{body}</article>"
        "<footer>Copyright</footer></body></html>"
    )


def _paragraphs(text: str, size: int = 60) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def _scan_feed(tmp: Path, rows: list[dict]) -> Path:
    feed = tmp / "feed.jl"
    feed.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    db = tmp / "index.db"
    assert main(["scan", str(feed), "--db", str(db), "--workers", "0"]) == 0
    return db


@pytest.fixture(scope="module")
def articles(aeb_truth) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of six long real articles."""
    chosen = [v for v in aeb_truth.values() if len(v.get("articleBody", "").split()) > 400][:6]
    return [(v.get("title") or f"Article {i}", _paragraphs(v["articleBody"])) for i, v in enumerate(chosen)]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory, articles) -> Path:
    """Ten pages: an http mirror seen before its original, an edited longer repost, a copy, a stub."""
    tmp = tmp_path_factory.mktemp("small")
    (t0, p0), (t1, p1) = articles[0], articles[1]
    edited = [p.replace(" the ", " this ", 1) for p in p0] + [
        "Editor's note: this story was updated with comments from the company and a correction."
    ]
    rows = [
        {"url": "http://mirror.example/0?utm_source=x", "html": _page(t0, p0)},
        {"url": "https://news.example/0", "html": _page(t0, p0)},
        *(
            {"url": f"https://news.example/{i}", "html": _page(t, p)}
            for i, (t, p) in enumerate(articles[1:], 1)
        ),
        {"url": "https://blog.example/reposted/0", "html": _page(t0 + " (repost)", edited)},
        {"url": "https://n.example/1", "html": _page(t1, p1)},
        {"url": "https://news.example/stub", "html": _page("Stub", ["Too short to judge."])},
    ]
    return _scan_feed(tmp, rows)


def _report(db: Path, fmt: str, *extra: str, tmp: Path) -> Path:
    out = tmp / f"report.{fmt}"
    assert main(["report", "--db", str(db), "--format", fmt, "-o", str(out), *extra]) == 0
    return out


def test_json_report_schema_and_policy(small_db, tmp_path, capsys):
    report = json.loads(_report(small_db, "json", tmp=tmp_path).read_text(encoding="utf-8"))
    assert (report["documents"], report["duplicates"], report["skipped"], report["unique"]) == (10, 3, 1, 6)
    assert report["canonical_policy"] == "first-seen"
    assert report["settings"]["methods"] == ["exact", "spotsigs", "simhash"]
    assert report["settings"]["spotsigs_threshold"] == DedupConfig().spotsigs_threshold
    assert [c["id"] for c in report["clusters"]] == [1, 2] and [c["size"] for c in report["clusters"]] == [
        3,
        2,
    ]
    first = report["clusters"][0]
    assert first["canonical"] == "http://mirror.example/0?utm_source=x"  # seen first: the page the crawl kept
    urls = [m["url"] for m in first["members"]]
    assert urls == [
        "http://mirror.example/0?utm_source=x",
        "https://news.example/0",
        "https://blog.example/reposted/0",
    ]
    exact, edited = first["members"][1:]
    assert exact["method"] == "exact" and exact["similarity"] == 1.0
    assert edited["method"] in ("spotsigs", "simhash") and 0.5 <= edited["similarity"] < 1.0
    assert exact["duplicate_of"] == edited["duplicate_of"] == first["canonical"]
    assert first["members"][0]["duplicate_of"] is None and first["members"][0]["title"]
    assert all(isinstance(m["seen_at"], float) for m in first["members"])

    by_policy = {}
    for policy in CANONICAL_POLICIES:
        out = _report(small_db, "json", "--canonical", policy, tmp=tmp_path)
        data = json.loads(out.read_text(encoding="utf-8"))
        assert data["canonical_policy"] == policy
        by_policy[policy] = [c["canonical"] for c in data["clusters"]]
    assert by_policy["first-seen"] == ["http://mirror.example/0?utm_source=x", "https://news.example/1"]
    assert by_policy["https-first"] == ["https://news.example/0", "https://news.example/1"]
    assert by_policy["shortest-url"] == ["https://news.example/0", "https://n.example/1"]
    assert by_policy["longest-text"][0] == "https://blog.example/reposted/0"  # the added note: most tokens
    # the dict form (scan's summary) is the same report
    with SQLiteIndex.open_existing(small_db) as index:
        assert json_report(index, "shortest-url")["clusters"][1]["canonical"] == "https://n.example/1"


def test_json_report_to_stdout_keeps_the_default_format(small_db, capsys):
    assert main(["report", "--db", str(small_db)]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 10


def test_csv_report_has_one_row_per_document(small_db, tmp_path):
    out = _report(small_db, "csv", "--canonical", "https-first", tmp=tmp_path)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 10
    by_url = {r["url"]: r for r in rows}
    mirror, original = by_url["http://mirror.example/0?utm_source=x"], by_url["https://news.example/0"]
    assert mirror["cluster_id"] == original["cluster_id"] == "1"
    assert mirror["canonical"] == original["canonical"] == "https://news.example/0"
    assert (mirror["is_canonical"], original["is_canonical"]) == ("0", "1")
    assert original["duplicate_of"] == "http://mirror.example/0?utm_source=x"  # what the crawl matched
    assert original["similarity"] == "1.0000" and original["method"] == "exact"
    assert mirror["status"] == "unique" and mirror["duplicate_of"] == "" and mirror["similarity"] == ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", mirror["seen_at"])
    stub = by_url["https://news.example/stub"]
    assert (stub["status"], stub["skip_reason"], stub["cluster_id"]) == ("skipped", "too_short", "")
    assert by_url["https://news.example/3"]["cluster_id"] == ""
    assert out.read_bytes().count(b"\r\n") == 11  # RFC 4180 line ends, no blank lines


def test_csv_cells_never_start_a_formula():
    assert cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert [cell(v) for v in ("+1", "-1", "@SUM(A1)", "https://a.example/")] == [
        "'+1",
        "'-1",
        "'@SUM(A1)",
        "https://a.example/",
    ]
    assert cell(None) == "" and cell("") == ""


def _embedded(page: str, element: str) -> object:
    found = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>', page, re.DOTALL)
    assert found, element
    return json.loads(found.group(1))


def test_html_report_is_self_contained_with_figures_charts_and_data(small_db, tmp_path):
    out = write_report(small_db, tmp_path / "sub" / "report.html")
    assert out == tmp_path / "sub" / "report.html"
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temporary file left
    page = out.read_text(encoding="utf-8")
    # no network: nothing is loaded from anywhere
    assert not re.search(r"<link\b|<[a-z]+\s[^>]*\bsrc\s*=|@import|url\(\s*['\"]?(https?:)?//", page, re.I)
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page).group(1)
    assert "default-src &#x27;none&#x27;" in csp and "script-src &#x27;sha256-" in csp
    # the figures
    for figure, label in (("10", "documents seen"), ("3", "duplicates"), ("30.0%", "share duplicate"),
                          ("2", "clusters"), ("1", "not judged")):  # fmt: skip
        assert f'<div class="n">{figure}</div><div class="l">{label}</div>' in page
    # three charts: cluster sizes, similarity per method with its threshold, duplicates per host
    assert page.count("<svg ") >= 3
    assert "threshold 1.00" in page and "Duplicates per host" in page
    assert re.search(r"<text[^>]*>mirror\.example</text>|<text[^>]*>news\.example</text>", page)
    data = _embedded(page, "nd-data")
    texts = _embedded(page, "nd-texts")
    assert [c[0] for c in data["clusters"]] == [1, 2]
    first = data["clusters"][0][1]
    assert [m[0] for m in first] == [
        "http://mirror.example/0?utm_source=x",
        "https://news.example/0",
        "https://blog.example/reposted/0",
    ]
    assert first[1][5] == 0 and first[0][5] == -1  # duplicate_of: the canonical's position
    assert data["methods"][first[1][3]] == "exact"
    assert {h[0] for h in data["hosts"]} >= {"mirror.example", "news.example", "blog.example", "n.example"}
    assert first[0][7] == first[1][7] >= 0  # identical texts are embedded once
    assert "Editor's note" in texts[first[2][7]]


def test_html_text_budget_and_missing_texts(small_db, tmp_path):
    page = write_report(small_db, tmp_path / "r.html", text_budget=0).read_text(encoding="utf-8")
    assert _embedded(page, "nd-texts") == []
    assert {m[7] for c in _embedded(page, "nd-data")["clusters"] for m in c[1]} == {LEFT_OUT}
    pair = [
        Member(1, "https://a/"),
        Member(2, "https://b/", duplicate_of=1, similarity=0.9, method="spotsigs"),
    ]
    clusters = ClusterSet("first-seen", [ReportCluster(1, pair)], 2, 1, 1, 0, {}, {})
    handle = io.StringIO()
    write_html(clusters, SimpleNamespace(text=lambda _id: None), handle)
    assert {m[7] for m in _embedded(handle.getvalue(), "nd-data")["clusters"][0][1]} == {NO_TEXT}


def test_script_json_cannot_close_its_element():
    text = script_json(["</script><!--<script>", "a & b > c", "\u2028"])
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == ["</script><!--<script>", "a & b > c", "\u2028"]


def test_format_from_the_output_suffix_and_errors(small_db, tmp_path, capsys):
    assert (
        format_for("x/report.HTML") == "html"
        and format_for("r.csv") == "csv"
        and format_for("r.txt") == "json"
    )
    out = tmp_path / "r.csv"
    assert main(["report", "--db", str(small_db), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("url,cluster_id,")
    assert "wrote the csv report" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"--format.*pdf"):
        write_report(small_db, tmp_path / "r.pdf", "pdf")
    with pytest.raises(IndexFileError, match="no such index file"):
        write_report(tmp_path / "missing.db", tmp_path / "r.html")
    with pytest.raises(InputError, match="is a folder"):
        write_report(small_db, tmp_path)
    (tmp_path / "file").write_text("x")
    assert main(["report", "--db", str(small_db), "-o", str(tmp_path / "file" / "r.html")]) == 2
    assert "cannot write the report there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", "--db", str(small_db), "--canonical", "newest"])
    assert "invalid choice: 'newest'" in capsys.readouterr().err
    assert main(["report", "--db", str(small_db), "--text-budget", "-1"]) == 2
    assert "--text-budget" in capsys.readouterr().err


def test_report_piped_into_head_stops_quietly(small_db):
    """``scrapy-neardup report --db X | head -1``: no BrokenPipeError traceback."""
    proc = forked.Popen(
        [sys.executable, "-m", "scrapy_neardup.cli", "report", "--db", str(small_db), "--format", "csv"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.close()  # as head does after its first lines
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_progress_bar_draws_only_when_enabled(small_db):
    stream = io.StringIO()
    with SQLiteIndex.open_existing(small_db) as index:
        render_report(index, io.StringIO(), "json", progress=Progress(True, stream))
        quiet = io.StringIO()
        render_report(index, io.StringIO(), "json", progress=Progress(False, quiet))
    drawn = stream.getvalue()
    assert "reading documents [" in drawn and "10/10" in drawn and "writing JSON" in drawn
    assert drawn.endswith("\n") and quiet.getvalue() == ""


def test_report_reads_clusters_with_counts(small_db):
    with SQLiteIndex.open_existing(small_db) as index:
        clusters = load_clusters(index, "longest-text")
    assert (clusters.documents, clusters.duplicates, clusters.skipped) == (10, 3, 1)
    assert clusters.thresholds["spotsigs"] == DedupConfig().spotsigs_threshold
    assert clusters.thresholds["simhash"] == pytest.approx(61 / 64)
    assert clusters.clusters[0].canonical.url == "https://blog.example/reposted/0"


# --- the HTML report in a real browser -----------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,1600",
)  # fmt: skip


def _apt_install() -> str:
    """Install Debian's chromium and chromium-driver (the test setup owns this; we run as root)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [
        "apt-get",
        "install",
        "-y",
        "-q",
        "-o",
        "DPkg::Lock::Timeout=600",
        "chromium",
        "chromium-driver",
    ]
    done = subprocess.run(install, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # a stale package list: refresh it once and retry
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        done = subprocess.run(install, env=env, capture_output=True, text=True)
    return "" if done.returncode == 0 else (done.stdout + done.stderr)[-2000:]


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """Paths of headless Chromium and its driver, installed from Debian's packages when missing."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            pytest.skip("needs the Debian packages chromium and chromium-driver (apt-get install as root)")
        failure = _apt_install()
        if failure or not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
            pytest.fail(f"apt-get install chromium chromium-driver failed:\n{failure}")
    return str(CHROMIUM), str(CHROMEDRIVER)


@pytest.fixture(scope="module")
def browser(chromium):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium[0]
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="neardup-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.set_capability("unhandledPromptBehavior", "ignore")  # an alert stays up for us to find
    driver = webdriver.Chrome(service=Service(chromium[1]), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _open(driver, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def _alert_text(driver) -> str | None:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return None
    text = alert.text
    alert.dismiss()
    return text


def _click_everything(driver) -> None:
    """Open every cluster on the page and show each member beside its canonical page in turn."""
    from selenium.webdriver.common.by import By

    def details():  # the table is rendered anew after each click: find things again every time
        return driver.find_elements(By.CSS_SELECTOR, "tr.details")

    for i in range(len(driver.find_elements(By.CSS_SELECTOR, "tr.cluster-row"))):
        driver.find_elements(By.CSS_SELECTOR, "tr.cluster-row")[i].click()
    for d in range(len(details())):
        for b in range(len(details()[d].find_elements(By.CSS_SELECTOR, "button.compare"))):
            button = details()[d].find_elements(By.CSS_SELECTOR, "button.compare")[b]
            if button.is_enabled():
                button.click()


# What a payload would leave behind: a global, a new title, injected elements or handlers, a bad link.
STATE_JS = """
const all = [...document.querySelectorAll('*')];
return {
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  title: document.title,
  scripts: document.scripts.length,
  frames: document.querySelectorAll('iframe, frame, object, embed, img').length,
  handlers: all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length,
  badLinks: [...document.querySelectorAll('a[href]')]
    .filter(a => !a.getAttribute('href').startsWith('#') && !/^https?:$/.test(a.protocol)).length,
};
"""


def _payload(tag: str) -> str:
    return f"window.__pwned='{tag}';document.title='PWNED {tag}';alert('{tag}')"


@pytest.mark.slow
def test_html_report_in_chromium_runs_no_payload(tmp_path, browser, articles):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    (t0, p0), (t1, p1) = articles[2], articles[3]
    text_payloads = [
        f"<script>{_payload('text-script')}</script>",
        f'<img src=x onerror="{_payload("text-img")}">',
        f"</textarea><script>{_payload('text-textarea')}</script>",
        f"</script><script>{_payload('text-breakout')}</script><!--",
        f'<a href="javascript:{_payload("text-link")}">read more</a>',
    ]
    title_payloads = [
        f"</title></textarea><script>{_payload('title-script')}</script>",
        f'"><svg onload="{_payload("title-svg")}">',
        f"</script><img src=x onerror={_payload('title-img')}>",
        f"' onmouseover='{_payload('title-attr')}' x='",
    ]
    urls = [
        f'https://victim.example/a?q="><script>{_payload("url-script")}</script>',
        f"javascript:{_payload('url-js')}//https://victim.example/",
        f"https://evil.example/<img src=x onerror={_payload('url-img')}>",
        f"https://<svg onload={_payload('url-host')}>/page",
    ]
    rows = []
    for i, (url, title) in enumerate(zip(urls, title_payloads, strict=True)):
        lead = [f"Update {i}: " + " ".join(text_payloads)]
        rows.append({"url": url, "html": _page(f"{t0} {title}", lead + p0)})
    rows.append({"url": "https://evil.example/</script><script>" + _payload("url-breakout") + "</script>",
                 "html": _page(t1 + text_payloads[3], p1)})  # fmt: skip
    rows.append({"url": f"javascript:{_payload('url-js-2')}", "html": _page(t1, p1[:-1])})
    db = _scan_feed(tmp_path, rows)
    with SQLiteIndex(db, DedupConfig()) as index:  # learned URL rules, named by hostile URLs too
        host, name = (
            f"https://<svg onload={_payload('rule-host')}>",
            f"<img src=x onerror={_payload('rule-name')}>",
        )
        rule = RuleKey(host, "", "param", name).text()
        index.add_url_evidence({rule: (40, 0)}, 29)
        index.set_url_rule(rule, "adopted", 0.0)
        index.add_url_skip([rule], f"{host}/a?{name}=1", f"{host}/a", b"kept")
    report = write_report(db, tmp_path / "report.html")
    page = report.read_text(encoding="utf-8")
    # in the file, no payload is markup: the only tags are the report's own
    assert page.count("<script") == 3 and "<img" not in page and "<svg onload" not in page.lower()
    no_csp = tmp_path / "report-without-csp.html"
    no_csp.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page), encoding="utf-8")

    def assert_nothing_ran(label: str) -> None:
        assert _alert_text(browser) is None, f"{label}: an alert() payload ran"
        state = browser.execute_script(STATE_JS)
        assert state["pwned"] is None, f"{label}: payload {state['pwned']} ran"
        assert state["title"].startswith("Duplicate report"), f"{label}: title changed to {state['title']!r}"
        assert state["scripts"] == 3, f"{label}: a script element was injected"
        assert state["frames"] == 0 and state["handlers"] == 0 and state["badLinks"] == 0, label

    for label, path in (("report", report), ("report without CSP", no_csp)):
        _open(browser, path)
        rows_shown = browser.find_elements(By.CSS_SELECTOR, "tr.cluster-row")
        assert len(rows_shown) == 2, f"{label}: the report's own script did not render the clusters"
        _click_everything(browser)
        body = browser.find_element(By.TAG_NAME, "body").text
        # the payloads are on the page as text: escaped, not dropped
        assert "<script>window.__pwned='url-script'" in body
        assert "</title></textarea><script>window.__pwned='title-script'" in body
        assert "</textarea><script>window.__pwned='text-textarea'" in body  # the text, in the diff view
        assert "javascript:window.__pwned='url-js'" in body
        assert f"param {name} {host}" in body  # the URL rules' table, as text
        assert browser.find_elements(By.CSS_SELECTOR, ".diff .ins, .diff .del")  # the diff highlights
        select = Select(browser.find_element(By.ID, "nd-host"))
        hosts = [o.text for o in select.options]
        assert any("<svg onload=" in h for h in hosts) and any(h.startswith("(no host)") for h in hosts)
        for i in range(len(hosts)):
            Select(browser.find_element(By.ID, "nd-host")).select_by_index(i)
        search = browser.find_element(By.ID, "nd-search")
        search.send_keys("<script>")
        browser.execute_script("return new Promise(r => setTimeout(r, 200))")
        search.clear()
        if label == "report":
            ARTIFACTS.mkdir(exist_ok=True)
            _open(browser, path)
            _click_everything(browser)
            shot = ARTIFACTS / "report-security.png"
            browser.save_screenshot(str(shot))
            print(f"screenshot of the report with script payloads: {shot}")
            logs = [e["message"] for e in browser.get_log("browser")]
            assert not [m for m in logs if "Content Security Policy" in m or "Refused" in m], logs
        assert_nothing_ran(label)


def test_html_report_pages_filters_and_searches_in_chromium(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    clusters = []
    for n in range(1, 131):
        host = "even.example" if n % 2 == 0 else "odd.example"
        members = [Member(n * 10, f"https://{host}/story/{n}", title=f"Story {n}", seen_at=1.7e9, tokens=200)]
        members += [Member(n * 10 + k, f"https://copy{k}.example/{n}", duplicate_of=n * 10, similarity=0.9,
                           method="spotsigs", seen_at=1.7e9 + k, uncertain=(n, k) == (44, 1))
                    for k in range(1, 2 + n % 3)]  # fmt: skip
        clusters.append(ReportCluster(n, members))
    cluster_set = ClusterSet(
        "first-seen", clusters, 500, 200, 300, 0, {"methods": ["spotsigs"]}, {"spotsigs": 0.5}
    )
    texts = {n * 10: f"the quick brown fox {n} jumps over the lazy dog" for n in range(1, 131)}
    texts.update({n * 10 + 1: f"the quick red fox {n} jumps over the dog" for n in range(1, 131)})
    out = tmp_path / "paged.html"
    with out.open("w", encoding="utf-8") as handle:
        write_html(cluster_set, SimpleNamespace(text=texts.get), handle, source="synthetic.db")
    _open(browser, out)

    def shown() -> list[str]:
        return [
            r.find_element(By.CSS_SELECTOR, "td").text
            for r in browser.find_elements(By.CSS_SELECTOR, "tr.cluster-row")
        ]

    assert shown() == [str(n) for n in range(1, 51)]
    assert "1–50 of 130" in browser.find_element(By.ID, "nd-range").text
    browser.find_element(By.ID, "nd-next").click()
    browser.find_element(By.ID, "nd-next").click()
    assert shown() == [str(n) for n in range(101, 131)]
    assert browser.find_element(By.ID, "nd-next").get_attribute("disabled")
    Select(browser.find_element(By.ID, "nd-host")).select_by_visible_text("even.example (65)")
    assert shown()[:3] == ["2", "4", "6"] and "of 65" in browser.find_element(By.ID, "nd-range").text
    browser.find_element(By.ID, "nd-search").send_keys("copy2.example/44")
    browser.execute_script("return new Promise(r => setTimeout(r, 300))")
    assert shown() == ["44"]
    browser.find_element(By.CSS_SELECTOR, "tr.cluster-row").click()
    deleted = [e.text.strip() for e in browser.find_elements(By.CSS_SELECTOR, ".pane .del")]
    inserted = [e.text.strip() for e in browser.find_elements(By.CSS_SELECTOR, ".pane .ins")]
    assert deleted == ["brown", "lazy"] and inserted == ["red"]
    assert "1 word only in this member" in browser.find_element(By.CSS_SELECTOR, ".legend").text
    tags = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "tr.details .tag")]
    assert tags == ["canonical", "uncertain", "member", "member"]  # the page let through beside its match


def test_a_page_let_through_is_an_uncertain_member_beside_what_it_resembles(tmp_path):
    """A match under the sure bar: the page is admitted (stored, counted unique) and shown in the
    cluster of what it resembles, marked uncertain, with its own copy; every format says so."""
    from test_index_protocol import CONFIG, LISTING, STORY

    from scrapy_neardup.detector import Detector

    with Detector(CONFIG, SQLiteIndex(tmp_path / "weak.db", CONFIG)) as detector:
        detector.check("http://a.example/", LISTING)
        detector.check("http://a.example/story", STORY)
        detector.check("http://a.example/story?utm_source=x", STORY)
        out = {fmt: io.StringIO() for fmt in ("json", "csv", "html")}
        for fmt, handle in out.items():
            render_report(detector.index, handle, fmt)
    report = json.loads(out["json"].getvalue())
    assert (report["unique"], report["duplicates"]) == (2, 1)
    [cluster] = report["clusters"]
    assert [(m["url"], m["uncertain"]) for m in cluster["members"]] == [
        ("http://a.example/", False), ("http://a.example/story", True),
        ("http://a.example/story?utm_source=x", False),
    ]  # fmt: skip
    assert cluster["members"][2]["duplicate_of"] == "http://a.example/story"
    [weak] = report["let_through"]
    assert (weak["url"], weak["resembles"], weak["method"]) == (
        "http://a.example/story", "http://a.example/", "spotsigs",
    )  # fmt: skip
    assert 0 < weak["similarity"] < 0.65
    rows = {r["url"]: r for r in csv.DictReader(io.StringIO(out["csv"].getvalue()))}
    story = rows["http://a.example/story"]
    assert (story["status"], story["duplicate_of"]) == ("unique", "http://a.example/")
    assert story["cluster_id"] == rows["http://a.example/"]["cluster_id"] == "1"
    assert "<h2>Let through</h2>" in out["html"].getvalue()
    rows = json.loads(re.search(r'"clusters":(\[.*\])\}', out["html"].getvalue()).group(1))
    assert [member[8] for member in rows[0][1]] == [0, 1, 0]  # the uncertain one marked


def test_three_pages_of_one_short_article_are_one_cluster_of_three(tmp_path):
    """A 67-word brief, its print view and an AMP view with a byline: one cluster of three, whether
    a view is a sure copy or let through beside the brief, and counted as the index counts it."""
    from news_site import read_stories

    from scrapy_neardup.detector import Detector

    title, text = next(iter(read_stories().values()))
    brief = " ".join(" ".join(text).split()[:67])
    nav = "<nav>" + "".join(f'<a href="/s{i}">Section {i} of the paper</a> ' for i in range(8)) + "</nav>"
    article = f"<article><h1>{title}</h1><p>{brief}</p></article>"
    amp = f"<article><h1>{title}</h1><p>By staff.</p><p>{brief}</p></article>"
    pages = {
        "http://n.example/brief": f"<body>{nav}{article}<footer>The Courier</footer></body>",
        "http://n.example/brief?view=print": f"<body>{article}</body>",
        "http://n.example/brief/amp": f"<body>{amp}</body>",
    }
    config = DedupConfig()
    with Detector(config, SQLiteIndex(tmp_path / "brief.db", config)) as detector:
        for url, body in pages.items():
            detector.check(url, f"<html><head><title>{title}</title></head>{body}</html>".encode())
        out = io.StringIO()
        render_report(detector.index, out, "json")
    report = json.loads(out.getvalue())
    assert [[m["url"] for m in c["members"]] for c in report["clusters"]] == [list(pages)]
    uncertain = sum(m["uncertain"] for m in report["clusters"][0]["members"])
    assert (report["duplicates"], report["unique"]) == (2 - uncertain, 1 + uncertain)
