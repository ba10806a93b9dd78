"""Signature methods: one pure module each, no I/O, no Scrapy, deterministic across machines."""
