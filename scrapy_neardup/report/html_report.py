"""The HTML report: one self-contained file (no network) with figures, SVG charts and the clusters.

Safety: every string in the report came from the crawled web. The figures and charts are
written here with ``html.escape``; the cluster data goes into ``<script type="application/json">``
elements with ``<``, ``>`` and ``&`` as JSON escapes, so no string can close the element;
``report.js`` puts strings on the page with ``textContent`` only and makes links only of
http(s) URLs. A Content-Security-Policy allowing just that one script (by its hash) and no
network is a second wall, not the first: the browser test checks the report without it too.

Size: the cluster list is rendered a page at a time by the script, so 100,000 clusters open
quickly; page texts (for the side-by-side view) are embedded up to a budget, largest
clusters first.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, TextIO
from urllib.parse import urlsplit

import xxhash

from ..index import Index
from ..methods import BY_NAME, decision_order
from .clusters import CANONICAL_POLICIES, ClusterSet, LetThrough
from .progress import Progress
from .url_rules import url_rules_html, url_rules_link

TEXT_BUDGET = 16_000_000  # characters of page text embedded for the side-by-side view
MAX_TEXTS = 50_000  # texts looked up at most, whatever their length
TEXTS_PER_CLUSTER = 25  # a huge cluster must not use the whole budget
SIM_BINS = 50
NO_TEXT, LEFT_OUT = -1, -2  # a member's text key when no text is embedded, and why
_MARKER = re.compile(r"@@([A-Z_]+)@@")
_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                 "\u2029": "\\u2029"})  # fmt: skip


def color_of(method: str) -> str:
    """A method's color in the charts (the registry's; grey for one no longer registered)."""
    return BY_NAME[method].color if method in BY_NAME else "#999999"


def description_of(method: str) -> str:
    known = BY_NAME.get(method)
    return f"{known.label}: {known.description}" if known and known.description else method


def esc(value: Any) -> str:
    """Text for HTML and SVG, quotes included (safe in attributes too)."""
    return html.escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element or open a comment inside it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SCRIPT_ESCAPES)


def host_of(url: str) -> str:
    """The URL's host, lowercased; ``''`` for a URL without one (a file name, a broken URL)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@dataclass
class Tally:
    """The figures behind the summary and the charts, from one pass over the clusters."""

    by_method: Counter[str] = field(default_factory=Counter)
    sims: dict[str, list[int]] = field(default_factory=dict)
    host_duplicates: Counter[str] = field(default_factory=Counter)
    host_pages: Counter[str] = field(default_factory=Counter)
    sizes: Counter[int] = field(default_factory=Counter)


def tally(clusters: ClusterSet) -> Tally:
    t = Tally()
    for cluster in clusters.clusters:
        t.sizes[cluster.size] += 1
        for m in cluster.members:
            host = host_of(m.url)
            t.host_pages[host] += 1
            if m.duplicate_of is None or m.uncertain:  # a page let through is stored, no duplicate
                continue
            t.host_duplicates[host] += 1
            method = m.method or "unknown"
            t.by_method[method] += 1
            if m.similarity is not None:
                bins = t.sims.setdefault(method, [0] * SIM_BINS)
                bins[min(SIM_BINS - 1, max(0, int(m.similarity * SIM_BINS)))] += 1
    return t


def _methods_sorted(names: Any) -> list[str]:
    order = decision_order()
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


# --- the summary ------------------------------------------------------------------------------


def summary_html(clusters: ClusterSet, t: Tally) -> str:
    """The figures that matter first, then duplicates by method against each method's threshold."""
    docs, dups = clusters.documents, clusters.duplicates
    share = f"{dups / docs:.1%}" if docs else "0%"
    # The words follow what the crawl did with duplicates (a scanned index only found them; a
    # dropping crawl stored all but its duplicates, the uncertain ones let through).
    share_label = "share tagged" if clusters.action == "tag" else "share duplicate"
    done = {"drop": "dropped", "ignore": "ignored", "tag": "tagged"}.get(clusters.action or "", "duplicates")
    stored = docs if clusters.action == "tag" else docs - dups
    skips = [s for s in clusters.url_skips if s.skipped]
    in_clusters = sum(c.size for c in clusters.clusters)
    figures = [
        ("documents seen", f"{docs:,}"),
        *([("pages stored", f"{stored:,}")] if clusters.action else []),
        (done, f"{dups:,}"), (share_label, share),
        ("let through, uncertain", f"{len(clusters.let_through):,}"),
        ("clusters", f"{len(clusters.clusters):,}"), ("pages in clusters", f"{in_clusters:,}"),
        ("not judged", f"{clusters.skipped:,}"),
        *([("requests skipped", f"{len(skips):,}"),
           ("fetched again", f"{sum(s.revived for s in skips):,}")] if skips else []),
        *([("forgotten (not seen lately)", f"{clusters.forgotten:,}")] if clusters.forgotten else []),
    ]  # fmt: skip
    parts = ['<div class="figures">']
    parts += [
        f'<div class="figure"><div class="n">{esc(n)}</div><div class="l">{esc(label)}</div></div>'
        for label, n in figures
    ]
    parts.append("</div>")
    rows = []
    for method in _methods_sorted(t.by_method):
        count = t.by_method[method]
        threshold = clusters.thresholds.get(method)
        shown = "" if threshold is None else f"{threshold:.3f}"
        rows.append(
            f'<tr><td><span class="tag" style="border-color:{color_of(method)}" '
            f'title="{esc(description_of(method))}">{esc(method)}</span></td>'
            f'<td class="num">{count:,}</td><td class="num">{count / max(dups, 1):.1%}</td>'
            f'<td class="num">{esc(shown)}</td></tr>'
        )
    if rows:
        parts.append(
            '<table class="methods"><thead><tr><th>method</th><th class="num">duplicates</th>'
            '<th class="num">share</th><th class="num">threshold (similarity)</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    return "\n".join(parts)


# --- the charts -------------------------------------------------------------------------------

SIZE_BINS = ((2, 2), (3, 3), (4, 4), (5, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None))


def chart_cluster_sizes(sizes: Counter[int]) -> str:
    """Clusters by size, on a log scale: pairs are many, the large clusters are the ones to see."""
    counts = [
        sum(n for size, n in sizes.items() if size >= lo and (hi is None or size <= hi))
        for lo, hi in SIZE_BINS
    ]
    labels = [str(lo) if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}") for lo, hi in SIZE_BINS]
    width, height, left, bottom, top = 380, 170, 30, 22, 14
    top_value = math.log10(1 + max(counts, default=0)) or 1.0
    slot = (width - left - 6) / len(counts)
    parts = [_svg_open(width, height, "Clusters by number of pages (log scale)")]
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        bar = (height - bottom - top) * math.log10(1 + count) / top_value
        x = left + i * slot + 3
        y = height - bottom - bar
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot - 6:.1f}" height="{bar:.1f}" fill="#2f6fd6">'
            f"<title>{esc(label)} pages: {count:,} clusters</title></rect>"
        )
        parts.append(
            f'<text x="{x + (slot - 6) / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{count:,}</text>'
        )
        parts.append(
            f'<text x="{x + (slot - 6) / 2:.1f}" y="{height - 8}" text-anchor="middle">{esc(label)}</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}" stroke="#999"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def chart_similarity(method: str, bins: list[int], threshold: float | None) -> str:
    """One method's similarity histogram over [0, 1] with its threshold as a dashed line."""
    width, height, left, bottom, top = 260, 140, 8, 20, 28
    peak = max(bins) or 1
    plot_w = width - 2 * left
    slot = plot_w / len(bins)
    color = color_of(method)
    total = sum(bins)
    parts = [_svg_open(width, height, f"{method}: similarity of {total:,} duplicates")]
    parts.append(f'<text x="{left}" y="11">{esc(method)} ({total:,})</text>')
    for i, count in enumerate(bins):
        if not count:
            continue
        bar = max(1.0, (height - bottom - top) * count / peak)
        lo, hi = i / len(bins), (i + 1) / len(bins)
        x, y, w = left + i * slot, height - bottom - bar, max(1.0, slot - 1)
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{bar:.1f}" fill="{color}">'
            f"<title>{lo:.2f}-{hi:.2f}: {count:,}</title></rect>"
        )
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<text x="{left + tick * plot_w:.1f}" y="{height - 6}" text-anchor="middle">{tick:g}</text>'
        )
    if threshold is not None:
        x = left + threshold * plot_w
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - bottom}" stroke="#c0392b" '
            f'stroke-dasharray="3 2"><title>threshold {threshold:.3f}</title></line>'
        )
        anchor = "end" if threshold > 0.7 else "start"
        dx = -3 if anchor == "end" else 3
        parts.append(
            f'<text x="{x + dx:.1f}" y="{top - 6}" text-anchor="{anchor}">threshold {threshold:.2f}</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - left}" y2="{height - bottom}" stroke="#999"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def chart_hosts(host_duplicates: Counter[str], shown: int = 12) -> str:
    """The hosts with the most duplicates, and how many other hosts share the rest."""
    top = host_duplicates.most_common(shown)
    width, row, label_w = 380, 18, 150
    height = 10 + row * max(1, len(top)) + (16 if len(host_duplicates) > shown else 0)
    peak = max((n for _, n in top), default=1)
    parts = [_svg_open(width, height, "Duplicates per host")]
    for i, (host, count) in enumerate(top):
        y = 6 + i * row
        name = host or "(no host)"
        name = name if len(name) <= 26 else name[:25] + "\u2026"
        bar = (width - label_w - 50) * count / peak
        parts.append(f'<text x="{label_w - 4}" y="{y + 11}" text-anchor="end">{esc(name)}</text>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{max(1.0, bar):.1f}" height="{row - 5}" '
            f'fill="#d9822b"><title>{esc(host or "(no host)")}: {count:,}</title></rect>'
        )
        parts.append(f'<text x="{label_w + bar + 4:.1f}" y="{y + 11}">{count:,}</text>')
    if len(host_duplicates) > shown:
        rest = sum(host_duplicates.values()) - sum(n for _, n in top)
        others = len(host_duplicates) - shown
        parts.append(f'<text x="{label_w}" y="{height - 4}">+ {rest:,} on {others:,} other hosts</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(width: int, height: int, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(label)}">'
    )


def charts_html(clusters: ClusterSet, t: Tally) -> str:
    if not clusters.clusters:
        return '<p class="note">No duplicates: nothing to chart.</p>'
    sims = "".join(
        chart_similarity(m, t.sims[m], clusters.thresholds.get(m)) for m in _methods_sorted(t.sims)
    )
    return (
        '<div class="charts">'
        f'<div class="chart"><h3>Cluster sizes</h3>{chart_cluster_sizes(t.sizes)}</div>'
        '<div class="chart"><h3>Similarity by method, against its threshold</h3>'
        f'<div class="small">{sims}</div></div>'
        f'<div class="chart"><h3>Duplicates per host</h3>{chart_hosts(t.host_duplicates)}</div>'
        "</div>"
    )


# --- the file ---------------------------------------------------------------------------------


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )


def write_texts(
    clusters: ClusterSet, index: Index, handle: TextIO, budget: int, progress: Progress
) -> dict[int, int]:
    """Stream the embedded texts as a JSON array; returns each embedded member's position in it.

    Identical texts (exact duplicates) are stored once. Largest clusters come first, and at
    most ``TEXTS_PER_CLUSTER`` members of each, until ``budget`` characters are used.
    """
    keys: dict[int, int] = {}
    seen: dict[int, int] = {}
    used = lookups = 0
    handle.write("[")
    progress.start(
        "embedding page texts", min(MAX_TEXTS, sum(min(c.size, TEXTS_PER_CLUSTER) for c in clusters.clusters))
    )
    for cluster in clusters.clusters:
        if used >= budget or lookups >= MAX_TEXTS:
            break
        for member in cluster.members[:TEXTS_PER_CLUSTER]:
            lookups += 1
            progress.tick()
            text = index.text(member.id)
            if text is None and member.method == "exact" and member.duplicate_of is not None:
                text = index.text(member.duplicate_of)  # a byte-identical copy keeps no text of its own
            if text is None:
                keys[member.id] = NO_TEXT
                continue
            digest = xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
            if digest not in seen:
                handle.write(("," if seen else "") + script_json(text))
                seen[digest] = len(seen)
                used += len(text)
            keys[member.id] = seen[digest]
    handle.write("]")
    progress.finish()
    return keys


def let_through_html(pages: list[LetThrough], shown: int = 200) -> str:
    """The pages that resemble another but were let through: kept, and in no cluster."""
    if not pages:
        return ""
    parts = [
        "<h2>Let through</h2>",
        f'<p class="note">{len(pages):,} pages resemble an earlier page, not enough to be sure '
        "(under the sure bar, or on weak evidence): they were let through and admitted, so they "
        "are in no cluster but their own copies'.</p>",
        '<table class="rules"><thead><tr><th>Page</th><th>Resembles</th><th class="num">Similarity</th>'
        "<th>Method</th></tr></thead><tbody>",
    ]
    for w in pages[:shown]:
        similarity = "" if w.similarity is None else f"{w.similarity:.3f}"
        parts.append(
            f'<tr><td class="url">{esc(w.url)}</td><td class="url">{esc(w.resembles)}</td>'
            f'<td class="num">{similarity}</td><td>{esc(w.method or "")}</td></tr>'
        )
    parts.append("</tbody></table>")
    if len(pages) > shown:
        parts.append(f'<p class="note">{len(pages) - shown:,} more in the JSON and CSV reports.</p>')
    return "\n".join(parts)


def write_html(
    clusters: ClusterSet,
    index: Index,
    handle: TextIO,
    progress: Progress | None = None,
    source: str = "",
    text_budget: int = TEXT_BUDGET,
) -> None:
    """Write the report to ``handle``; ``source`` names the index in the title (escaped)."""
    from .. import __version__  # at call time: the package may import this module while it loads

    progress = progress or Progress(enabled=False)
    t = tally(clusters)
    script = _asset("report.js")
    if "</script" in script.lower():
        raise AssertionError("report.js must not contain a closing script tag")
    template = _asset("template.html")
    head, rest = template.split("@@TEXTS@@")
    middle, tail = rest.split("@@DATA@@")
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    settings = clusters.settings
    methods = ", ".join(settings.get("methods", [])) or "unknown"
    subtitle = (
        f"index {esc(source or 'unnamed')} &middot; methods in use: {esc(methods)} &middot; canonical page: "
        f"{esc(clusters.policy)} ({esc(CANONICAL_POLICIES.get(clusters.policy, ''))}) "
        f"&middot; {esc(generated)}"
    )
    values = {
        "CSP": esc(_csp(script)), "VERSION": esc(__version__), "SOURCE": esc(source or "index"),
        "SUBTITLE": subtitle, "SUMMARY": summary_html(clusters, t), "CHARTS": charts_html(clusters, t),
        "RULES": url_rules_html(clusters.url_rules, clusters.url_skips),
        "RULES_LINK": url_rules_link(clusters.url_rules, clusters.url_skips),
        "RESEMBLING": let_through_html(clusters.let_through),
    }  # fmt: skip
    handle.write(_MARKER.sub(lambda m: values[m.group(1)], head))
    text_keys = write_texts(clusters, index, handle, text_budget, progress)
    handle.write(middle)

    hosts = sorted(t.host_pages.items(), key=lambda kv: (-kv[1], kv[0]))
    host_ids = {host: i for i, (host, _) in enumerate(hosts)}
    method_names = _methods_sorted(name for name in t.by_method if name != "unknown")  # tally saw them all
    method_ids = {name: i for i, name in enumerate(method_names)}
    handle.write(
        '{"methods":' + script_json(method_names) + ',"hosts":' + script_json([list(h) for h in hosts])
        + ',"thresholds":' + script_json(clusters.thresholds) + ',"clusters":['
    )  # fmt: skip
    progress.start("writing HTML", len(clusters.clusters))
    for i, cluster in enumerate(clusters.clusters):
        position = {m.id: j for j, m in enumerate(cluster.members)}
        rows = [
            [
                m.url,
                m.title or "",
                None if m.similarity is None else round(m.similarity, 4),
                method_ids.get(m.method, -1) if m.method else -1,
                round(m.seen_at, 3),
                position.get(m.duplicate_of, -1) if m.duplicate_of is not None else -1,
                host_ids[host_of(m.url)],
                text_keys.get(m.id, LEFT_OUT),
                1 if m.uncertain else 0,
            ]
            for m in cluster.members
        ]
        clean = clusters.clean_url(cluster.canonical.url)
        shown = [cluster.number, rows] + ([clean] if clean != cluster.canonical.url else [])
        handle.write(("," if i else "") + script_json(shown))
        progress.tick()
    handle.write("]}")
    progress.finish()
    handle.write(_MARKER.sub(lambda m: script if m.group(1) == "SCRIPT" else m.group(0), tail))
