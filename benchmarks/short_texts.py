"""Short articles: what a crawl drops of their copies, and of short distinct pages, by the sure bar.

    python benchmarks/short_texts.py [--seed 1]

Built from the 181 real aeb pages (../shared/data/aeb), each in its own page's template (the
quality benchmark's): a brief is an article's first 60 to 180 words. Labelled copies of a
brief: the same words in a bare print template, in an AMP-like template, and in another
article's page with one word in 40 changed (a partner's repost). Labelled distinct pairs,
all short: two briefs of different articles in one page's template (siblings of one site),
a brief and the teaser of another article (its first sentence, in the same template), and
two stubs that open with the same standard sentence and go on with different briefs.
Printed: how many of each kind the detector matches and how many a crawl with the default
settings would drop (sure), let through (weak or under the bar) or keep, with the similarity
and spots of the copies it does not drop.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality_data as qd

from scrapy_neardup.config import DedupConfig
from scrapy_neardup.decision import SURE_SIMILARITY, sure
from scrapy_neardup.fingerprint import fingerprint
from scrapy_neardup.verify import compare

STUB = "This brief was filed by our newsroom and will be updated as the story develops."


def brief(paragraphs: tuple[str, ...], words: int) -> list[str]:
    """The first ``words`` words of an article, in its paragraphs."""
    kept, left = [], words
    for p in paragraphs:
        cut = p.split()[:left]
        if cut:
            kept.append(" ".join(cut))
            left -= len(cut)
    return kept


def bare(title: str, texts: list[str]) -> str:
    body = "".join(f"<p>{escape(t)}</p>" for t in texts)
    return (
        f"<html><head><title>{escape(title)}</title></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )


def amp(title: str, texts: list[str]) -> str:
    body = "".join(f"<p>{escape(t)}</p>" for t in texts)
    return (
        f"<html amp><head><title>{escape(title)}</title></head><body><header>The Daily Site</header>"
        f"<article><h1>{escape(title)}</h1>{body}</article><footer>AMP edition</footer></body></html>"
    )


def edited(texts: list[str], rng: random.Random) -> list[str]:
    out = []
    for t in texts:
        words = t.split()
        for at in range(7, len(words), 40):
            words[at] = rng.choice(("also", "then", "still", "now"))
        out.append(" ".join(words))
    return out


def pairs(seed: int) -> dict[str, list[tuple[str, str]]]:
    """Labelled pairs of pages, by kind."""
    rng = random.Random(seed)
    sources = [s for s in qd.read_aeb() if len(" ".join(s.paragraphs).split()) >= 200]
    templates = qd.build_templates(sources)
    sources = [s for s in sources if s.id in templates]
    kinds: dict[str, list[tuple[str, str]]] = {
        k: [] for k in ("print", "amp", "partner", "siblings", "teaser", "stubs")
    }
    for k, s in enumerate(sources):
        texts = brief(s.paragraphs, rng.randint(60, 180))
        own = qd.render(templates[s.id], s.title, texts)
        kinds["print"].append((own, bare(s.title, texts)))
        kinds["amp"].append((own, amp(s.title, texts)))
        other = sources[(k + 7) % len(sources)]
        kinds["partner"].append((own, qd.render(templates[other.id], s.title, edited(texts, rng))))
        nxt = sources[(k + 1) % len(sources)]
        next_texts = brief(nxt.paragraphs, rng.randint(60, 180))
        kinds["siblings"].append((own, qd.render(templates[s.id], nxt.title, next_texts)))
        teaser = nxt.paragraphs[0].split(". ")[0] + "."
        kinds["teaser"].append((own, qd.render(templates[s.id], nxt.title, [teaser])))
        kinds["stubs"].append(
            (qd.render(templates[s.id], s.title, [STUB, *texts[:1]]),
             qd.render(templates[s.id], nxt.title, [STUB, *next_texts[:1]]))
        )  # fmt: skip
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=qd.TUNING_SEED)
    args = parser.parse_args()
    config = DedupConfig()
    head = ("kind", "pairs", "matched", "dropped", "through", "kept")
    print(f"{head[0]:9} " + " ".join(f"{h:>7}" for h in head[1:]) + "  copies let through")
    for kind, labelled in pairs(args.seed).items():
        counts = {"matched": 0, "dropped": 0, "through": 0, "kept": 0}
        through = []
        for a, b in labelled:
            fa, fb = fingerprint(a, config), fingerprint(b, config)
            if not (fa.judged and fb.judged):
                counts["kept"] += 1
                continue
            result = compare(fb, fa, config)  # b met after a (the article, its own page, first)
            if not result.duplicate:
                counts["kept"] += 1
                continue
            counts["matched"] += 1
            if sure(result.method, result.similarity, result.weak, SURE_SIMILARITY):
                counts["dropped"] += 1
            else:
                counts["through"] += 1
                through.append((result.similarity or 0.0, min(fa.spots.size, fb.spots.size), fa.token_count))
        shown = ""
        if through:
            sims, spots, words = zip(*through, strict=True)
            shown = (
                f"similarity median {statistics.median(sims):.2f}, "
                f"spots median {statistics.median(spots):.0f}, words median {statistics.median(words):.0f}"
            )
        figures = (len(labelled), counts["matched"], counts["dropped"], counts["through"], counts["kept"])
        print(f"{kind:9} " + " ".join(f"{n:>7}" for n in figures) + f"  {shown}")


if __name__ == "__main__":
    main()
