"""Duplicate edges joined into clusters (union-find), with the canonical member chosen by a policy.

The report reads the index in two streamed passes: the duplicate edges (only pages in a
cluster enter the union-find), then the documents (only clustered pages are kept). Memory
therefore grows with the clusters, never with the pages that have no duplicate.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ConfigError
from ..index import Index
from ..methods import ALL
from .progress import Progress
from .url_rules import SkippedRow, UrlRuleRow, clean_urls, load_url_rules, load_url_skips

# Policy name -> what it keeps; the order is the one shown in help texts.
CANONICAL_POLICIES: dict[str, str] = {
    "first-seen": "the page seen first (the one the crawl kept)",
    "shortest-url": "the shortest URL, ties to the first seen",
    "https-first": "the first seen https:// page, else the first seen",
    "longest-text": "the page with the most main-text tokens, ties to the first seen",
}


class UnionFind:
    """Disjoint sets over document ids, path-halving and union by size."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.size: dict[int, int] = {}

    def __contains__(self, x: int) -> bool:
        return x in self.parent

    def find(self, x: int) -> int:
        parent = self.parent
        if x not in parent:
            parent[x] = x
            self.size[x] = 1
            return x
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]


@dataclass(slots=True)
class Member:
    """One clustered page as the report shows it; ``id`` order is the order the index saw pages."""

    id: int
    url: str
    title: str | None = None
    seen_at: float = 0.0
    tokens: int = 0
    duplicate_of: int | None = None
    similarity: float | None = None
    method: str | None = None
    uncertain: bool = False  # let through: it resembles ``duplicate_of``, not surely enough to drop


@dataclass(slots=True)
class ReportCluster:
    """A numbered cluster: ``members[0]`` is the canonical page, the rest follow in the order seen."""

    number: int
    members: list[Member]

    @property
    def canonical(self) -> Member:
        return self.members[0]

    @property
    def size(self) -> int:
        return len(self.members)


def check_policy(policy: str, setting: str = "NEARDUP_CANONICAL (--canonical)") -> str:
    """The policy name, or a ConfigError naming the setting (and flag) and the choices."""
    if policy not in CANONICAL_POLICIES:
        raise ConfigError(
            setting,
            f"unknown canonical policy {policy!r}; use one of {', '.join(CANONICAL_POLICIES)}",
        )
    return policy


def policy_key(policy: str) -> Callable[[Member], tuple[Any, ...]]:
    """The sort key whose smallest member is the canonical page; every key ends on the id, so ties
    go to the page seen first and the choice never depends on the order pages were read."""
    check_policy(policy)
    if policy == "shortest-url":
        return lambda m: (len(m.url), m.id)
    if policy == "https-first":
        return lambda m: (not m.url[:8].lower().startswith("https://"), m.id)
    if policy == "longest-text":
        return lambda m: (-m.tokens, m.id)
    return lambda m: (m.id,)


def cluster_members(
    edges: Iterable[tuple[int, int]], documents: Iterable[Member], policy: str = "first-seen"
) -> list[ReportCluster]:
    """Numbered clusters from (document, duplicate_of) edges and the documents' records.

    ``documents`` may hold every page; only those on an edge are kept. Clusters are numbered
    largest first, then by their first-seen member, so numbers do not change with the policy.
    """
    return arrange(join(edges), documents, policy)


def join(edges: Iterable[tuple[int, int]]) -> UnionFind:
    """The union-find of (document, duplicate_of) edges: it holds only pages on some edge."""
    sets = UnionFind()
    for doc, other in edges:
        sets.union(doc, other)
    return sets


def arrange(sets: UnionFind, documents: Iterable[Member], policy: str) -> list[ReportCluster]:
    """Group the clustered ``documents`` by their set, pick each canonical page, number the clusters."""
    key = policy_key(policy)
    groups: dict[int, list[Member]] = defaultdict(list)
    for member in documents:
        if member.id in sets:
            groups[sets.find(member.id)].append(member)
    ordered = sorted(groups.values(), key=lambda ms: (-len(ms), min(m.id for m in ms)))
    clusters = []
    for number, members in enumerate(ordered, start=1):
        members.sort(key=lambda m: m.id)
        canonical = min(members, key=key)
        members.remove(canonical)
        clusters.append(ReportCluster(number, [canonical, *members]))
    return clusters


@dataclass(frozen=True, slots=True)
class LetThrough:
    """A page that resembles an earlier one but was not sure enough to drop: the crawl let it
    through, and the index admitted it. A weak link, not a duplicate edge: it joins no cluster."""

    id: int
    url: str
    resembles: str  # the URL of the page it resembles
    similarity: float | None
    method: str | None


@dataclass
class ClusterSet:
    """Everything the three formats need: counts by status, the clusters, and the index's settings."""

    policy: str
    clusters: list[ReportCluster]
    documents: int
    unique: int
    duplicates: int
    skipped: int
    settings: dict[str, Any]
    thresholds: dict[str, float]
    action: str | None = None  # what the latest crawl did with duplicates: drop, tag, or None (a scan)
    url_rules: list[UrlRuleRow] = field(default_factory=list)  # the crawls' learned URL rules
    url_skips: list[SkippedRow] = field(default_factory=list)  # the requests they skipped
    clean_url: Callable[[str], str] = str  # a URL with what the adopted rules say does not matter taken out
    let_through: list[LetThrough] = field(default_factory=list)  # admitted pages with a weak link
    forgotten: int = 0  # pages the index forgot (not seen for long: NEARDUP_FORGET_AFTER, MAX_PAGES)

    def members_by_id(self) -> dict[int, tuple[ReportCluster, Member]]:
        """Each clustered page's cluster and record (the CSV looks up every row here)."""
        return {m.id: (c, m) for c in self.clusters for m in c.members}


def similarity_thresholds(config: Any) -> dict[str, float]:
    """Each method's threshold on the 0-to-1 similarity the index records for it."""
    return {method.name: method.threshold(config) for method in ALL}


def load_clusters(index: Index, policy: str = "first-seen", progress: Progress | None = None) -> ClusterSet:
    """Stream an index into a ClusterSet: one pass over the duplicate edges, one over the documents."""
    check_policy(policy)
    progress = progress or Progress(enabled=False)
    stats = index.stats()
    counts = {"unique": 0, "duplicate": 0, "skipped": 0}
    intern = sys.intern  # a handful of method names shared by every member
    weak: list[tuple[int, str, int, float | None, str | None]] = []

    def edges() -> Iterator[tuple[int, int]]:
        progress.start("clustering duplicate edges", stats["duplicates"])
        for doc, other, _sim, _method in index.match_edges():
            progress.tick()
            yield doc, other
        progress.finish()

    def members(sets: UnionFind) -> Iterator[Member]:
        progress.start("reading documents", stats["documents"])
        for r in index.documents():
            progress.tick()
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            if r["status"] == "unique" and r["duplicate_of"] is not None:
                weak.append((r["id"], r["url"], r["duplicate_of"], r["similarity"], r["method"]))
            if r["id"] not in sets:  # most pages: no Member built for them
                continue
            yield Member(
                r["id"], r["url"], r["title"], r["seen_at"], r["tokens"], r["duplicate_of"],
                r["similarity"], intern(r["method"]) if r["method"] else None,
                uncertain=r["status"] == "unique" and r["duplicate_of"] is not None,
            )  # fmt: skip
        progress.finish()

    sets = join(edges())
    clusters = arrange(sets, members(sets), policy)
    del sets  # as large as the clusters: freed before the report is written
    let_through = [
        LetThrough(doc, url, (index.get(of) or {"url": ""})["url"], similarity, method)
        for doc, url, of, similarity, method in weak
    ]
    config = index.config
    return ClusterSet(
        policy=policy,
        clusters=clusters,
        documents=sum(counts.values()),
        unique=counts["unique"],
        duplicates=counts["duplicate"],
        skipped=counts["skipped"],
        settings=config.shaping(),
        thresholds=similarity_thresholds(config),
        action=index.last_action(),
        url_rules=(rules := load_url_rules(index)),
        url_skips=load_url_skips(index),
        clean_url=clean_urls(rules),
        let_through=let_through,
        forgotten=stats.get("forgotten", 0),
    )
