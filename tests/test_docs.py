"""The user guide and the reference stay in step with the code: every setting and stat the package
names is documented, the README stays a short guide, and every relative link leads somewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from scrapy_neardup import DedupConfig
from scrapy_neardup.crawl.policy import Outcome

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scrapy_neardup"
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 260

SETTING = re.compile(r"NEARDUP_[A-Z][A-Z_]*[A-Z]")
# A whole stat key in the text: not a path (".scrapy/neardup/x"), nor a pattern ("neardup/unjudged/<x>").
STAT = re.compile(r"(?<![\w./])neardup/[a-z_]+(?:/[a-z_]+)*(?![\w/{<])")


def sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(text, filename=str(path)) for path, text in sources().items()}


def documented(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


# --- settings --------------------------------------------------------------------------------


def setting_names() -> set[str]:
    """Every ``NEARDUP_*`` setting the package reads: the names its code spells out, and every
    declared setting (``DedupConfig`` and ``CrawlSettings``, read through ``knobs``)."""
    from scrapy_neardup.crawl.settings import known_settings

    names = {match for text in sources().values() for match in SETTING.findall(text)}
    return names | set(known_settings())


def test_settings_reference_documents_every_setting_with_its_default():
    """docs/settings.md has a row for every declared setting, showing its declared default."""
    from scrapy_neardup.crawl.settings import CrawlSettings
    from scrapy_neardup.knobs import declarations, setting_name

    reference = documented("settings.md")
    rows = {
        line.split("|")[1].strip(): line for line in reference.splitlines() if line.startswith("| `NEARDUP_")
    }
    names = setting_names()
    assert {"NEARDUP_ENABLED", "NEARDUP_ACTION", "NEARDUP_SPOTSIGS_THRESHOLD"} <= names  # the scan works
    missing = sorted(name for name in names if f"`{name}`" not in reference)
    assert not missing, f"docs/settings.md does not document {missing}"
    for cls in (DedupConfig, CrawlSettings):
        for field in declarations(cls):
            default = field.default
            if default in (None, (), "") or isinstance(default, tuple):
                continue  # derived (the index's path, the pool's size) or a list, shown in words
            shown = getattr(default, "value", default)
            shown = int(shown) if isinstance(shown, float) and shown.is_integer() else shown
            row = rows[f"`{setting_name(field.name)}`"]
            assert f"`{shown}`" in row, (
                f"{setting_name(field.name)}: docs/settings.md does not show {shown!r}"
            )


def test_the_crawl_knows_every_setting_the_code_names():
    """The names a crawl accepts without a misspelling warning are the ones the package reads."""
    from scrapy_neardup.crawl.settings import known_settings

    assert known_settings() == setting_names()


def test_settings_reference_documents_every_flag():
    reference = documented("settings.md")
    missing = [
        f"--{name.replace('_', '-')}"
        for name, _, _ in DedupConfig.docs()
        if f"`--{name.replace('_', '-')}`" not in reference
    ]
    assert not missing, f"docs/settings.md does not document {missing}"


# --- stats -----------------------------------------------------------------------------------


def _returned_strings(function: ast.AST) -> set[str]:
    """The string constants a function returns (directly or as either side of ``a if c else b``)."""
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            found |= _strings(node.value)
    return found


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    if isinstance(node, ast.BoolOp):
        return set().union(*(_strings(value) for value in node.values))
    return set()


def _functions(name: str) -> list[ast.AST]:
    return [
        node
        for tree in trees().values()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ]


def skip_reasons() -> set[str]:
    """Every reason a page is not judged: ``SkipPage("x")``, ``skip_reason="x"``, ``skipped("x")``
    (or ``skipped(... or "x")``), and what a ``skip_reason()`` method returns."""
    reasons: set[str] = set()
    for tree in trees().values():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("SkipPage", "skipped") and node.args:
                reasons |= _strings(node.args[0])
            reasons |= {
                value
                for keyword in node.keywords
                if keyword.arg == "skip_reason"
                for value in _strings(keyword.value)
            }
    for function in _functions("skip_reason"):
        reasons |= _returned_strings(function)
    return {reason for reason in reasons if re.fullmatch(r"[a-z_]+", reason)}


def _local_strings(function: ast.AST, name: str) -> set[str]:
    """The string constants assigned to ``name`` inside ``function``."""
    found: set[str] = set()
    for node in ast.walk(function):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            found |= _strings(node.value)
    return found


def stat_keys() -> set[str]:
    """Every stat key the package sets: the literal ones, and each f-string key spelled out.

    ``neardup/unjudged/{reason}`` gives one key a skip reason; ``neardup/{outcome.value}`` one key an
    ``Outcome`` (what ``acted`` counts); any other placeholder, the strings assigned to it in its
    function. A new kind of f-string key fails here until this test knows it.
    """
    keys = {match for text in sources().values() for match in STAT.findall(text)}
    for tree in trees().values():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.JoinedStr) or not node.values:
                    continue
                head = node.values[0]
                if not (isinstance(head, ast.Constant) and str(head.value).startswith("neardup/")):
                    continue
                if len(node.values) != 2 or not isinstance(node.values[1], ast.FormattedValue):
                    pytest.fail(f"stat key of an unknown shape in {function.name}: {ast.unparse(node)}")
                prefix, slot = head.value, node.values[1].value
                if prefix == "neardup/unjudged/":
                    values = skip_reasons()
                elif prefix == "neardup/":
                    values = {outcome.value for outcome in Outcome}
                elif isinstance(slot, ast.Name):
                    values = _local_strings(function, slot.id)
                else:
                    values = set()
                if not values:
                    pytest.fail(f"cannot tell the values of {ast.unparse(node)} in {function.name}")
                keys |= {prefix + value for value in values}
    return keys


def test_stats_reference_documents_every_stat():
    reference = documented("stats.md")
    keys = stat_keys()
    expected = {"neardup/checked", "neardup/duplicates/near", "neardup/dropped", "neardup/unjudged/too_short"}
    assert expected <= keys  # the scan of the code works
    missing = sorted(key for key in keys if f"`{key}`" not in reference)
    assert not missing, f"docs/stats.md does not document {missing}"


# --- the README and the links ----------------------------------------------------------------


def test_readme_is_a_short_guide():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference to docs/"


def test_readme_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    fence = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert fence <= 3, "the commands block comes first, right under the title"
    assert lines[fence + 1].startswith("make demo ")
    assert lines[fence + 2].startswith("make test ")
    assert lines[fence + 3] == "```"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _prose(text: str) -> str:
    """Markdown without code blocks and inline code, where a link is never a link."""
    return re.sub(r"`[^`\n]*`", "", _without_code_blocks(text))


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    text = _without_code_blocks(path.read_text(encoding="utf-8"))
    headings = re.findall(r"^#+\s+(.*)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


MARKDOWN = [README, ROOT / "CHANGES.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_existing_files_and_headings(page):
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        missing_heading = anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
        if not linked.exists() or missing_heading:
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


def test_docs_folder_holds_the_reference():
    for name in ("settings.md", "stats.md", "methods.md", "index.md", "quality.md", "speed.md"):
        assert (DOCS / name).is_file(), name
