"""The learned URL rules in the reports: each rule with its evidence and the requests it skipped."""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..url_rule import CONFIDENCE, HOST, MAX_ERROR, Rule, RuleKey, read_rule
from ..urls import UrlModel

logger = logging.getLogger("scrapy_neardup")

SHOWN = 200  # rules, and skipped requests, listed in the HTML report (the JSON report lists them all)
ORDER = ("adopted", "revoked", "learning", "refused")


@dataclass(frozen=True)
class UrlRuleRow:
    """One rule as the reports show it."""

    status: str
    kind: str  # param, segment or host
    name: str  # the parameter, the segment, or the two hosts
    host: str
    section: str  # the first path segment a parameter's rule holds under ("": the whole host)
    same: int  # pages whose URLs differ by it and hold the same content
    differ: int  # counter-examples
    error_bound: float  # the share of pages it may change, at 95 % confidence
    skipped: int  # requests it skipped before their download
    revived: int  # of those, scheduled again after it was revoked


def load_url_rules(index: Any) -> list[UrlRuleRow]:
    """The index's rules, adopted ones first, most requests skipped first; a row that does not
    read as a rule is left out, with one warning."""
    skips = index.url_skip_counts()
    rows, unread = [], []
    for row in index.url_rules():
        try:
            key, same, differ, status = read_rule(row)
        except (ValueError, TypeError) as exc:
            unread.append(str(exc))
            continue
        skipped, revived = skips.get(key.text(), (0, 0))
        bound = Rule(key, same, differ, status).bound
        where = (key.kind, key.name, key.host, key.section)
        rows.append(UrlRuleRow(status, *where, same, differ, round(bound, 4), skipped, revived))
    if unread:
        logger.warning(
            "scrapy-neardup: %d URL rules of index %s could not be read and are left out of the report "
            "(%s)", len(unread), getattr(index, "path", ""), unread[0][:200],
        )  # fmt: skip
    rank = {status: i for i, status in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r.status, len(ORDER)), -r.skipped, -r.same, r.host, r.name))


def clean_urls(rows: list[UrlRuleRow]) -> Callable[[str], str]:
    """A page's clean URL by the rules the crawls adopted: what they say does not matter taken
    out (the URL itself when no rule applies)."""
    if not any(row.status == "adopted" for row in rows):
        return str
    model = UrlModel()
    for row in rows:
        key = RuleKey(row.host, row.section, row.kind, row.name)
        model.rules[key] = Rule(key, row.same, row.differ, row.status)
    model.rules_changed()
    return model.canonical


@dataclass(frozen=True)
class SkippedRow:
    """A request a rule skipped: its URL, the fetched page it was predicted to copy, the rules
    that predicted it (in words), and whether it was scheduled again after all; or, not
    ``skipped``, one that tag mode fetched and the rules would have skipped."""

    url: str
    predicted_copy_of: str
    rules: tuple[str, ...]
    revived: bool
    skipped: bool = True


def load_url_skips(index: Any) -> list[SkippedRow]:
    """The requests the index's rules skipped, in the order skipped."""
    rows = []
    for url, target, revived, texts in index.url_skipped():
        named = []
        for text in texts:
            try:
                named.append(RuleKey.parse(text).words())
            except ValueError:  # a rule not written by the rules: said by load_url_rules
                continue
        rows.append(SkippedRow(url, target, tuple(named), bool(revived), revived is not None))
    return rows


def url_rules_json(rows: list[UrlRuleRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]


def url_skips_json(rows: list[SkippedRow]) -> list[dict[str, Any]]:
    return [{**asdict(row), "rules": list(row.rules)} for row in rows]


def url_rules_link(rows: list[UrlRuleRow], skips: list[SkippedRow]) -> str:
    """A line at the top of the HTML report that leads to the rules, with the counts the
    crawl's stats give (each skipped request once, whatever rules predicted it)."""
    if not rows:
        return ""
    adopted = sum(r.status == "adopted" for r in rows)
    skipped = [s for s in skips if s.skipped]
    revived = sum(s.revived for s in skipped)
    would = len(skips) - len(skipped)
    return (
        f'<p class="note"><a href="#nd-rules">Learned URL rules</a>: {adopted:,} of {len(rows):,} adopted; '
        f'<a href="#nd-skipped">{len(skipped):,} requests skipped</a> before their download '
        f"({revived:,} of them scheduled again)"
        + (f'; <a href="#nd-would-skip">{would:,} they would have skipped</a> (tag mode)' if would else "")
        + ".</p>"
    )


def url_rules_html(rows: list[UrlRuleRow], skips: list[SkippedRow] = ()) -> str:
    """The rules section: what each rule says, on what evidence, and what it skipped."""
    if not rows:
        return ""
    skipped = sum(s.skipped for s in skips)
    adopted = sum(r.status == "adopted" for r in rows)
    parts = [
        '<h2 id="nd-rules">Learned URL rules</h2>',
        f'<p class="note">{adopted:,} of {len(rows):,} rules adopted; {skipped:,} requests skipped '
        "before their download as copies of pages fetched under another URL. A rule is adopted when "
        "its pages of the same content bound the share of pages it changes (the table's bound, at "
        f"{CONFIDENCE:.0%} confidence) under {MAX_ERROR:.0%} (NEARDUP_URL_MAX_ERROR) with no "
        "counter-example; one counter-example revokes it and "
        "schedules again what it skipped.</p>",
    ]
    kept = [r for r in rows if r.status != "refused"]
    refused = [r for r in rows if r.status == "refused"]
    shown = min(len(kept), SHOWN)
    parts.append(_rules_table(kept[:shown]))
    if refused:  # folded away: differences that change pages, most of them a site's article slugs
        parts.append(
            f"<details><summary>{len(refused):,} refused rules: their differences change pages "
            "(most are a site's own page names)</summary>"
            + _rules_table(refused[: max(0, SHOWN - shown)])
            + "</details>"
        )
    if len(rows) > SHOWN:
        parts.append(f'<p class="note">{len(rows) - SHOWN:,} more rules in the JSON report.</p>')
    parts.append(skipped_html([s for s in skips if s.skipped]))
    parts.append(skipped_html([s for s in skips if not s.skipped], would=True))
    return "\n".join(parts)


def _rules_table(rows: list[UrlRuleRow]) -> str:
    """Rules as a table: status, difference, where, evidence, and what each skipped."""
    esc = html.escape
    parts = [
        '<table class="rules"><thead><tr><th>status</th><th>difference</th><th>where</th>'
        '<th class="num">same content</th><th class="num">counter-examples</th>'
        '<th class="num">error bound</th><th class="num">skipped</th><th class="num">scheduled again</th>'
        "</tr></thead><tbody>",
    ]
    for r in rows:
        what = "host names" if r.kind == HOST else r.kind
        name = r.name.replace(" ", " = ") if r.kind == HOST else r.name
        where = "all hosts" if r.kind == HOST else r.host + ("/" + r.section + "/" if r.section else "")
        parts.append(
            f'<tr><td><span class="tag">{esc(r.status)}</span></td><td>{esc(what)} <b>{esc(name)}</b></td>'
            f'<td class="url">{esc(where)}</td><td class="num">{r.same:,}</td>'
            f'<td class="num">{r.differ:,}</td>'
            f'<td class="num">{r.error_bound:.1%}</td><td class="num">{r.skipped:,}</td>'
            f'<td class="num">{r.revived:,}</td></tr>'
        )
    parts.append("</tbody></table>")
    return "".join(parts)


def skipped_html(skips: list[SkippedRow], would: bool = False) -> str:
    """The skipped requests (``would``: those tag mode fetched and the rules would have
    skipped), each with the page it was predicted to copy and the rules why."""
    if not skips:
        return ""
    esc = html.escape
    head = (
        '<h3 id="nd-would-skip">Requests the rules would have skipped</h3><p class="note">Tag mode '
        "skips nothing: each of these was downloaded.</p>"
        if would
        else '<h3 id="nd-skipped">Requests skipped</h3>'
    )
    parts = [
        head,
        f'<table class="rules"><thead><tr><th>URL {"downloaded" if would else "not downloaded"}</th>'
        "<th>predicted copy of</th><th>by the rules</th><th>scheduled again</th></tr></thead><tbody>",
    ]
    for s in skips[:SHOWN]:
        parts.append(
            f'<tr><td class="url">{esc(s.url)}</td><td class="url">{esc(s.predicted_copy_of)}</td>'
            f"<td>{esc('; '.join(s.rules))}</td><td>{'yes' if s.revived else ''}</td></tr>"
        )
    parts.append("</tbody></table>")
    if len(skips) > SHOWN:
        parts.append(
            f'<p class="note">{len(skips) - SHOWN:,} more skipped requests in the JSON and CSV reports.</p>'
        )
    return "\n".join(parts)
