"""Learned URL rules in a Redis index, shared by every crawler of the index: each rule's evidence
(counted atomically) and status, and the requests it skipped."""

from __future__ import annotations

from typing import Any

from .connection import unlink_keys
from .replies import reply_ids, reply_text

# The index's keys of the URL rules (removed with it): whole keys, and kinds of keys (``kind:...``).
URL_KEYS = ("url_same", "url_differ", "url_status", "url_skip_next", "url_skip_ids")
URL_KINDS = ("url_skip", "url_skip_rule")
# url_rule.next_status, applied where the counts change: KEYS the same, differ and status hashes;
# ARGV adopt_at, then rule, same, differ for each rule. Returns {same, differ, old, new} each.
EVIDENCE = """
local adopt_at, out = tonumber(ARGV[1]), {}
for i = 2, #ARGV, 3 do
  local rule = ARGV[i]
  local same = redis.call('HINCRBY', KEYS[1], rule, ARGV[i + 1])
  local differ = redis.call('HINCRBY', KEYS[2], rule, ARGV[i + 2])
  local old = redis.call('HGET', KEYS[3], rule) or 'learning'
  local new = old
  if differ > 0 and old == 'adopted' then new = 'revoked'
  elseif differ > 0 and old == 'learning' then new = 'refused'
  elseif differ == 0 and old == 'learning' and same >= adopt_at then new = 'adopted' end
  if new ~= old then redis.call('HSET', KEYS[3], rule, new) end
  out[#out + 1] = {same, differ, old, new}
end
return out
"""


class RedisUrls:
    """The URL rules' side of ``RedisIndex`` (``r``, ``k``)."""

    r: Any

    def k(self, *parts: object) -> bytes:
        raise NotImplementedError

    def url_rules(self) -> list[tuple[bytes, bytes, bytes, bytes]]:
        """Every rule as stored, unchecked (``url_rule.read_rule`` reads it)."""
        same, differ = self.r.hgetall(self.k("url_same")), self.r.hgetall(self.k("url_differ"))
        status = self.r.hgetall(self.k("url_status"))
        return [
            (rule, same.get(rule, b"0"), differ.get(rule, b"0"), status.get(rule) or b"learning")
            for rule in same.keys() | differ.keys() | status.keys()
        ]

    def add_url_evidence(
        self, changes: dict[str, tuple[int, int]], adopt_at: int
    ) -> dict[str, tuple[int, int, str, str]]:
        """``next_status`` in a Lua script: the counts and the status change at once for every
        crawler of the index."""
        if self.__dict__.get("_evidence_script") is None:
            self._evidence_script = self.r.register_script(EVIDENCE)
        rules = list(changes)
        args: list[Any] = [adopt_at]
        for rule in rules:
            args += [rule, changes[rule][0], changes[rule][1]]
        keys = [self.k("url_same"), self.k("url_differ"), self.k("url_status")]
        replies = self._evidence_script(keys=keys, args=args)
        return {
            rule: (int(same), int(differ), reply_text(old), reply_text(new))
            for rule, (same, differ, old, new) in zip(rules, replies, strict=True)
        }

    def set_url_rule(self, rule: str, status: str, at: float | None = None) -> None:
        self.r.hset(self.k("url_status"), rule, status)

    def add_url_skip(self, rules: list[str], url: str, target: str, request: bytes) -> None:
        skip = int(self.r.incr(self.k("url_skip_next")))
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(
            self.k("url_skip", skip), mapping={"url": url, "target": target, "request": request, "revived": 0}
        )
        pipe.sadd(self.k("url_skip_ids"), skip)
        for rule in rules:
            pipe.sadd(self.k("url_skip_rule", rule), skip)
        pipe.execute()

    def url_skips(self, rules: list[str]) -> list[tuple[int, bytes]]:
        ids = sorted({i for rule in rules for i in reply_ids(self.r.smembers(self.k("url_skip_rule", rule)))})
        pipe = self.r.pipeline(transaction=False)
        for skip in ids:
            pipe.hmget(self.k("url_skip", skip), "request", "revived")
        found = pipe.execute() if ids else []
        return [
            (skip, request)
            for skip, (request, revived) in zip(ids, found, strict=True)
            if request and revived != b"1"
        ]

    def url_revived(self, ids: list[int]) -> None:
        pipe = self.r.pipeline(transaction=False)
        for skip in ids:
            pipe.hset(self.k("url_skip", skip), "revived", 1)
        pipe.execute()

    def url_skip_counts(self) -> dict[str, tuple[int, int]]:
        counts = {}
        for stored, *_ in self.url_rules():
            rule = stored.decode("utf-8", "replace")
            ids = reply_ids(self.r.smembers(self.k("url_skip_rule", rule)))
            pipe = self.r.pipeline(transaction=False)
            for skip in ids:
                pipe.hstrlen(self.k("url_skip", skip), "request")
                pipe.hget(self.k("url_skip", skip), "revived")
            replies = pipe.execute(raise_on_error=False) if ids else []
            pairs = zip(replies[::2], replies[1::2], strict=True)
            kept = [revived for size, revived in pairs if isinstance(size, int) and size]
            if kept:  # tag mode's would-be skips (no request kept) left out
                counts[rule] = (len(kept), sum(revived == b"1" for revived in kept))
        return counts

    def url_skipped(self) -> list[tuple[str, str, bool | None, list[str]]]:
        rules: dict[int, list[str]] = {}
        for stored, *_ in self.url_rules():
            rule = stored.decode("utf-8", "replace")
            for skip in reply_ids(self.r.smembers(self.k("url_skip_rule", rule))):
                rules.setdefault(skip, []).append(rule)
        ids = sorted(reply_ids(self.r.smembers(self.k("url_skip_ids"))))
        pipe = self.r.pipeline(transaction=False)
        for skip in ids:
            pipe.hmget(self.k("url_skip", skip), "url", "target", "revived")
            pipe.hstrlen(self.k("url_skip", skip), "request")
        replies = pipe.execute(raise_on_error=False) if ids else []
        return [
            (
                reply_text(row[0]) or "",
                reply_text(row[1]) or "",
                row[2] == b"1" if size else None,
                rules.get(skip, []),
            )
            for skip, row, size in zip(ids, replies[::2], replies[1::2], strict=True)
            if isinstance(row, list) and row[0] and isinstance(size, int)
        ]

    def forget_url_rules(self) -> None:
        unlink_keys(self.r, [self.k(name) for name in URL_KEYS], [self.k(kind) for kind in URL_KINDS])
