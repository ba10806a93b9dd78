"""Learned URL rules in the in-memory index: each rule's evidence and status, and the requests it skipped."""

from __future__ import annotations

from typing import Any

from ..url_rule import next_status


class MemoryUrls:
    """The URL rules' side of ``MemoryIndex``."""

    def _url_state(self) -> dict[str, Any]:
        state = self.__dict__.setdefault("_urls", {"rules": {}, "skips": [], "skip_rules": []})
        return state

    def url_rules(self) -> list[tuple[str, int, int, str]]:
        return [(rule, *row) for rule, row in self._url_state()["rules"].items()]

    def add_url_evidence(
        self, changes: dict[str, tuple[int, int]], adopt_at: int
    ) -> dict[str, tuple[int, int, str, str]]:
        rules, totals = self._url_state()["rules"], {}
        for rule, (same, differ) in changes.items():
            old_same, old_differ, status = rules.get(rule, (0, 0, "learning"))
            same, differ = old_same + same, old_differ + differ
            new = next_status(status, same, differ, adopt_at)
            rules[rule] = (same, differ, new)
            totals[rule] = (same, differ, status, new)
        return totals

    def set_url_rule(self, rule: str, status: str, at: float | None = None) -> None:
        rules = self._url_state()["rules"]
        same, differ, _ = rules.get(rule, (0, 0, "learning"))
        rules[rule] = (same, differ, status)

    def add_url_skip(self, rules: list[str], url: str, target: str, request: bytes) -> None:
        state = self._url_state()
        state["skips"].append({"url": url, "target": target, "request": request, "revived": False})
        state["skip_rules"] += [(rule, len(state["skips"]) - 1) for rule in rules]

    def url_skips(self, rules: list[str]) -> list[tuple[int, bytes]]:
        state = self._url_state()
        ids = sorted({skip for rule, skip in state["skip_rules"] if rule in rules})
        skips = state["skips"]
        return [(i, skips[i]["request"]) for i in ids if not skips[i]["revived"] and skips[i]["request"]]

    def url_revived(self, ids: list[int]) -> None:
        for i in ids:
            self._url_state()["skips"][i]["revived"] = True

    def url_skip_counts(self) -> dict[str, tuple[int, int]]:
        state, counts = self._url_state(), {}
        for rule, skip in state["skip_rules"]:
            if state["skips"][skip]["request"]:  # tag mode's would-be skips left out
                count, revived = counts.get(rule, (0, 0))
                counts[rule] = (count + 1, revived + state["skips"][skip]["revived"])
        return counts

    def url_skipped(self) -> list[tuple[str, str, bool | None, list[str]]]:
        state = self._url_state()
        rules: dict[int, list[str]] = {}
        for rule, skip in state["skip_rules"]:
            rules.setdefault(skip, []).append(rule)
        return [
            (s["url"], s["target"], bool(s["revived"]) if s["request"] else None, rules.get(i, []))
            for i, s in enumerate(state["skips"])
        ]

    def forget_url_rules(self) -> None:
        self.__dict__.pop("_urls", None)
