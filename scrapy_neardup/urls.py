"""Learned URL rules: which differences between a site's URLs do not change its pages.

Every judged page is evidence. When two pages of a host have URLs that differ only by some
query parameters (present or absent, or of another value), by one path segment (``/print/``,
``/amp/``) or by their host name, their verdicts say whether that difference changed the
content: the same content (one is a copy of the other) counts for each element of the
difference, other content counts against a difference of one element. A rule ("on this
host, under this section, parameter X does not change the page") is adopted once its
evidence bounds the share of pages it changes under ``MAX_ERROR`` at 95 % confidence, with
no counter-example; a counter-example refuses it, or revokes it once adopted.

A request whose URL, rewritten by the adopted rules, names a page this crawl fetched under
another URL is a predicted copy. The crawl skips it but for a share (``EXPLORE``) it still
fetches to keep checking the rules that predicted it. This module is pure: the crawl's
``crawl/url_rules.py`` keeps the rules in the index and the skipped requests for revival.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

import xxhash

# The share of the pages a rule may change, bounded at 95 % confidence, under which it is adopted:
# with no counter-example, 29 pairs of pages that differ by it and hold the same content.
MAX_ERROR, CONFIDENCE = 0.1, 0.95
# The share of predicted copies still fetched, so that the rules keep being checked.
EXPLORE = 0.05
# At most so many query parameters may differ between two URLs for their pages to be evidence.
MAX_DIFFERENCE = 3
# Parameters of a URL indexed for evidence (the first ones, by name): bounds the keys a URL makes.
MAX_PARAMS = 5
# Pages kept under one key of the evidence index: a page pairs with a few that differ from it in
# one way (the first ones met), not with every article that differs from it by its id.
MAX_NEAR = 16

PARAM, SEGMENT, HOST = "param", "segment", "host"


@dataclass(frozen=True)
class Form:
    """A URL as rules see it: its host (with scheme and port), path segments and query pairs."""

    host: str
    segments: tuple[str, ...]
    params: tuple[tuple[str, str], ...]  # sorted; a name may repeat

    @classmethod
    def of(cls, url: str) -> Form | None:
        try:
            parts = urlsplit(url)
        except ValueError:
            return None
        if not parts.netloc:
            return None
        segments = tuple(s for s in parts.path.split("/") if s)
        params = tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))
        return cls(f"{parts.scheme.lower()}://{parts.netloc.lower()}", segments, params)

    @property
    def section(self) -> str:
        """The first path segment of a page below the root: a parameter's rules hold within it."""
        return self.segments[0] if len(self.segments) > 1 else ""

    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.params)

    def without(self, names: Iterable[str]) -> Form:
        drop = set(names)
        return Form(self.host, self.segments, tuple(p for p in self.params if p[0] not in drop))


@dataclass(frozen=True)
class RuleKey:
    """What a rule is about: on ``host`` (under ``section`` for a parameter), the ``kind`` of
    difference and its ``name`` (the parameter, the segment, or the other host)."""

    host: str
    section: str
    kind: str
    name: str

    def text(self) -> str:
        return "\t".join((self.host, self.section, self.kind, self.name))

    @classmethod
    def parse(cls, text: str) -> RuleKey:
        host, section, kind, name = text.split("\t")
        return cls(host, section, kind, name)


@dataclass
class Rule:
    """A rule and its evidence: pairs of pages that differ by it with the same content (``same``)
    and with other content (``differ``: counter-examples)."""

    key: RuleKey
    same: int = 0
    differ: int = 0
    status: str = "learning"  # learning, adopted, refused (a counter-example first), revoked

    @property
    def bound(self) -> float:
        """The share of pages it changes, bounded above at CONFIDENCE (Clopper-Pearson with no
        counter-example: 1 - (1 - CONFIDENCE) ** (1 / same)); 1 without evidence."""
        return 1.0 - (1.0 - CONFIDENCE) ** (1.0 / self.same) if self.same else 1.0

    @property
    def adopted(self) -> bool:
        return self.status == "adopted"


def difference(a: Form, b: Form) -> tuple[str, frozenset[str]] | None:
    """How two URLs differ, when it is one kind of difference that rules are about: the query
    parameters whose presence or value differs (at most MAX_DIFFERENCE), one path segment one of
    them has more, or the host."""
    if a.host != b.host:
        if a.segments == b.segments and a.params == b.params:
            return HOST, frozenset({min(a.host, b.host) + " " + max(a.host, b.host)})
        return None
    if a.segments == b.segments:
        values_a, values_b = _by_name(a.params), _by_name(b.params)
        names = {n for n in values_a.keys() | values_b.keys() if values_a.get(n) != values_b.get(n)}
        return (PARAM, frozenset(names)) if 0 < len(names) <= MAX_DIFFERENCE else None
    if a.params == b.params and abs(len(a.segments) - len(b.segments)) == 1:
        short, long_ = sorted((a.segments, b.segments), key=len)
        for at, segment in enumerate(long_):
            # A view of a page (/print/..., .../amp), not a page below its section (/news/x.html)
            if long_[:at] + long_[at + 1 :] == short and short and "." not in segment:
                return SEGMENT, frozenset({segment})
    return None


def _by_name(params: tuple[tuple[str, str], ...]) -> dict[str, tuple[str, ...]]:
    values: dict[str, list[str]] = {}
    for name, value in params:
        values.setdefault(name, []).append(value)
    return {name: tuple(v) for name, v in values.items()}


def rule_keys(a: Form, kind: str, names: frozenset[str]) -> list[RuleKey]:
    section = a.section if kind == PARAM else ""
    host = a.host if kind != HOST else ""
    return [RuleKey(host, section, kind, name) for name in sorted(names)]


def explored(url: str, share: float = EXPLORE) -> bool:
    """Whether a predicted copy is fetched all the same: ``share`` of them, the same ones each
    time (by the URL's path and query: on any host and port)."""
    parts = urlsplit(url)
    where = f"{parts.path}?{parts.query}".encode("utf-8", "surrogatepass")
    return xxhash.xxh64_intdigest(where) % 10_000 < share * 10_000


@dataclass
class Evidence:
    """What one judged page taught: rules whose evidence grew, and the counter-examples."""

    same: list[RuleKey] = field(default_factory=list)
    differ: list[RuleKey] = field(default_factory=list)


class UrlModel:
    """The pages fetched so far (their URLs and content clusters) and the rules learned from them.

    ``observe`` adds a judged page and returns the evidence it brings; ``predict`` says whether
    a URL is a predicted copy of a page fetched under another URL, and by which rules.
    """

    def __init__(self) -> None:
        self.rules: dict[RuleKey, Rule] = {}
        self._near: dict[tuple, list[tuple[Form, int]]] = {}  # reduced forms -> (page, its cluster)
        self._fetched: dict[tuple, str] = {}  # a fetched page's rewritten form -> its URL (this crawl)
        self._fetched_urls: dict[str, tuple[Form, int]] = {}  # this crawl's pages: form, cluster
        self._in_force: set[RuleKey] = set()  # the adopted rules that no aliased host refuses
        self._canonical: dict[str, str] = {}  # a host joined to others by host rules -> their name

    # --- learning ---------------------------------------------------------------------------

    def observe(self, url: str, cluster: int) -> Evidence:
        """Add a page this crawl fetched and judged (``cluster``: the id of its content's first
        page) and return what it teaches."""
        form = Form.of(url)
        evidence = Evidence()
        if form is None:
            return evidence
        seen: set[Form] = set()
        for key in _reduced_keys(form):
            for other, other_cluster in self._near.get(key, ()):
                if other == form or other in seen:
                    continue
                seen.add(other)
                found = difference(form, other)
                if found is None:
                    continue
                kind, names = found
                keys = rule_keys(form, kind, names)
                if other_cluster == cluster:
                    evidence.same += keys
                else:
                    unknown = [k for k in keys if not self._adopted(k)]
                    if len(unknown) <= 1:  # the one element not known harmless, or the adopted ones
                        evidence.differ += unknown or keys
        for key in _reduced_keys(form):
            near = self._near.setdefault(key, [])
            if len(near) < MAX_NEAR:
                near.append((form, cluster))
        self._fetched_urls[url] = (form, cluster)
        self._fetched.setdefault(self._rewritten(form), url)
        return evidence

    def cluster_of(self, url: str) -> int | None:
        """The content cluster of a page this crawl fetched."""
        fetched = self._fetched_urls.get(url)
        return None if fetched is None else fetched[1]

    def _adopted(self, key: RuleKey) -> bool:
        return key in self._in_force

    def rules_changed(self) -> None:
        """Take the rules' new status in: the hosts adopted host rules join, the rules in force
        (adopted, and refused or revoked on no host joined to theirs), the fetched pages' forms."""
        joined: dict[str, set[str]] = {}
        for key, rule in self.rules.items():
            if key.kind == HOST and rule.adopted:
                group = set(key.name.split(" "))
                for host in list(group):
                    group |= joined.get(host, set())
                for host in group:
                    joined[host] = group
        self._canonical = {host: min(group) for host, group in joined.items()}
        vetoed = {self._general(k) for k, r in self.rules.items() if r.status in ("refused", "revoked")}
        self._in_force = {
            k for k, r in self.rules.items()
            if r.adopted and (k.kind == HOST or self._general(k) not in vetoed)
        }  # fmt: skip
        self._fetched = {}
        for url, (form, _) in self._fetched_urls.items():
            self._fetched.setdefault(self._rewritten(form), url)

    def _general(self, key: RuleKey) -> RuleKey:
        """The rule on all the hosts joined to its own."""
        return RuleKey(self._host_of(key.host), key.section, key.kind, key.name)

    # --- predicting -------------------------------------------------------------------------

    def predict(self, url: str) -> tuple[str, list[RuleKey]] | None:
        """The URL of a page this crawl fetched that ``url`` is a copy of by the adopted rules,
        with the rules used; None when it is not one (or is that page itself)."""
        form = Form.of(url)
        if form is None or url in self._fetched_urls:
            return None
        rewritten = self._rewritten(form)
        target = self._fetched.get(rewritten)
        if target is None or target == url:
            return None
        used = self._used(form) | self._used(self._fetched_urls[target][0])
        return (target, sorted(used, key=RuleKey.text)) if used else None

    def _rewritten(self, form: Form) -> tuple:
        """The form with what the adopted rules say does not matter taken out."""
        host = self._host_of(form.host)
        names = {n for n in form.names() if self._adopted(RuleKey(form.host, form.section, PARAM, n))}
        segments = tuple(s for s in form.segments if not self._adopted(RuleKey(form.host, "", SEGMENT, s)))
        return host, segments, form.without(names).params

    def _host_of(self, host: str) -> str:
        return self._canonical.get(host, host)

    def _used(self, form: Form) -> set[RuleKey]:
        keys = {RuleKey(form.host, form.section, PARAM, n) for n in form.names()}
        keys |= {RuleKey(form.host, "", SEGMENT, s) for s in form.segments}
        keys = {k for k in keys if self._adopted(k)}
        return keys | {k for k in self._in_force if k.kind == HOST and form.host in k.name.split(" ")}


def _reduced_keys(form: Form) -> Iterator[tuple]:
    """The keys a page is found by: its form with up to MAX_DIFFERENCE parameters taken out, with
    one path segment taken out, and without its host."""
    names = sorted(form.names())[:MAX_PARAMS]
    for size in range(MAX_DIFFERENCE + 1):
        for dropped in itertools.combinations(names, size):
            yield ("p", form.host, form.segments, form.without(dropped).params)
    for at in range(len(form.segments)):
        yield ("p", form.host, form.segments[:at] + form.segments[at + 1 :], form.params)
    yield ("h", form.segments, form.params)
