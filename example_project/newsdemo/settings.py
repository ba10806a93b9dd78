"""Settings of the demo project: a polite, breadth-first crawl of a local site with scrapy-neardup on."""

from __future__ import annotations

import os
from pathlib import Path

BOT_NAME = "newsdemo"
SPIDER_MODULES = ["newsdemo.spiders"]
NEWSPIDER_MODULE = "newsdemo.spiders"

# Everything a crawl writes goes to example_project/output/ (ignored by git).
OUTPUT_DIR = Path(__file__).resolve().parent.parent / "output"

# scrapy-neardup: this one line turns on the downloader middleware and the item pipeline.
ADDONS = {"scrapy_neardup.NearDupAddon": 0}
NEARDUP_ACTION = "drop"  # duplicates are dropped before the spider sees them; "tag" keeps and marks them
NEARDUP_INDEX = str(OUTPUT_DIR / "neardup.db")  # the index: every page seen, with its verdict
NEARDUP_REPORT = str(OUTPUT_DIR / "report.html")  # written when the spider closes
NEARDUP_ITEM_FIELD = "html"  # the item field the pipeline checks (see newsdemo.items.PageItem)

# The items; a demo of several crawlers gives each its own file (NEWSDEMO_FEED, a full path):
# a feed given with -O would be written beside this one, not instead of it.
FEEDS = {
    Path(os.environ.get("NEWSDEMO_FEED", OUTPUT_DIR / "items.jsonl")).as_uri(): {
        "format": "jsonlines",
        "encoding": "utf8",
        "overwrite": True,
    },
}
EXTENSIONS = {"newsdemo.extensions.StatsFile": 500}
STATS_FILE = str(OUTPUT_DIR / "stats.json")

# Polite to the server and easy to follow: one request at a time, breadth first, so the
# crawl meets each original article (linked from the front page) before any of its copies.
ROBOTSTXT_OBEY = True
USER_AGENT = "newsdemo (scrapy-neardup example project)"
CONCURRENT_REQUESTS = 8
CONCURRENT_REQUESTS_PER_DOMAIN = 1
DOWNLOAD_DELAY = 0  # the bundled site is served on 127.0.0.1; set a delay for any real site
DEPTH_LIMIT = 5
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"
CLOSESPIDER_PAGECOUNT = 1000  # a safety net: the demo site has fewer than 60 URLs

TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"
