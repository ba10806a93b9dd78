"""Learned URL rules: which differences between a site's URLs do not change its pages.

Every judged page is evidence. When two pages of a host have URLs that differ only by some
query parameters (present or absent, or of another value), by one path segment (``/print/``,
``/amp/``) or by their host name, their verdicts say whether that difference changed the
content: the same content (one is a copy of the other) counts for each element of the
difference, other content counts against a difference of one element. A rule ("on this
host, under this section, parameter X does not change the page") is adopted once its
evidence bounds the share of pages it changes under ``url_rule.MAX_ERROR`` at 95 % confidence,
with no counter-example; a counter-example refuses it, or revokes it once adopted.

A request whose URL, rewritten by the adopted rules, names a page this crawl fetched under
another URL is a predicted copy. The crawl skips it but for a share (``EXPLORE``) it still
fetches to keep checking the rules that predicted it. This module is pure: the crawl's
``crawl/url_rules.py`` keeps the rules in the index and the skipped requests for revival.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import xxhash

from .url_rule import HOST, PARAM, SEGMENT, Rule, RuleKey

# The share of predicted copies still fetched, so that the rules keep being checked.
EXPLORE = 0.05
# At most so many query parameters may differ between two URLs for their pages to be evidence.
MAX_DIFFERENCE = 3
# Parameters of a URL indexed for evidence (the first ones, by name): bounds the keys a URL makes.
MAX_PARAMS = 5
# Pages kept under one key of the evidence index: a page pairs with a few that differ from it in
# one way (the first ones met), not with every article that differs from it by its id.
MAX_NEAR = 16
# Pages the model remembers, the latest fetched: bounds its memory (about 3 KB a page) on a long
# crawl. A copy of a page fetched longer ago is fetched, and pairs with it teach nothing.
MAX_PAGES = 20_000


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
        params = tuple(sorted(parse_qsl(parts.query, keep_blank_values=True, errors="surrogateescape")))
        return cls(f"{parts.scheme.lower()}://{parts.netloc.lower()}", segments, params)

    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.params)

    def without(self, names: Iterable[str]) -> Form:
        drop = set(names)
        return Form(self.host, self.segments, tuple(p for p in self.params if p[0] not in drop))


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


def explored(url: str, share: float = EXPLORE, salt: int = 0) -> bool:
    """Whether a predicted copy is fetched all the same: ``share`` of them, by the URL's path and
    query (on any host and port) and ``salt``: a crawl draws its own share, so that what one
    run skips another explores."""
    parts = urlsplit(url)
    where = f"{parts.path}?{parts.query}".encode("utf-8", "surrogatepass")
    return xxhash.xxh64_intdigest(where, seed=salt) % 10_000 < share * 10_000


@dataclass
class Evidence:
    """What one judged page taught: rules whose evidence grew, and the counter-examples."""

    same: list[RuleKey] = field(default_factory=list)
    differ: list[RuleKey] = field(default_factory=list)
    # Differences a pair of the page's own content shows to change nothing, whatever their status.
    harmless: set[RuleKey] = field(default_factory=set)


class UrlModel:
    """The pages fetched so far (their URLs and content clusters) and the rules learned from them.

    ``observe`` adds a judged page and returns the evidence it brings; ``predict`` says whether
    a URL is a predicted copy of a page fetched under another URL, and by which rules. Once a
    host rule joins two hosts, their parameters' and segments' rules are learned together.
    """

    def __init__(self) -> None:
        self.rules: dict[RuleKey, Rule] = {}
        self._near: dict[tuple, list[tuple[Form, int]]] = {}  # reduced forms -> (page, its cluster)
        self._fetched: dict[tuple, str] = {}  # a fetched page's rewritten form -> its URL (this crawl)
        self._fetched_urls: dict[str, tuple[Form, int | None]] = {}  # this crawl's pages: form, cluster
        self._witnesses: dict[RuleKey, set[int]] = {}  # a learning rule's pages of the same content
        self._in_force: set[RuleKey] = set()  # the adopted rules that no joined host refuses
        self._canonical: dict[str, str] = {}  # a host joined to others by host rules -> their name
        self._texts: dict[int, int] = {}  # a main text's exact hash -> the cluster it was first met in

    # --- learning ---------------------------------------------------------------------------

    def cluster_of_text(self, text: int | None, cluster: int | None) -> int | None:
        """The cluster a page of this main text counts in: the first one its text was met in. A
        near match can put two pages of one text in two clusters (one matched a longer version
        first, the other a shorter one admitted since); as evidence they are one content."""
        if text is None or cluster is None:
            return cluster
        first = self._texts.setdefault(text, cluster)
        if len(self._texts) > MAX_PAGES:
            del self._texts[next(iter(self._texts))]
        return first

    def observe(self, url: str, cluster: int | None) -> Evidence:
        """Add a page this crawl fetched and judged (``cluster``: the id of its content's first
        page; None when its verdict says nothing of other pages, as for a revisit found
        unchanged) and return what it teaches."""
        form = None if url in self._fetched_urls else Form.of(url)
        if form is None:
            return Evidence()
        evidence = Evidence()
        if cluster is not None:
            keys = list(_reduced_keys(form))
            evidence = self._evidence(form, cluster, keys)
            for key in keys:
                near = self._near.setdefault(key, [])
                if len(near) < MAX_NEAR:
                    near.append((form, cluster))
        self._fetched_urls[url] = (form, cluster)
        self._add_fetched(form, url)
        if len(self._fetched_urls) > MAX_PAGES:
            self._forget(next(iter(self._fetched_urls)))
        return evidence

    def _forget(self, url: str) -> None:
        """Take the page fetched longest ago out of the model."""
        form, cluster = self._fetched_urls.pop(url)
        if cluster is not None:
            for key in _reduced_keys(form):
                near = self._near.get(key, [])
                if (form, cluster) in near:
                    near.remove((form, cluster))
                    if not near:
                        del self._near[key]
        rewritten = self._rewrite(form)[0]
        if self._fetched.get(rewritten) == url:
            del self._fetched[rewritten]

    def _evidence(self, form: Form, cluster: int, keys: list[tuple]) -> Evidence:
        """The rules the pages near ``form`` support (each learning rule once a content cluster)
        or contradict: a pair of other content that differs by one element not known harmless,
        or by adopted rules only. Those are each blamed, but for the ones that a pair of either
        page's own content differs by (that element changed neither page)."""
        evidence, pairs = Evidence(), self._pairs(form, keys)
        harmless = {k for keys, _, other_cluster in pairs if other_cluster == cluster for k in keys}
        evidence.harmless = {self._general(k) for k in harmless}
        suspects: list[list[RuleKey]] = []  # pairs of other content that differ by adopted rules only
        for keys, other, other_cluster in pairs:
            if other_cluster == cluster:
                evidence.same += [k for k in keys if self._witness(k, cluster)]
                continue
            unknown = [k for k in keys if not self.enforces(k)]
            if len(unknown) == 1:
                evidence.differ += unknown
            elif not unknown:
                spared = harmless | self._cleared(other, other_cluster)
                suspects.append([k for k in keys if k not in spared] or keys)
        evidence.differ += _fewest_to_blame(suspects)
        return evidence

    def _pairs(self, form: Form, keys: list[tuple]) -> list[tuple[list[RuleKey], Form, int]]:
        """The pages near ``form`` (found by its ``keys``) whose URLs differ from its own in one
        kind of way: the rules the difference is about, the page, its cluster."""
        pairs, seen, section = [], set(), None
        for key in keys:
            for other, other_cluster in self._near.get(key, ()):
                if other == form or other in seen:
                    continue
                seen.add(other)
                found = difference(form, other)
                if found is not None:
                    if section is None:  # the same for every pair: the rules in force on ``form``
                        section = _section(self._rewrite(form)[0][1])
                    pairs.append((self._keys(form, section, *found), other, other_cluster))
        return pairs

    def _keys(self, form: Form, section: str, kind: str, names: frozenset[str]) -> list[RuleKey]:
        """The rules a difference of ``form`` from another page is about: a parameter's within the
        ``section`` its URL has once adopted segments are taken out, on the hosts joined to its own."""
        if kind == HOST:
            return [RuleKey("", "", HOST, name) for name in sorted(names)]
        host = self._host_of(form.host)
        return [RuleKey(host, section if kind == PARAM else "", kind, name) for name in sorted(names)]

    def _witness(self, key: RuleKey, cluster: int) -> bool:
        """Whether a pair of ``cluster``'s pages is new evidence for ``key``: pages of one content
        count once, and only while the rule is learning (the bound assumes independent pages)."""
        rule = self.rules.get(key)
        if rule is not None and rule.status != "learning":
            return False
        seen = self._witnesses.setdefault(key, set())
        if cluster in seen:
            return False
        seen.add(cluster)
        return True

    def blamed(self, keys: list[RuleKey], harmless: set[RuleKey]) -> list[RuleKey]:
        """The rules a wrong prediction by ``keys`` blames: those that no pair of the page's own
        content shows harmless (all of them when each is), so that a parameter changing a few
        pages does not take the rules it was used beside down with it."""
        return [k for k in keys if self._general(k) not in harmless] or keys

    def harmless_for(self, url: str) -> set[RuleKey]:
        """The differences that pairs of a fetched page's own content show to change nothing."""
        fetched = self._fetched_urls.get(url)
        if fetched is None or fetched[1] is None:
            return set()
        return {self._general(k) for k in self._cleared(*fetched)}

    def _cleared(self, form: Form, cluster: int) -> set[RuleKey]:
        """The rules that a page's pairs with pages of its own content differ by."""
        pairs = self._pairs(form, list(_reduced_keys(form)))
        return {k for keys, _, other in pairs if other == cluster for k in keys}

    def cluster_of(self, url: str) -> int | None:
        """The content cluster of a page this crawl fetched (None: unknown)."""
        fetched = self._fetched_urls.get(url)
        return None if fetched is None else fetched[1]

    def enforces(self, key: RuleKey) -> bool:
        """Whether ``key`` is a rule in force (adopted, and refused on no host joined to its own)."""
        return key in self._in_force

    def withdrawn(self) -> list[RuleKey]:
        """The rules whose skipped requests must be fetched after all: the revoked ones, and the
        adopted ones out of force because a host joined to theirs refuses or revokes them."""
        return [
            k for k, r in self.rules.items() if r.status == "revoked" or (r.adopted and not self.enforces(k))
        ]  # fmt: skip

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
        for key, rule in self.rules.items():
            if rule.status != "learning":
                self._witnesses.pop(key, None)
        self._fetched = {}
        for url, (form, _) in self._fetched_urls.items():
            self._add_fetched(form, url)

    def _add_fetched(self, form: Form, url: str) -> None:
        """Name a fetched page for its rewritten form: the first URL fetched, or the clean one
        (that no rule rewrites), so that a wrong prediction blames the request's rules alone."""
        rewritten, used = self._rewrite(form)
        if not used:
            self._fetched[rewritten] = url
        else:
            self._fetched.setdefault(rewritten, url)

    def _general(self, key: RuleKey) -> RuleKey:
        """The rule on all the hosts joined to its own."""
        return RuleKey(self._host_of(key.host), key.section, key.kind, key.name)

    # --- predicting -------------------------------------------------------------------------

    @property
    def in_force(self) -> bool:
        """Whether any rule is in force (else no URL is rewritten)."""
        return bool(self._in_force)

    def same_page(self, a: str, b: str) -> bool:
        """Whether the rules in force rewrite ``a`` and ``b`` to one page: a page of an earlier
        crawl met again under another of its URLs is a revisit of it, not its copy."""
        if not self._in_force or a == b:
            return False
        form_a, form_b = Form.of(a), Form.of(b)
        return (
            form_a is not None and form_b is not None and self._rewrite(form_a)[0] == self._rewrite(form_b)[0]
        )

    def canonical(self, url: str) -> str:
        """``url`` with what the rules in force say does not matter taken out: the page's clean
        URL (``url`` itself when no rule applies)."""
        form = Form.of(url) if self._in_force else None
        if form is None:
            return url
        (host, segments, params), used = self._rewrite(form)
        if not used:
            return url
        path = "/" + "/".join(segments) + ("/" if segments and urlsplit(url).path.endswith("/") else "")
        query = urlencode(params, quote_via=quote, errors="surrogateescape")
        return host + path + ("?" + query if query else "")

    def predict(self, url: str) -> tuple[str, list[RuleKey]] | None:
        """The URL of a page this crawl fetched that ``url`` is a copy of by the adopted rules,
        with the rules used; None when it is not one (or is that page itself)."""
        form = None if url in self._fetched_urls or not self._in_force else Form.of(url)
        if form is None:  # fetched, or no rule in force: nothing to predict by
            return None
        rewritten, used = self._rewrite(form)
        target = self._fetched.get(rewritten)
        if target is None or target == url:
            return None
        used |= self._rewrite(self._fetched_urls[target][0])[1]
        return (target, sorted(used, key=RuleKey.text)) if used else None

    def _rewrite(self, form: Form) -> tuple[tuple, set[RuleKey]]:
        """The form with what the rules in force say does not matter taken out (the host named
        for its joined hosts, adopted segments, then adopted parameters of the section that
        leaves), and the rules that took something out."""
        host = self._host_of(form.host)
        used = {k for k in self._in_force if k.kind == HOST and form.host in k.name.split(" ")}
        segments = []
        for segment in form.segments:
            rule = self._in_force_on(form.host, "", SEGMENT, segment)
            if rule is None:
                segments.append(segment)
            else:
                used.add(rule)
        section, dropped = _section(tuple(segments)), set()
        for name in form.names():
            rule = self._in_force_on(form.host, section, PARAM, name)
            if rule is not None:
                used.add(rule)
                dropped.add(name)
        return (host, tuple(segments), form.without(dropped).params), used

    def _in_force_on(self, host: str, section: str, kind: str, name: str) -> RuleKey | None:
        """The rule in force on this host or on the hosts joined to it, if any."""
        for on in (host, self._host_of(host)):
            key = RuleKey(on, section, kind, name)
            if key in self._in_force:
                return key
        return None

    def _host_of(self, host: str) -> str:
        return self._canonical.get(host, host)


def _fewest_to_blame(suspects: list[list[RuleKey]]) -> list[RuleKey]:
    """The fewest rules that account for every counter-example pair (each pair's rules, one of
    which changed the page): ``lang=de`` against ``?ref=home``, ``?sid=1`` and the other host's
    copy blames ``lang``, not the three rules each pair shows beside it. A pair whose rules
    tie blames them all: a rule wrongly spared could cost pages, one wrongly blamed only time."""
    blamed: list[RuleKey] = []
    left = [set(keys) for keys in suspects]
    while left:
        counts: dict[RuleKey, int] = {}
        for keys in left:
            for key in keys:
                counts[key] = counts.get(key, 0) + 1
        most = max(counts.values())
        chosen = sorted((k for k, n in counts.items() if n == most), key=RuleKey.text)
        if most == 1:  # no rule explains two pairs: every rule of what is left is suspect
            chosen = sorted(counts, key=RuleKey.text)
        blamed += chosen
        left = [keys for keys in left if not keys & set(chosen)]
    return blamed


def _section(segments: tuple[str, ...]) -> str:
    """The first path segment of a page below the root: a parameter's rules hold within it."""
    return segments[0] if len(segments) > 1 else ""


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
