"""The ledger's stores, declared once: what each holds, and what an engine needs to keep it.

The ledger (``ledger``, ``run_ledger``, ``url_ledger``) reads and writes the stores by the
names below; an engine lays each out from its declaration (its table, its key, the documents'
fields a set is read from, a map whose values no process changes once set, a read that waits
for a lock on its key), never by a store's name.

- A *kind* of documents: numbered records of typed fields (values None, int, float, str,
  bytes).
- A *set*: document ids under keys; *derived* from the documents' own fields where an engine
  can read it from them (an SQL engine's index), else kept.
- A *map*: fields to values, some counters.
- An *order*: documents ranked by one of their fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..methods import STORED_FIELDS


@dataclass(frozen=True)
class Kind:
    """Documents. ``table``: their SQL table and the Redis key part of each; ``present``: a field
    every document of the kind has; ``counter``: the Redis key its ids come from (None: its ids
    are another kind's, a table keyed by ``id_column``); ``listing``: the Redis key listing its
    ids, ``ordered`` for a sorted set (a million pages streamed in order); ``narrow``: fields an
    SQL engine may keep in 4 bytes; ``checked``: the kind a check records (its id may be asked
    for with the check's first statement); ``redis``: its documents' key part in Redis (by
    default its name)."""

    name: str
    fields: dict[str, type]
    table: str
    present: str
    listing: str
    counter: str | None = None
    id_column: str = "id"
    ordered: bool = False
    narrow: frozenset[str] = frozenset()
    checked: bool = False
    redis: str = ""  # its documents' key part in Redis, when not its name


@dataclass(frozen=True)
class SetStore:
    """Ids under keys. Derived (``of``: the documents' fields whose values make its key, and
    ``where``, a condition on their other fields), or kept (``table``: an SQL table, its key and
    member columns; ``packed``: postings many to a row, ``engines.postgres.packing``).
    ``waited``: a check reads it under a lock on its key (another process may be filling it).
    ``redis``: its keys' part in Redis, where every set is kept."""

    name: str
    redis: str
    of: tuple[str, ...] = ()
    where: dict[str, str] = field(default_factory=dict)
    table: tuple[str, str, str] | None = None
    packed: bool = False
    waited: bool = False

    def condition(self, mark: str) -> str:
        """A derived set's members under a key, as an SQL condition on the documents' columns
        (``mark``: the driver's parameter mark, each the next part of the key)."""
        equal = [f"{name} = {mark}" for name in self.of]
        return " AND ".join([*equal, *(f"{name} = '{value}'" for name, value in self.where.items())])


@dataclass(frozen=True)
class MapStore:
    """Fields to values. ``table``: an SQL table, its key and value columns (None: the engine's
    table of maps); ``first_wins``: a value once set no process changes (two processes setting
    it at once: the second's check is made again); ``counted``: counted from the documents'
    field of that name instead of kept (an SQL engine); ``totals``: its values are counters (a
    damaged one is dropped); ``counters``: its fields that are counters, where the others are
    not; ``redis``: its key in Redis; ``marks``: its table marks a schema as an index's (every
    SQL engine keeps it as a table of its own)."""

    name: str
    redis: str
    table: tuple[str, str, str] | None = None
    first_wins: bool = False
    counted: str = ""
    totals: bool = False
    counters: tuple[str, ...] = ()
    marks: bool = False


@dataclass(frozen=True)
class Order:
    name: str
    field: str  # the documents' field it ranks by


_PAGE_FIELDS: dict[str, type] = {
    **dict.fromkeys(("scope", "tokens", "duplicate_of", "raw_hash", "simhash", "spot_size", "run"), int),
    **dict.fromkeys(("seen_at", "last_seen", "similarity"), float),
    **dict.fromkeys(("exact", "spots"), bytes),
    **{s.field: int if s.sql == "INTEGER" else bytes for s in STORED_FIELDS},
    **dict.fromkeys(
        ("url", "title", "source", "status", "skip_reason", "language", "method", "extra", "url_key"), str
    ),
}

# Kinds of documents: a page's record (its verdict and signatures), a crawl run, a request the
# URL rules skipped, a page's kept text, a page a live run admitted with the request that
# fetches it again.
DOC = Kind(
    "doc", _PAGE_FIELDS, "documents", "status", "ids", "next", ordered=True, checked=True,
    narrow=frozenset({"scope", "tokens", "spot_size", "run"}),
)  # fmt: skip
RUN = Kind(
    "run",
    {
        "started_at": float, "ended_at": float, "action": str, "host": str, "pid": int, "beat_at": float,
        "claimed_by": int, "recovered_at": float,
    },
    "runs", "started_at", "runs", "run_next",
)  # fmt: skip
SKIP = Kind(
    "skip", {"url": str, "target": str, "request": bytes, "revived": int}, "url_skips", "url", "url_skip_ids",
    "url_skip_next", redis="url_skip",
)  # fmt: skip
TEXT = Kind("text", {"text": bytes}, "texts", "text", "", id_column="doc")
PENDING = Kind("pending", {"run": int, "request": bytes}, "pending", "run", "pending_ids", id_column="doc")
KINDS = {kind.name: kind for kind in (DOC, RUN, SKIP, TEXT, PENDING)}

# Sets: a lookup key's admitted pages, a revisit key's records (scope, canonical URL), a
# source's, a scope's admitted pages, a page's duplicates, a URL rule's skipped requests.
LOOKUP = SetStore("lk", "lk", table=("lookup_keys", "key", "doc"), packed=True)
BY_KEY = SetStore("url", "url", of=("scope", "url_key"), waited=True)
BY_SOURCE = SetStore("src", "src", of=("source",), waited=True)
ADMITTED = SetStore("admitted", "admitted", of=("scope",), where={"status": "unique"})
DUPLICATES = SetStore("dup", "dup", of=("duplicate_of",))
SKIP_RULE = SetStore("skip_rule", "url_skip_rule", table=("url_skip_rules", "rule", "skip"))
SETS = {store.name: store for store in (LOOKUP, BY_KEY, BY_SOURCE, ADMITTED, DUPLICATES, SKIP_RULE)}

# Maps: what the index was built with (and its counters of scopes and counted pages), scope
# names to ids, pages by status, the term frequencies, each URL rule's evidence
# (pages of the same content, counter-examples), status and when it last changed.
META = MapStore("meta", "meta", ("meta", "key", "value"), counters=("scope_next", "term_docs"), marks=True)
SCOPES = MapStore("scopes", "scopes", ("scopes", "name", "id"), first_wins=True)
COUNTS = MapStore("counts", "counts", counted="status", totals=True)
TERMS = MapStore("term_df", "df", ("term_df", "term", "df"), totals=True)
SAME = MapStore("url_same", "url_same", ("url_rules", "rule", "same"), totals=True)
DIFFER = MapStore("url_differ", "url_differ", ("url_rules", "rule", "differ"), totals=True)
STATUS = MapStore("url_status", "url_status", ("url_rules", "rule", "status"))
CHANGED = MapStore("url_changed", "url_changed", ("url_rules", "rule", "changed_at"))
MAPS = {store.name: store for store in (META, SCOPES, COUNTS, TERMS, SAME, DIFFER, STATUS, CHANGED)}

SEEN = Order("seen", "last_seen")  # when each record was last seen (its page, or a copy of it, met)
ORDERS = {SEEN.name: SEEN}
FIELD_TYPES = {kind.name: kind.fields for kind in KINDS.values()}
