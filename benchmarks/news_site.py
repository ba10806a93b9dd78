"""A news site for the crawl benchmark, from the real aeb pages, with copies as a news crawl meets them.

    python benchmarks/news_site.py [--out benchmarks/.data/news-site]

Every one of the 181 real article pages is served under ``/news/<id>.html``; a third of them
are also syndicated under another real page's template (the benchmark's variant generator,
light edits only: ``/partner/<id>.html``), a fifth are linked again with tracking parameters
(byte-identical copies), and section pages of 20 teaser links each, listed on the home page,
lead to all of them. ``truth.json`` says which URL copies which.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality_data as qd

OUT = qd.REPO / "benchmarks" / ".data" / "news-site"
SEED = qd.TUNING_SEED
PER_SECTION = 20
LIGHT_EDITS = 0.05


def build(out: Path, seed: int = SEED) -> int:
    """Write the site into ``out``; the number of pages (copies included) a crawl fetches."""
    rng = random.Random(seed)
    data = qd.aeb_set(seed)
    out.mkdir(parents=True, exist_ok=True)
    for folder in ("news", "partner", "section"):
        (out / folder).mkdir(exist_ok=True)
    originals = [i for i, is_variant in enumerate(data.variant) if not is_variant]
    truth: dict[str, str] = {}
    links: list[str] = []
    for i in originals:
        source = data.ids[i].rsplit("/", 1)[-1][:16]  # a short file name: the id is a path and a hash
        (out / "news" / f"{source}.html").write_bytes(data.bodies[i])
        links.append(f"/news/{source}.html")
        light = [
            j for j in range(i + 1, i + 1 + qd.VARIANTS_PER_SOURCE)
            if data.recipes[j].edit_rate <= LIGHT_EDITS and data.recipes[j].template_other
        ]  # fmt: skip
        if light and rng.random() < 1 / 3:
            (out / "partner" / f"{source}.html").write_bytes(data.bodies[light[0]])
            links.append(f"/partner/{source}.html")
            truth[f"/partner/{source}.html"] = f"/news/{source}.html"
        if rng.random() < 1 / 5:
            links.append(f"/news/{source}.html?utm_source=newsletter&utm_medium=email")
            truth[links[-1]] = f"/news/{source}.html"
    rng.shuffle(links)
    sections = [links[k : k + PER_SECTION] for k in range(0, len(links), PER_SECTION)]
    for n, section in enumerate(sections):
        items = "".join(f'<li><a href="{escape(link)}">{escape(link)}</a></li>' for link in section)
        head = f"<head><title>Section {n}</title></head>"
        page = f"<html>{head}<body><h1>Section {n}</h1><ul>{items}</ul></body></html>"
        (out / "section" / f"{n}.html").write_text(page, encoding="utf-8")
    home = "".join(f'<li><a href="/section/{n}.html">Section {n}</a></li>' for n in range(len(sections)))
    (out / "index.html").write_text(
        f"<html><body><h1>News</h1><ul>{home}</ul></body></html>", encoding="utf-8"
    )
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return len(links) + len(sections) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    print(f"{build(args.out)} pages in {args.out}")


if __name__ == "__main__":
    main()
