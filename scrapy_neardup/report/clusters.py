"""Duplicate edges joined into clusters (union-find), with a canonical member per cluster."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field


class UnionFind:
    """Disjoint sets over document ids, path-halving and union by size."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.size: dict[int, int] = {}

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


@dataclass
class Cluster:
    """Documents joined by duplicate edges; ``canonical`` is the one to keep (first seen)."""

    canonical: int
    members: list[int] = field(default_factory=list)


def build_clusters(edges: Iterable[tuple[int, int]]) -> list[Cluster]:
    """Clusters from (document, duplicate_of) edges, largest first, then by canonical id.

    Chains join: A~B and B~C make one cluster even when A and C are not similar.
    The canonical member is the first seen (lowest id), the page a crawl kept.
    """
    sets = UnionFind()
    for doc, other in edges:
        sets.union(doc, other)
    groups: dict[int, list[int]] = defaultdict(list)
    for doc in sets.parent:
        groups[sets.find(doc)].append(doc)
    clusters = [Cluster(canonical=min(ids), members=sorted(ids)) for ids in groups.values()]
    clusters.sort(key=lambda c: (-len(c.members), c.canonical))
    return clusters
