"""The scrapy-neardup example project: crawl a small news site and keep each article once."""
