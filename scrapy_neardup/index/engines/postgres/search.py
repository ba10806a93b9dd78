"""The PostgreSQL index's own search, beneath the ledger: a probe's lookup keys and SpotSigs
lists (``spot_lists``: little-endian uint32 ids, many postings a row, ``packing``) counted
partition by partition, the exact bounds, then every signature of the candidates that pass.
The spot order is frozen by frequency class once FREEZE_AT pages are admitted, as in SQLite
and Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from ....config import DedupConfig
from ....exceptions import IndexFileError
from ....methods import Fingerprint
from ....signatures.spotsigs import SpotSet
from ...bounds import BOUND_COLUMNS, kept_spot_sizes, may_match
from ...codecs import SIGNATURE_COLUMNS, blob_spots, sound_fingerprints, sound_spots_blob
from ...lookup_keys import lookup_keys
from ...pruning import SpotClasses, Walk, partition_bounds, walk
from ...spot_search import MAX_DOC, SpotKeys, counted, may_be_often
from ...stores import DOC
from .packing import ROW_IDS, bucket_rows, spot_bucket
from .session import ints, lock_key
from .tables import bucket_read

FREEZE_AT = 5000  # admitted pages with spots after which the spot order is frozen
# The most locks a check takes on its keys (the server's lock table holds 64 a connection by
# default, shared by all); a page of more holds the check lock alone (``find``).
MANY_LOCKS = 512
_FREEZE_ROWS = 20_000  # rows a statement of the freeze writes
_ROW_READ = np.dtype([("n", ">i4"), ("size", ">i4"), ("key", ">i8")])  # a bucket row read: its probed spot
BOUNDS = len(BOUND_COLUMNS.split(","))  # the first signature columns are the bounds' (``bounds``)


class _Walked(NamedTuple):
    spots: SpotSet
    scope: int
    classes: SpotClasses | None
    order: Walk
    keys: list[int]


class PostgresSearch:
    """Candidates of a probe among a scope's admitted pages, from the schema's tables."""

    def __init__(
        self, engine: Any, config: DedupConfig, keys: SpotKeys, probe_simhash: bool, simhash_keys: bool
    ) -> None:
        self.engine, self.config, self.keys, self.probe_simhash = engine, config, keys, probe_simhash
        self.simhash_keys = simhash_keys  # whether admitted pages post SimHash keys (the ledger's choice)
        self.classes: SpotClasses | None = None
        self._synced = False
        self._walked: _Walked | None = None  # the last check's walk and posting keys
        # The last row (key, bytes) of each bucket the check's read met, for its postings.
        self._tails: tuple[_Walked | None, dict[int, tuple[int, int] | None]] = (None, {})

    def _searched(self, spots: SpotSet) -> bool:
        return "spotsigs" in self.config.methods and spots.size >= self.config.spotsigs_least_spots

    def begin(self) -> None:
        """A transaction begins: another process may have frozen the spot order since the last."""
        self._synced, self._tails = False, (None, {})

    def ready(self) -> None:
        """Load the frozen spot order, or freeze it when it is due (once a transaction, inside it).

        Until the order is frozen a check holds the freeze's lock shared: a freeze (the lock
        held alone) waits for the checks that searched without the order, and every check
        after it reads the order. Two processes freezing at once: one is judged again.
        """
        if self.classes is not None or self._synced or "spotsigs" not in self.config.methods:
            return
        self._synced = True
        t, execute, freezing = self.engine.t, self.engine.execute, lock_key("spot_order", self.engine.schema)
        self.engine.lock([freezing], shared=True)
        frozen = f"SELECT 1 FROM {t('meta')} WHERE key = 'spot_order'"
        order = execute(frozen)
        last = execute(f"SELECT last_value FROM {t('doc_ids')}")
        if order.fetchone():
            self._load()
            return
        if last.fetchone()[0] < FREEZE_AT:
            return
        query = f"SELECT COUNT(*) FROM {t('documents')} WHERE status = 'unique' AND spots IS NOT NULL"
        if execute(query).fetchone()[0] >= FREEZE_AT:
            self.engine.lock([freezing])
            if execute(frozen).fetchone():
                self._load()
            else:
                self._freeze()

    def _load(self) -> None:
        rows = self.engine.execute(f"SELECT spot, class FROM {self.engine.t('spot_classes')}").fetchall()
        self.classes = SpotClasses.from_rows(rows)

    def _freeze(self) -> None:
        """Count spot frequencies over the admitted pages, fix the classes and post them again."""
        t, execute = self.engine.t, self.engine.execute
        rows = execute(
            f"SELECT id, scope, spots FROM {t('documents')} WHERE status = 'unique' AND spots IS NOT NULL"
        ).fetchall()
        sets = [
            (doc, scope, blob_spots(bytes(blob)))
            for doc, scope, blob in rows
            if sound_spots_blob(bytes(blob))
        ]
        spots, df = np.unique(np.concatenate([s.hashes for _, _, s in sets]), return_counts=True)
        classes = SpotClasses.from_frequencies(spots, df)
        for start in range(0, len(classes.spots), _FREEZE_ROWS):
            execute(
                f"INSERT INTO {t('spot_classes')} SELECT * FROM unnest(%s::bigint[], %s::integer[])",
                [ints(classes.spots[start : start + _FREEZE_ROWS].astype(np.int64).tolist()),
                 ints(classes.classes[start : start + _FREEZE_ROWS].tolist())],
            )  # fmt: skip
        execute(f"INSERT INTO {t('meta')} VALUES ('spot_order', 'classes')")
        execute(f"DELETE FROM {t('spot_lists')}")
        lists: dict[int, set[int]] = {}
        for doc, scope, spot_set in sets:
            if self._searched(spot_set):
                for key in self.keys.posting_keys(walk(spot_set, classes), scope, classes):
                    lists.setdefault(spot_bucket(key), set()).add(doc)
        rows = [row for bucket, docs in lists.items() for row in bucket_rows(bucket, sorted(docs))]
        for start in range(0, len(rows), _FREEZE_ROWS):
            chunk = rows[start : start + _FREEZE_ROWS]  # the rows' ids as one blob, cut on the server
            sizes = np.array([len(blob) for _, blob in chunk], dtype=np.int64)
            execute(
                f"INSERT INTO {t('spot_lists')} SELECT key, substring(%s::bytea FROM start + 1 FOR size) "
                "FROM unnest(%s::bigint[], %s::integer[], %s::integer[]) AS r(key, start, size)",
                [b"".join(blob for _, blob in chunk), ints(key for key, _ in chunk),
                 ints((np.cumsum(sizes) - sizes).tolist()), ints(sizes.tolist())],
            )  # fmt: skip
        self.classes = classes

    def forget(self) -> None:
        """After a rollback: a freeze the rolled-back work made is gone."""
        self.classes, self._synced = None, False

    def _walk(self, spots: SpotSet, scope_id: int) -> tuple[Walk, list[int]]:
        """The page's spots in the index's order and its posting keys (each posted in its
        bucket's rows, ``packing``): made once a check, for its probe, its locks and its postings."""
        made, classes = self._walked, self.classes
        if made is None or made.spots is not spots or made.scope != scope_id or made.classes is not classes:
            order = walk(spots, classes)
            keys = self.keys.posting_keys(order, scope_id, classes) if self._searched(spots) else []
            made = self._walked = _Walked(spots, scope_id, classes, order, keys)
        return made.order, made.keys

    def _posting_keys(self, spots: SpotSet, scope_id: int) -> list[int]:
        return self._walk(spots, scope_id)[1]

    def post(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        keys = self._posting_keys(fp.spots, scope_id)
        if not keys:
            return
        if doc_id > MAX_DOC:
            raise IndexFileError(self.engine.path, "is full: posting lists hold document ids below 2**32")
        # Into the last row of each bucket, or the next row once it holds ROW_IDS ids (the last
        # possible row takes what comes after): as the check's read found them (another process
        # appending meanwhile only makes a row a little longer), else as the server finds them.
        table = self.engine.t("spot_lists")
        buckets = np.unique(spot_bucket(np.array(keys, dtype=np.int64))).tolist()
        walked, tails = self._tails
        if walked is self._walked and all(bucket in tails for bucket in buckets):
            targets = [_target(bucket, tails[bucket]) for bucket in buckets]
            self.engine.later(
                "spot_lists",
                f"INSERT INTO {table} AS s SELECT key, %s FROM unnest(%s::bigint[]) AS key "
                "ON CONFLICT (key) DO UPDATE SET docs = s.docs || EXCLUDED.docs",
                [doc_id.to_bytes(4, "little"), ints(targets)],
            )
            return
        last = f"SELECT key, docs FROM {table} WHERE key BETWEEN b AND b + 4095 ORDER BY key DESC LIMIT 1"
        self.engine.later(
            "spot_lists",
            f"INSERT INTO {table} AS s SELECT "
            "COALESCE(last.key + (octet_length(last.docs) >= %s AND last.key < b + 4095)::int, b), %s "
            f"FROM unnest(%s::bigint[]) AS b LEFT JOIN LATERAL ({last}) AS last ON TRUE "
            "ON CONFLICT (key) DO UPDATE SET docs = s.docs || EXCLUDED.docs",
            [ROW_IDS * 4, doc_id.to_bytes(4, "little"), ints(buckets)],
        )

    def unpost(self, doc_id: int, fp: Fingerprint, scope_id: int) -> None:
        """A page no longer admitted leaves its spot lists (a list left empty goes)."""
        buckets = sorted({spot_bucket(key) for key in self._posting_keys(fp.spots, scope_id)})
        table, execute = self.engine.t("spot_lists"), self.engine.execute
        found = execute(
            f"SELECT s.key, s.docs FROM unnest(%s::bigint[]) AS b JOIN {table} s "
            "ON s.key BETWEEN b AND b + 4095 ORDER BY s.key FOR UPDATE OF s",
            [ints(buckets)],
        )
        for key, blob in found.fetchall():
            docs = np.frombuffer(bytes(blob), dtype="<u4") if len(blob) % 4 == 0 else None
            if docs is None or doc_id not in docs:
                continue
            kept = docs[docs != doc_id]
            if len(kept):
                execute(f"UPDATE {table} SET docs = %s WHERE key = %s", [kept.tobytes(), key])
            else:
                execute(f"DELETE FROM {table} WHERE key = %s", [key])

    def find(self, probe: Fingerprint, scope_id: int) -> Iterator[tuple[int, Fingerprint]]:
        """Admitted pages of the scope sharing a lookup key or enough spot lists with ``probe``."""
        self.ready()
        t, execute = self.engine.t, self.engine.execute
        keys = lookup_keys(probe, scope_id, self.config, simhash=self.probe_simhash)
        ranges, parts, needs = np.zeros((0, 2), dtype=np.int64), range(0), []
        if self._searched(probe.spots):
            ranges, parts, needs = self.keys.probe(
                self._walk(probe.spots, scope_id)[0], scope_id, self.classes
            )
        # Its candidate keys, before anything is read: what it reads and what it will post.
        posted = lookup_keys(probe, scope_id, self.config, simhash=self.simhash_keys, raw=True)
        spots = (ranges[:, 0] >> 12).tolist()
        spots += [key >> 12 for key in self._posting_keys(probe.spots, scope_id)]
        # Every check holds the index's check lock shared; a page of more keys than a lock table
        # holds for it (a long manual: thousands) holds it alone instead, and so runs alone.
        every, held = lock_key("checks", self.engine.schema), sorted({*keys, *posted, *spots})
        if len(held) > MANY_LOCKS:
            self.engine.lock([every], doc_id=True)
        else:
            self.engine.lock(held, doc_id=True, first=every)
        # The lookup keys' rows and the probed spots' buckets in one read, each joined on the
        # server into one value (a row costs the server and the client more than its bytes), with
        # each bucket row's probed spot (numbered in the probe's order) and size. A bucket read
        # once for each probed spot in it: a page posts it once however many of its spots are
        # there, so a count never falls below the spots shared.
        lookup, args = self.engine.lookup_read(keys)
        buckets, bucket = spot_bucket(ranges[:, 0]).tolist(), bucket_read(t("spot_lists"), "r.low")
        looked_rows, rows_read, ids_read = execute(
            f"SELECT (SELECT string_agg(l.docs, ''::bytea) FROM ({lookup}) AS l), "
            "string_agg(int4send(r.n::integer) || int4send(octet_length(s.docs)) || int8send(s.key), "
            "''::bytea), "
            "string_agg(s.docs, ''::bytea) "
            f"FROM unnest(%s::bigint[]) WITH ORDINALITY AS r(low, n), {bucket} AS s",
            [*args, ints(buckets)],
        ).fetchone()
        looked = set().union(*self.engine.lookup_members([looked_rows or b""], keys))
        rows, joined = np.frombuffer(rows_read or b"", dtype=_ROW_READ), ids_read or b""
        self._tails = (self._walked, _tails(buckets, rows))
        spotted: dict[int, tuple[int, int]] = {}  # a page found by its spots: the partitions it may be in
        if len(ranges) and min(needs) == max(needs):  # most probes: one count for every partition
            spotted = dict.fromkeys(counted([(joined,)], needs[0]), (parts.start, parts.stop - 1))
        elif len(ranges):
            reach = (ranges[:, 1] & 4095).tolist()  # the last partition each probed spot is read in
            lists = [(reach[n - 1], blob) for n, blob in _split(rows, joined)]
            spotted = partition_counted(lists, parts.start, needs)
        if not looked and not spotted:
            return
        # Every signature at once (one round trip), the exact bounds (the first columns) before
        # any is decoded; a page found by its spots alone only with a size the bounds may keep.
        sizes = {span: self._sizes(*span, probe.spots.size) for span in set(spotted.values())}
        sized = {doc: sizes[span] for doc, span in spotted.items() if doc not in looked}
        rows = self._rows(looked, sized, scope_id)
        survivors = {row[0] for row in may_match(probe, [row[:BOUNDS] for row in rows], self.config)}
        yield from sound_fingerprints([row for row in rows if row[0] in survivors], self.engine.path)

    def _sizes(self, low: int, high: int, size: int) -> tuple[int, int]:
        """The spot sizes of partitions ``low`` to ``high`` that the bounds may keep beside a
        probe of ``size`` spots (``bounds.kept_spot_sizes``)."""
        bounds, (least, most) = partition_bounds(self.keys.tau), kept_spot_sizes(size, self.config)
        if low:
            least = max(least, bounds[low])
        if high + 1 < len(bounds):
            most = min(most, bounds[high + 1] - 1)
        return least, most

    def _rows(self, ids: set[int], sized: dict[int, tuple[int, int]], scope: int) -> list[tuple]:
        """Signatures of the admitted pages of ``scope`` among ``ids``, and among ``sized``'s
        ids those with a spot size in their range, in id order."""
        documents, spans = self.engine.t(DOC.table), set(sized.values())
        if len(spans) <= 1:  # one range (most checks): an index scan of the ids
            # Each row found is tested against the looked-up ids alone (a few), not every id
            # asked for: a large page's hundreds of candidates cost milliseconds that way.
            low, high = spans.pop() if spans else (0, 0)
            return self.engine.execute(
                f"SELECT {SIGNATURE_COLUMNS} FROM {documents} WHERE id = ANY(%s::bigint[]) "
                "AND scope = %s AND status = 'unique' "
                "AND (spot_size BETWEEN %s AND %s OR id = ANY(%s::bigint[])) ORDER BY id",
                [ints(sorted({*ids, *sized})), scope, low, high, ints(sorted(ids))],
            ).fetchall()
        wanted = sorted({*ids, *sized})
        each = [sized.get(doc, (-1, -1)) for doc in wanted]  # -1: a page looked up, of any size
        return self.engine.execute(
            f"SELECT {SIGNATURE_COLUMNS} FROM unnest(%s::bigint[], %s::integer[], %s::integer[]) "
            f"AS c(wanted, low, high) JOIN {documents} d ON d.id = c.wanted "
            "WHERE d.scope = %s AND d.status = 'unique' "
            "AND (c.low < 0 OR d.spot_size BETWEEN c.low AND c.high) ORDER BY d.id",
            [ints(wanted), ints(low for low, _ in each), ints(high for _, high in each), scope],
        ).fetchall()


def _tails(buckets: list[int], rows: np.ndarray) -> dict[int, tuple[int, int] | None]:
    """The last row (key, bytes) of each bucket read, None for one that has none."""
    tails: dict[int, tuple[int, int] | None] = dict.fromkeys(buckets)
    for key, size in zip(rows["key"].tolist(), rows["size"].tolist(), strict=True):
        bucket = key >> 12 << 12
        tail = tails.get(bucket)
        if tail is None or key > tail[0]:
            tails[bucket] = (key, size)
    return tails


def _target(bucket: int, tail: tuple[int, int] | None) -> int:
    """The row a posting goes to: the bucket's last, or the next once it holds ROW_IDS ids (the
    last possible row takes what comes after)."""
    if tail is None:
        return bucket
    key, size = tail
    return key + (size >= ROW_IDS * 4 and key < bucket + 4095)


def _split(rows: np.ndarray, joined: bytes) -> list[tuple[int, bytes]]:
    """The (probed spot, ids) of each bucket row read, from the read's rows (``_ROW_READ``) and
    the rows' ids one after the other (a damaged row, not whole ids, is cut in the count)."""
    split, at = [], 0
    for n, size in zip(rows["n"].tolist(), rows["size"].tolist(), strict=True):
        split.append((n, joined[at : at + size]))
        at += size
    return split


def partition_counted(
    rows: list[tuple[int, bytes]], start: int, needs: list[int]
) -> dict[int, tuple[int, int]]:
    """Documents posted in the rows of enough probed spots for some partition, with the lowest
    and highest partition they may then be in.

    ``rows`` are (reach, uint32 ids) of the buckets read: a row counts for a document of
    partitions ``start`` to its probed spot's reach (``pruning.probe_reach``), and partition p
    asks ``needs[p - start]`` shared spots. The lists mix partitions (``packing``); counted by
    partition, a large page's probe asks a large page for the spots its own partition is
    posted for, not for the fewest any partition asks.
    """
    cut = [blob[: len(blob) - len(blob) % 4] for _, blob in rows]  # a damaged row: its whole ids
    ids = np.frombuffer(b"".join(cut), dtype="<u4")
    reach = np.repeat(np.array([r for r, _ in rows], dtype=np.uint64), [len(blob) // 4 for blob in cut])
    # Only the ids that may be posted as often as the fewest any partition asks, in one sort of
    # (id, reach); then only those that are.
    kept = may_be_often(ids, min(needs))
    pairs = np.sort(ids[kept].astype(np.uint64) << np.uint64(12) | reach[kept] & np.uint64(4095))
    ids, reach = pairs >> np.uint64(12), (pairs & np.uint64(4095)).astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    counts = np.diff(np.append(starts, len(ids)))
    often = np.repeat(counts >= min(needs), counts)
    ids, reach = ids[often], reach[often]
    found: dict[int, tuple[int, int]] = {}
    for part, need in enumerate(needs, start):
        kept, step = ids[reach >= part], max(need, 1) - 1
        if len(kept) <= step:
            continue
        for doc in np.unique(kept[step:][kept[step:] == kept[: len(kept) - step]]).tolist():
            found[doc] = (found.get(doc, (part, part))[0], part)
    return found
