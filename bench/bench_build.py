"""Figures of the data builds, printed (not a timed test).

    .venv/bin/python bench/bench_build.py

- Blurbs build of the real GermEval 2019 dev set (both views): wall time, target < 5 s.
- What the dev set gives next to MTEB's published statistics of the full sources: average
  characters over all rows (MTEB's legacy figure, the published one) and over unique texts (MTEB's
  v2 figure where the v2 task is the legacy rows de-duplicated).
- How far the two views' independently drawn members differ (same split sizes, other per-label counts).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tecb_data.build import build

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DEV = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"
REFERENCE = SHARED / "reference" / "mteb-descriptive-stats"


def reference(name: str) -> dict:
    stats = json.loads((REFERENCE / f"{name}.json").read_text())["test"]
    text = stats["text_statistics"]
    unique_avg = "n/a"
    v2_path = REFERENCE / f"{name}.v2.json"
    if v2_path.exists():
        v2 = json.loads(v2_path.read_text())["test"]
        # Only where the v2 task keeps every unique legacy text (TenKGnad, Blurbs P2P) is its
        # average the average over unique texts; Blurbs S2S v2 is a 2,048-row subsample.
        if v2["num_samples"] == v2["text_statistics"]["unique_texts"] == text["unique_texts"]:
            unique_avg = round(v2["text_statistics"]["average_text_length"], 1)
    return {
        "samples": stats["num_samples"],
        "unique_texts": text["unique_texts"],
        "unique_labels": stats["label_statistics"]["unique_labels"],
        "avg_chars_all_rows": round(text["average_text_length"], 1),
        "avg_chars_unique_texts": unique_avg,
    }


HEADER = (f"  {'dataset':<24} {'splits':>7} {'samples':>9} {'unique texts':>13} {'labels':>7} "
          f"{'avg chars, all rows':>20} {'avg chars, unique texts':>24}")


def row(name: str, splits: int, stats: dict) -> str:
    return (f"  {name:<24} {splits:>7} {stats['samples']:>9,} {stats['unique_texts']:>13,} {stats['unique_labels']:>7} "
            f"{stats['avg_chars_all_rows']:>20} {stats['avg_chars_unique_texts']:>24}")


def view_difference(manifests: dict, s2s: str, p2p: str) -> str:
    a, b = manifests[s2s]["splits"], manifests[p2p]["splits"]
    same_sizes = [x["size"] for x in a] == [y["size"] for y in b]
    differ = sum(x["labels"] != y["labels"] for x, y in zip(a, b))
    return (f"  S2S vs P2P: split sizes {'equal' if same_sizes else 'DIFFER'}; "
            f"per-label counts differ in {differ} of {len(a)} splits")


def main() -> int:
    if not DEV.exists():
        print(f"skipped: {DEV} is absent (the benchmark needs ../shared beside the repository)")
        return 0
    times = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            built = build("blurbs", DEV, Path(out))
            times.append(time.perf_counter() - start)
            manifests = {folder.name: manifest for folder, manifest in built}
    print(f"Blurbs build of the GermEval 2019 dev set (2,079 books, S2S + P2P, 28 splits each):")
    print(f"  wall time over 5 runs: median {statistics.median(times):.2f} s, best {min(times):.2f} s (target < 5 s)")
    print()
    print("Dev set alone vs MTEB's statistics of the published datasets (full train + dev + test sources):")
    print(HEADER)
    for name, mteb in (("blurbs-clustering-s2s", "BlurbsClusteringS2S"), ("blurbs-clustering-p2p", "BlurbsClusteringP2P")):
        ours = manifests[name]["statistics"]
        print(row(name, ours["splits"], ours))
        print(row("  (published)", 28, reference(mteb)))
    print(view_difference(manifests, "blurbs-clustering-s2s", "blurbs-clustering-p2p"))
    report = manifests["blurbs-clustering-s2s"]["report"]
    print(f"  selection on the dev set: {report['selected']} of {report['books_read']} books kept, "
          f"{report['rejected_several_top_level_genres']} with several top-level genres, "
          f"{report['rejected_more_than_two_second_level_genres']} with more than two second-level genres")
    tenkgnad_csv = SHARED / "data" / "10kgnad" / "test.csv"
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        (folder, manifest), = build("tenkgnad", tenkgnad_csv, Path(out))
        elapsed = time.perf_counter() - start
    ours = manifest["statistics"]
    print()
    print(f"TenKGnad P2P from the 10kGNAD test csv (1,028 articles, no titles so P2P only; {elapsed:.2f} s):")
    print(HEADER)
    print(row("tenkgnad-clustering-p2p", ours["splits"], ours))
    print(row("  (published)", 10, reference("TenKGnadClusteringP2P")))
    print("  (the csv lacks titles, so its P2P texts are shorter than the published title + subheadline + body:")
    print("   compare the unique-text averages; the all-rows one also follows which articles the seed draws often)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
