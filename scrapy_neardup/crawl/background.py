"""Work the crawl starts and does not wait for: index writes on a lane, whose failure is logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger("scrapy_neardup")


def spawn(work: Coroutine[Any, Any, Any]) -> None:
    """Run ``work`` beside the crawl on its event loop; with none (a crawl on another reactor,
    a test calling a component), at once: it then awaits nothing that suspends (``Lanes.run``
    calls inline)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        try:
            work.send(None)
        except StopIteration:
            return
        work.close()
        raise RuntimeError("background work suspended without an event loop") from None
    loop.create_task(work).add_done_callback(_said)


def _said(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        logger.error("scrapy-neardup: background work failed", exc_info=(type(exc), exc, exc.__traceback__))
