"""The calibration of the label-free criteria on real labelled data, as the package ships it.

Builds the GermEval 2019 dev Blurbs S2S and P2P datasets (``tecb-data build --source blurbs``) and
the real 10kGNAD test set (``../shared/data/10kgnad/test.csv`` through the table source, its
article text as the P2P view), runs the grid on them with every label-free criterion
(``--label-free``; models, configurations and a k / min_cluster_size range as given), calibrates
every label-free criterion and the rank-average combinations against AMI and V-measure, leaving one dataset out
(``tecb-eval calibrate``), prints the tables and writes ``tecb_eval/data/calibration.json`` (its
date, the builds' fingerprints, the models, algorithms and splits) with ``--write``.

    python bench/bench_calibration.py --write                       # the full configuration
    python bench/bench_calibration.py --limit-splits 3 --store /tmp/calibration.jsonl --write

``--store`` keeps the grid's results (and reuses them on a second call); without it they go with
a temporary folder. Every split of every dataset takes hours on two cores; ``--limit-splits``
cuts it down, and the file says which splits it was measured on.

``--test-splits A:B`` also prints the leave-one-dataset-out table on the splits at positions A to
B-1 of each dataset only (split order; ``3:10``: the 4th to 10th), and on the others: the rule that
chooses (the criteria comparable across vector spaces and their rank averages,
:func:`tecb_eval.reports.calibration.candidates`) was fixed after looking at the figures of the
first 3 splits, so splits 3 to 9 are the data no one looked at when it was fixed. The cap on the
pick's clusters (the partition the grid agrees on most) was fixed after seeing all 10 splits:
``bench/bench_pick_fresh.py`` tests it on data none of them holds.

    python bench/bench_calibration.py --limit-splits 10 --test-splits 3:10 --store /tmp/calibration.jsonl
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdata import BLURBS_DEV, REPO, SHARED  # noqa: E402

TENKGNAD_TEST = SHARED / "data" / "10kgnad" / "test.csv"
FULL_MODELS = "minilm-l6,tfidf-lsa"
FULL_CONFIGS = "minibatch_kmeans:none,agglomerative:none,minibatch_kmeans:pca,hdbscan:pca"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=FULL_MODELS)
    parser.add_argument("--configs", default=FULL_CONFIGS)
    parser.add_argument("--k", default="4:40:4")
    parser.add_argument("--min-cluster-size", default="5,10,20")
    parser.add_argument("--limit-splits", type=int, default=0, help="first N splits of each dataset (0: all)")
    parser.add_argument("--views", default="s2s,p2p")
    parser.add_argument("--stability", type=int, default=0,
                        help="reruns per cell for the stability criterion (tecb-eval run --stability; 0: none)")
    parser.add_argument("--store", type=Path, help="keep the grid's results here (a second call reuses them)")
    parser.add_argument("--figure", type=Path, help="draw V-measure and AMI over k (docs/unlabelled.md's figure) here")
    parser.add_argument("--write", action="store_true", help="write tecb_eval/data/calibration.json")
    parser.add_argument("--test-splits", default="3:10", metavar="A:B",
                        help="also the leave-one-dataset-out table on split positions A..B-1 of each dataset only, and "
                             "on the others (default 3:10: the splits no one looked at when the candidates were fixed; "
                             "'' none)")
    args = parser.parse_args()
    test_splits = tuple(int(v) for v in args.test_splits.split(":")) if args.test_splits else None

    from tecb_data.build import build, build_table
    from tecb_data.sources.table import TableSettings
    from tecb_eval.reports import calibration

    with tempfile.TemporaryDirectory(prefix="tecb-calibration-") as tmp:
        tmp = Path(tmp)
        views = tuple(args.views.split(","))
        built = [f for f, _ in build("blurbs", BLURBS_DEV, tmp / "data", views=views)]
        news = TableSettings(name="tenkgnad-test", label="label", text_p2p="text", columns="label,text", delimiter=";",
                             quotechar="'", input_format="csv")
        built += [f for f, _ in build_table(TENKGNAD_TEST, tmp / "data", news)]
        results = args.store or tmp / "results.jsonl"
        cache = (args.store.parent / (args.store.name + ".cache")) if args.store else tmp / "cache"
        frame = labelled_grid(built, results, cache, models=args.models, configs=args.configs, k=args.k,
                              min_cluster_size=args.min_cluster_size, limit_splits=args.limit_splits,
                              stability=args.stability)
        if isinstance(frame, int):
            return frame
        started = time.perf_counter()
        cells = calibration.cell_statistics(frame)
        print(f"criteria across partitions and the statistics: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        table = calibration.calibrate(frame, cells=cells)
        v_table = calibration.calibrate(frame, target="v_measure")
        chosen = calibration.choose(cells)
        singles = table[~table.criterion.str.startswith(calibration.COMBINED) | (table.criterion == chosen)]
        print("In-sample, against AMI (single criteria and the one chosen; the file holds every rank average):")
        print(calibration.format_table(singles))
        print("\nIn-sample, against V-measure (single criteria):")
        print(calibration.format_table(v_table[~v_table.criterion.str.startswith(calibration.COMBINED)]))
        print(calibration.NOTE)
        held = calibration.held_out(cells)
        print(f"\nLeave one dataset out on every split ({splits_words(cells)}; chosen on the other two by mean AMI "
              "regret among the criteria comparable across vector spaces and their rank averages; figures on the "
              "one left out):")
        print(calibration.format_held_out(held))
        print(split_by_split(cells, held))
        print(best_k_words(frame))
        free = calibration.cell_statistics(frame, k_cap=calibration.NO_CAP)
        print("\nThe same without the cap on the pick's clusters (--k-cap none; the pick may have more clusters than "
              "the partition the grid agrees on most):")
        print(calibration.format_held_out(calibration.held_out(free)))
        unseen = None
        if test_splits:
            new, seen = at_positions(cells, *test_splits), at_positions(cells, *test_splits, inside=False)
            for part, words in ((new, "the splits no one looked at when the candidates were fixed (the cap was "
                                        "fixed after seeing them)"),
                                (seen, "the splits looked at when the rule was fixed")):
                if part.empty:
                    print(f"\nLeave one dataset out on {words}: none in the store")
                    continue
                print(f"\nLeave one dataset out on {words} ({splits_words(part)}; chosen and measured on those "
                      "only):")
                print(calibration.format_held_out(calibration.held_out(part)))
                print(best_k_words(frame[frame.split.isin(set(part.split))]))
            unseen = new if not new.empty else None
        document = calibration.document(table, frame, cells=cells, v_table=v_table)
        if unseen is not None:
            import json

            document["held_out_unseen"] = {
                "splits": {str(n): sorted(map(str, g.split.unique())) for n, g in unseen.groupby("mteb_name")},
                "note": "chosen and measured on these splits only: the splits no one looked at when the candidates "
                        "(criteria comparable across vector spaces and their rank averages) were fixed; the cap on the "
                        "pick's clusters was fixed after seeing them",
                "rows": json.loads(calibration.held_out(unseen).to_json(orient="records"))}
        spectrum = calibration.spectrum_errors(frame)
        print("\nThe spectrum's number of clusters (median over the cells) against the labels:")
        for row in spectrum.itertuples(index=False):
            print(f"  {row.mteb_name}: about {row.spectral_k:.0f} clusters, {row.labels:.0f} labels, "
                  f"|k - labels| / labels {row.k_error:.2f} (mean over cells)")
        document["configuration"] = {"models": args.models, "configs": args.configs, "k": args.k,
                                     "min_cluster_size": args.min_cluster_size, "limit_splits": args.limit_splits,
                                     "views": args.views, "stability": args.stability,
                                     "subsample": (f"the first {args.limit_splits} splits of each dataset"
                                                   if args.limit_splits else "every split"),
                                     "rule": "candidates: the criteria comparable across vector spaces and the rank "
                                             "averages of every subset of two or more (fixed after seeing the "
                                             "figures of the first 3 splits of each dataset); the pick among the "
                                             "partitions with at most the clusters of the one the grid agrees on "
                                             "most (fixed after seeing all 10 splits; tested on "
                                             "bench/bench_pick_fresh.py's data)"}
        print(f"\nchosen on all three datasets (what recommend ranks by): {calibration.title(document['best'])}")
        if args.figure:
            v_measure_figure(frame, args.figure)
            print(f"wrote {args.figure}", file=sys.stderr)
        if args.write:
            import json

            path = REPO / "tecb_eval" / calibration.PACKAGED
            path.write_text(json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)
    return 0


def labelled_grid(built, results: Path, cache: Path, *, models: str, configs: str, k: str, min_cluster_size: str,
                  limit_splits: int = 0, stability: int = 0):
    """Run the calibration's grid (every label-free criterion) on the dataset folders ``built`` into
    the store ``results``, and return its rows as calibration reads them (every point of the ranges);
    the exit code of `tecb-eval run` where it failed."""
    from tecb_eval.cli import main as eval_main
    from tecb_eval.reports.versions import read_store, select

    argv = ["run", "--results", str(results), "--cache-dir", str(cache), "--quiet", "--label-free", "--k", k,
            "--min-cluster-size", min_cluster_size, "--limit-splits", str(limit_splits), "--stability", str(stability)]
    for folder in built:
        argv += ["--data", str(folder)]
    for model in models.split(","):
        argv += ["--model", model]
    for config in configs.split(","):
        argv += ["--config", config]
    started = time.perf_counter()
    code = eval_main(argv)
    if code:
        return code
    print(f"grid: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    frame, _ = select(read_store(results), points=True, like_with_like=False)
    return frame


def at_positions(cells, start: int, stop: int, inside: bool = True):
    """The rows of ``cells`` whose split is at a position in [start, stop) of its dataset's splits in
    sorted order (or outside it, ``inside=False``)."""
    keep = []
    for dataset, part in cells.groupby("mteb_name", sort=True):
        names = sorted(part.split.unique())
        keep += [(dataset, name) for i, name in enumerate(names) if (start <= i < stop) == inside]
    keep = set(keep)
    return cells[[k in keep for k in zip(cells.mteb_name, cells.split)]]


def splits_words(cells) -> str:
    """The splits of ``cells`` per dataset, in words."""
    found = cells.groupby("mteb_name", sort=True).split.unique()
    return "; ".join(f"{n}: {', '.join(sorted(s))}" for n, s in found.items())


def split_by_split(cells, held) -> str:
    """Per dataset left out: how many of its splits the held-out choice picked within 2x of the labels
    and within 5 AMI points of the best, and its worst regret."""
    out = []
    for row in held.itertuples(index=False):
        mine = cells[(cells.mteb_name == row.held_out) & (cells.criterion == row.chosen)]
        within = int(((mine.k_ratio >= 0.5) & (mine.k_ratio <= 2)).sum())
        out.append(f"{row.held_out} {within} and {int((mine.regret <= 5).sum())} of {len(mine)} "
                   f"(worst {mine.regret.max():.2f})")
    return "split by split, picks within 2x of the labels and within 5 points: " + "; ".join(out)


def best_k_words(frame) -> str:
    """Per dataset: the geometric mean over the cells of the AMI-best pipeline's clusters / labels,
    what the k ratio of a pick with no regret would be."""
    import numpy as np
    import pandas as pd

    from tecb_eval.reports.calibration import CELL, geometric_mean, labelled_rows

    rows = labelled_rows(frame)
    out = []
    for dataset, part in rows.groupby("mteb_name", sort=True):
        ratios = []
        for _, cell in part.groupby(CELL, sort=True):
            ami = pd.to_numeric(cell.ami, errors="coerce").to_numpy(dtype=float)
            if not np.isfinite(ami).any():
                continue
            best = cell.iloc[int(np.nanargmax(ami))]
            ratios.append(float(best.n_clusters_found) / float(best.n_labels))
        out.append(f"{dataset} {geometric_mean(ratios):.2f}")
    return "the AMI-best pipeline's k ratio (clusters / labels, geometric mean over the cells): " + "; ".join(out)


def v_measure_figure(frame, path: Path) -> None:
    """V-measure and AMI (x100) over k for k-means without reduction, one panel per dataset, one
    line per model (means over the splits), the number of labels marked: V-measure climbs with k
    where AMI, corrected for chance, peaks near the labels."""
    import pandas as pd

    from tecb_eval.grid.store import read_setting
    from tecb_eval.reports.figures import new_figure
    from tecb_eval.reports.label_free import with_setting

    rows = with_setting(frame)
    rows = rows[(rows.algorithm == "minibatch_kmeans") & (rows.reduction == "none")].copy()
    rows["k"] = [p[1] if p and p[0] == "k" else None for p in map(read_setting, rows.setting)]
    rows = rows[rows.k.notna()]
    datasets = sorted(rows.mteb_name.unique())
    fig, axes = new_figure(1, len(datasets), figsize=(4.6 * len(datasets), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        mine = rows[rows.mteb_name == dataset]
        for model, line in mine.groupby("model", sort=True):
            means = line.groupby("k")[["v_measure", "ami"]].mean()
            ax.plot(means.index, 100 * means.v_measure, marker="o", markersize=3, label=f"{model} V-measure")
            ax.plot(means.index, 100 * means.ami, marker="s", markersize=3, linestyle="--", label=f"{model} AMI")
        labels = pd.to_numeric(mine.n_labels, errors="coerce").median()
        ax.axvline(labels, color="#555555", linewidth=1)
        ax.set_title(f"{dataset}\n(line: {labels:.0f} labels, median over splits)", fontsize=9)
        ax.set_xlabel("k")
        ax.set_ylabel("x100")
    axes[0][0].legend(fontsize=7)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
