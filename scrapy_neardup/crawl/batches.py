"""Rows the crawl writes to the index many at a time: those met in one turn of its event loop
go in one transaction (one round trip to a server), and each writer awaits its own result."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from .background import spawn

Row = TypeVar("Row")
Out = TypeVar("Out")


class Batch(Generic[Row, Out]):
    """``await batch.add(row)``: written with the rows added beside it by ``write`` (which
    returns one result a row, in order)."""

    def __init__(self, write: Callable[[list[Row]], Awaitable[list[Out]]]) -> None:
        self._write = write
        self._rows: list[tuple[Row, asyncio.Future[Out]]] = []

    async def add(self, row: Row) -> Out:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: written alone, at once
            return (await self._write([row]))[0]
        future: asyncio.Future[Out] = loop.create_future()
        self._rows.append((row, future))
        if len(self._rows) == 1:  # the first of this turn: written once the turn's others are in
            loop.call_soon(lambda: spawn(self._flush()))
        return await future

    async def _flush(self) -> None:
        rows, self._rows = self._rows, []
        try:
            written = await self._write([row for row, _ in rows])
        except Exception as exc:
            for _, future in rows:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), out in zip(rows, written, strict=True):
            if not future.done():
                future.set_result(out)
