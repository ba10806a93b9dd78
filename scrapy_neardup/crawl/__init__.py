"""The Scrapy shells: the add-on, the middlewares, the pipeline, the crawl's session and command."""
