"""Saved pages: readers of folders, JSON-lines feeds and WARC files, and the scan over them."""
