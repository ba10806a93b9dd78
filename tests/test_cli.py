from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scrapy_neardup.cli import main


@pytest.fixture
def pages(tmp_path: Path, aeb_dir: Path) -> dict[str, Path]:
    sources = sorted((aeb_dir / "html").glob("*.gz"))[:2]
    a = tmp_path / "a.html.gz"
    shutil.copy(sources[0], a)
    html = gzip.decompress(a.read_bytes()).decode("utf-8", "replace")
    copy = tmp_path / "copy.html"
    copy.write_text(html.replace("<body", "<body data-tracking='utm_source=feed'", 1), encoding="utf-8")
    other = tmp_path / "other.htm"
    other.write_bytes(gzip.decompress(sources[1].read_bytes()))
    short = tmp_path / "short.txt"
    short.write_text("only five words in here", encoding="utf-8")
    return {"a": a, "copy": copy, "other": other, "short": short}


def run_json(capsys, *args: str) -> dict:
    code = main(["compare", *args, "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == (0 if result["duplicate"] else 1)  # as diff: 0 when alike
    return result


def test_compare_json_for_a_copy(pages, capsys):
    result = run_json(capsys, str(pages["a"]), str(pages["copy"]))
    assert result["duplicate"] is True and result["decided_by"] == "exact"
    assert result["exact"] is True and result["spotsigs"] == 1.0 and result["simhash_distance"] == 0
    assert result["minhash"] == 1.0 and result["super_shingles"] == 6
    assert result["a"]["language"] == "en" and result["a"]["tokens"] > 100


def test_compare_json_for_distinct_pages(pages, capsys):
    result = run_json(capsys, str(pages["a"]), str(pages["other"]))
    assert result["duplicate"] is False and result["decided_by"] is None
    assert result["exact"] is False and result["spotsigs"] < 0.1 and result["simhash_distance"] > 10
    assert all(not r["duplicate"] for r in result["results"].values())


def test_compare_table_shows_every_method_and_the_verdict(pages, capsys):
    assert main(["compare", str(pages["a"]), str(pages["copy"])]) == 0
    out = capsys.readouterr().out
    for method in ("exact", "spotsigs", "simhash", "minhash", "shingles", "imatch", "ksentence"):
        assert method in out
    assert "Verdict: NEAR-DUPLICATES, by exact" in out


def test_thresholds_from_flags_change_the_verdict(pages, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text(" ".join(f"word{i} the sentence{i % 7} is here" for i in range(200)))
    edited = tmp_path / "e.txt"
    edited.write_text(text.read_text().replace("word5 ", "changed ").replace("word9 ", "other "))
    # Chains of two words: the edited words sit right after an antecedent's first chain word.
    flags = ("--methods", "spotsigs", "--spotsigs-specs", "1:2")
    loose = run_json(capsys, str(text), str(edited), *flags, "--spotsigs-threshold", "0.5")
    strict = run_json(capsys, str(text), str(edited), *flags, "--spotsigs-threshold", "1")
    assert loose["duplicate"] is True and strict["duplicate"] is False


def test_short_page_is_reported_as_not_judged(pages, capsys):
    assert main(["compare", str(pages["a"]), str(pages["short"])]) == 1
    out = capsys.readouterr().out
    assert "B is not judged: too_short" in out and "--min-tokens" in out
    assert run_json(capsys, str(pages["a"]), str(pages["short"]))["duplicate"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.html", "{a}"], "missing.html: cannot read it"),
        (["{a}", "notes.pdf"], "unsupported file type"),
        (["{a}", "{a}", "--spotsigs-threshold", "7"], "--spotsigs-threshold: must be a fraction"),
        (["{a}", "{a}", "--extractor", "nope"], "--extractor: unknown extractor"),
        (["{a}", "{bad_gz}"], "not a valid gzip file"),
    ],
)
def test_user_errors_are_one_clear_line(pages, tmp_path, capsys, args, message):
    bad_gz = tmp_path / "bad.html.gz"
    bad_gz.write_bytes(b"\x1f\x8b\x08\x00garbage")
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")
    filled = [a.format(a=pages["a"], bad_gz=bad_gz) for a in args]
    filled = [str(tmp_path / a) if a in ("missing.html", "notes.pdf") else a for a in filled]
    assert main(["compare", *filled]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scrapy-neardup: error: ") and message in err
    assert "Traceback" not in err


def test_console_script_is_installed(pages):
    exe = Path(shutil.which("scrapy-neardup") or Path(__import__("sys").executable).parent / "scrapy-neardup")
    out = subprocess.run([str(exe), "compare", str(pages["a"]), str(pages["other"]), "--json"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert json.loads(out.stdout)["duplicate"] is False and out.returncode == 1


def test_compare_names_what_makes_a_match_uncertain(tmp_path, capsys):
    """A text and its first two thirds match (at an uneven bar of 0.6), but over texts of unequal
    length: the crawl lets it through, and compare says that is why."""
    words = [f"word{i} the sentence{i % 7} is here" for i in range(300)]
    whole, part = tmp_path / "whole.txt", tmp_path / "part.txt"
    whole.write_text(" ".join(words))
    part.write_text(" ".join(words[:200]))
    flags = ("--methods", "spotsigs", "--spotsigs-threshold", "0.5", "--spotsigs-uneven-threshold", "0.6")
    result = run_json(capsys, str(whole), str(part), *flags)
    assert result["duplicate"] is True
    assert result["crawl"]["decision"] == "uncertain"
    assert "texts of unequal length (1000 and 1500 tokens)" in result["crawl"]["why"]
