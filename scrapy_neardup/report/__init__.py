"""Duplicate reports: clusters read from an index file alone, so any crawl or scan can be reported."""
