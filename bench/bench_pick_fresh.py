"""The label-free pick on labelled German data the calibration never saw.

The packaged calibration (``tecb_eval/data/calibration.json``) chose its criterion, and the rule
that caps the pick's number of clusters at the grid's consensus partition, on the coarse splits of
the GermEval 2019 dev Blurbs (S2S and P2P) and the samples of the 10kGNAD test set. This bench
builds data none of those splits holds as such, runs the same grid on it with every label-free
criterion, and prints, per dataset, what the shipped choice loses against the best pipeline in AMI
and how many clusters it picks against the labels, with and without the cap:

- each top-level Blurbs genre with at least ``--min-texts`` books, clustered by its second-level
  genres (the recipe's ``within-<genre>`` splits, 6 to 19 labels: other label counts than the
  calibration's 7 to 9), titles (S2S) and title + blurb (P2P), one dataset each;
- the 1,028 10kGNAD test articles cut to their first 500 characters, one split of every text (a
  user's corpus of short news, clustered whole);
- with ``--fine-splits N``, the Blurbs books by their second-level genre (67 to 83 labels: a corpus
  of many topics), N seeded samples of 10 to 100 % of them, on a k range to 200 (``--fine-k``).

    python bench/bench_pick_fresh.py --store /tmp/fresh.jsonl
    python bench/bench_pick_fresh.py --store /tmp/fresh.jsonl --fine-splits 3

``--store`` keeps the grid's results (a second call reuses them); the grid is the calibration's
(``bench/bench_calibration.py``'s defaults).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdata import BLURBS_DEV, SHARED  # noqa: E402
from bench_calibration import FULL_CONFIGS, FULL_MODELS, labelled_grid  # noqa: E402

TENKGNAD_TEST = SHARED / "data" / "10kgnad" / "test.csv"
NEWS_CHARS = 500


def blurbs_books() -> list:
    """The GermEval 2019 dev books as the Blurbs recipe selects them."""
    from tecb_data.sources import blurbs

    return blurbs.select(blurbs.read_books(BLURBS_DEV)[0])[0]


def blurbs_tables(items: list, folder: Path, min_texts: int) -> list[tuple[Path, str]]:
    """One CSV per top-level genre with at least ``min_texts`` of the books ``items`` that have a
    second-level genre (title, title + blurb, that genre); with its dataset name."""
    by_top: dict[str, list] = {}
    for item in items:
        if item.labels["fine"] is not None:
            by_top.setdefault(item.labels["top"], []).append(item)
    out = []
    for top in sorted(by_top):
        books = by_top[top]
        if len(books) < min_texts or len({b.labels["fine"] for b in books}) < 3:
            continue
        ascii_name = top.lower().translate(str.maketrans("äöüß", "aous"))
        name = "blurbs-within-" + re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")
        path = folder / f"{name}.csv"
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["title", "blurb", "genre"])
            writer.writerows((b.views["s2s"], b.views["p2p"], b.labels["fine"]) for b in books)
        out.append((path, name))
    return out


def fine_table(items: list, folder: Path) -> Path:
    """Every book of ``items`` with a second-level genre (title, title + blurb, that genre): the fine
    level, 67 to 83 labels per split, as a table of its own."""
    path = folder / "blurbs-fine.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["title", "blurb", "genre"])
        writer.writerows((b.views["s2s"], b.views["p2p"], b.labels["fine"]) for b in items if b.labels["fine"])
    return path


def news_table(folder: Path) -> Path:
    """The 10kGNAD test articles, each cut to its first ``NEWS_CHARS`` characters, with their category."""
    path = folder / "tenkgnad-first500.csv"
    with TENKGNAD_TEST.open(encoding="utf-8", newline="") as source, path.open("w", encoding="utf-8",
                                                                                 newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "category"])
        for label, text in csv.reader(source, delimiter=";", quotechar="'"):
            writer.writerow([text[:NEWS_CHARS], label])
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="keep the grid's results here (a second call reuses them)")
    parser.add_argument("--cache-dir", type=Path, help="the embedding cache (default: beside the store)")
    parser.add_argument("--min-texts", type=int, default=60, help="the smallest genre kept (books)")
    parser.add_argument("--k", default="4:40:4")
    parser.add_argument("--min-cluster-size", default="5,10,20")
    parser.add_argument("--fine-splits", type=int, default=0,
                        help="also the Blurbs' second-level genres (67 to 83 labels): this many seeded samples of "
                             "10 to 100 %% of the books, as the recipe's fine splits (default 0: none)")
    parser.add_argument("--fine-k", default="20:200:20", help="their k range (default 20:200:20)")
    args = parser.parse_args()

    from tecb_data.build import build_table
    from tecb_data.sources.table import TableSettings
    from tecb_eval.reports import calibration

    with tempfile.TemporaryDirectory(prefix="tecb-fresh-") as tmp:
        tmp = Path(tmp)
        built, books = [], blurbs_books()
        for path, name in blurbs_tables(books, tmp, args.min_texts):
            settings = TableSettings(name=name, label="genre", text="title", text_p2p="title,blurb", splits=1,
                                     min_fraction=1.0, max_fraction=1.0)
            built += [f for f, _ in build_table(path, tmp / "data", settings)]
        news = TableSettings(name="tenkgnad-first500", label="category", text="text", splits=1, min_fraction=1.0,
                             max_fraction=1.0)
        built += [f for f, _ in build_table(news_table(tmp), tmp / "data", news)]
        results = args.store or tmp / "results.jsonl"
        cache = args.cache_dir or ((args.store.parent / (args.store.name + ".cache")) if args.store else tmp / "cache")
        frame = labelled_grid(built, results, cache, models=FULL_MODELS, configs=FULL_CONFIGS, k=args.k,
                              min_cluster_size=args.min_cluster_size)
        if isinstance(frame, int):
            return frame
        if args.fine_splits:
            fine = TableSettings(name="blurbs-fine", label="genre", text="title", text_p2p="title,blurb",
                                 splits=args.fine_splits)
            folders = [f for f, _ in build_table(fine_table(books, tmp), tmp / "data", fine)]
            frame = labelled_grid(folders, results, cache, models=FULL_MODELS, configs=FULL_CONFIGS, k=args.fine_k,
                                  min_cluster_size=args.min_cluster_size)
            if isinstance(frame, int):
                return frame
        shipped = calibration.read_calibration()
        chosen, cap = shipped["best"], shipped.get("k_cap", calibration.NO_CAP)
        capped = calibration.cell_statistics(frame, k_cap=cap)
        uncapped = calibration.cell_statistics(frame, k_cap=calibration.NO_CAP)
        print(f"The shipped choice ({calibration.title(chosen)}; clusters capped at the consensus partition's: "
              f"{cap}) on data the calibration never saw (AMI x100 regret against the best pipeline "
              "of the grid; k ratio: the pick's clusters / the labels):\n")
        print(fresh_table(frame, capped, uncapped, chosen))
    return 0


def fresh_table(frame, capped, uncapped, chosen: str) -> str:
    """Per dataset: labels, texts, the pick's regret and k ratio with and without the cap, the
    AMI-best pipeline's k ratio; then the means (geometric for ratios)."""
    import numpy as np
    import pandas as pd

    from tecb_eval.reports.calibration import CELL, geometric_mean, labelled_rows

    rows = labelled_rows(frame)
    lines = ["| dataset | texts | labels | regret (cap) | k ratio (cap) | regret (no cap) | k ratio (no cap) | "
             "AMI-best's k ratio |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    sums = {"rc": [], "kc": [], "ru": [], "ku": [], "kb": []}
    for (dataset, split, seed), cell in rows.groupby(CELL, sort=True):
        ami = pd.to_numeric(cell.ami, errors="coerce").to_numpy(dtype=float)
        best = cell.iloc[int(np.nanargmax(ami))]
        mine_c = capped[(capped.mteb_name == dataset) & (capped.split == split) & (capped.criterion == chosen)]
        mine_u = uncapped[(uncapped.mteb_name == dataset) & (uncapped.split == split)
                          & (uncapped.criterion == chosen)]
        if mine_c.empty or mine_u.empty:
            continue
        values = {"rc": float(mine_c.regret.iloc[0]), "kc": float(mine_c.k_ratio.iloc[0]),
                  "ru": float(mine_u.regret.iloc[0]), "ku": float(mine_u.k_ratio.iloc[0]),
                  "kb": float(best.n_clusters_found) / float(best.n_labels)}
        for key, value in values.items():
            sums[key].append(value)
        name = dataset if rows[rows.mteb_name == dataset].split.nunique() == 1 else f"{dataset} {split}"
        lines.append(f"| {name} | {int(best.n_samples)} | {int(best.n_labels)} | {values['rc']:.2f} | "
                     f"{values['kc']:.2f} | {values['ru']:.2f} | {values['ku']:.2f} | {values['kb']:.2f} |")
    within = sum(0.5 <= k <= 2 for k in sums["kc"])
    lines.append(f"| mean of {len(sums['rc'])} | | | {np.mean(sums['rc']):.2f} | {geometric_mean(sums['kc']):.2f} | "
                 f"{np.mean(sums['ru']):.2f} | {geometric_mean(sums['ku']):.2f} | {geometric_mean(sums['kb']):.2f} |")
    lines.append(f"\nwith the cap: {within} of {len(sums['kc'])} picks within 2x of the labels; regret <= 5 on "
                 f"{sum(r <= 5 for r in sums['rc'])} of {len(sums['rc'])}; without it: "
                 f"{sum(0.5 <= k <= 2 for k in sums['ku'])} and {sum(r <= 5 for r in sums['ru'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
