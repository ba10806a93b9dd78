"""NearDupAddon: one line in ADDONS turns scrapy-neardup on with its defaults."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from .middleware import NearDupDownloaderMiddleware, NearDupSpiderMiddleware
from .pipeline import NearDupPipeline


class NearDupAddon:
    """``ADDONS = {"scrapy_neardup.NearDupAddon": 0}``: the middlewares, the pipeline, and enabling.

    Everything is set at add-on priority, so the project's own settings still win: a
    ``DOWNLOADER_MIDDLEWARES`` entry moves or disables a component, ``NEARDUP_ENABLED =
    False`` turns the whole thing off.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("NEARDUP_ENABLED", True, priority="addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", NearDupDownloaderMiddleware, 570
        )
        settings.setdefault_in_component_priority_dict("SPIDER_MIDDLEWARES", NearDupSpiderMiddleware, 50)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", NearDupPipeline, 200)
