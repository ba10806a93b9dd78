"""The learned URL rules in the reports: each rule with its evidence and the requests it skipped."""

from __future__ import annotations

import html
import logging
from dataclasses import asdict, dataclass
from typing import Any

from ..urls import CONFIDENCE, HOST, MAX_ERROR, Rule, read_rule

logger = logging.getLogger("scrapy_neardup")

SHOWN = 200  # rules listed in the HTML report (the JSON report lists them all)
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


def url_rules_json(rows: list[UrlRuleRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]


def url_rules_html(rows: list[UrlRuleRow]) -> str:
    """The rules section: what each rule says, on what evidence, and what it skipped."""
    if not rows:
        return ""
    esc = html.escape
    skipped = sum(r.skipped for r in rows)
    adopted = sum(r.status == "adopted" for r in rows)
    parts = [
        "<h2>Learned URL rules</h2>",
        f'<p class="note">{adopted:,} of {len(rows):,} rules adopted; {skipped:,} requests skipped '
        "before their download as copies of pages fetched under another URL. A rule is adopted when "
        f"its pages of the same content bound the share of pages it changes under {MAX_ERROR:.0%} "
        f"({CONFIDENCE:.0%} confidence) with no counter-example; one counter-example revokes it and "
        "schedules again what it skipped.</p>",
        '<table class="rules"><thead><tr><th>status</th><th>difference</th><th>where</th>'
        '<th class="num">same content</th><th class="num">counter-examples</th>'
        '<th class="num">error bound</th><th class="num">skipped</th><th class="num">scheduled again</th>'
        "</tr></thead><tbody>",
    ]
    for r in rows[:SHOWN]:
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
    if len(rows) > SHOWN:
        parts.append(f'<p class="note">{len(rows) - SHOWN:,} more rules in the JSON report.</p>')
    return "\n".join(parts)
