"""Figures of the data builds, printed (not a timed test).

    .venv/bin/python bench/bench_build.py

- Blurbs build of the real GermEval 2019 dev set (both views): wall time, target < 5 s.
- What the dev set gives next to MTEB's published statistics of the full sources.
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
    return {
        "samples": stats["num_samples"],
        "unique_texts": stats["text_statistics"]["unique_texts"],
        "unique_labels": stats["label_statistics"]["unique_labels"],
        "avg_chars": round(stats["text_statistics"]["average_text_length"], 1),
    }


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
    print(f"  {'dataset':<24} {'splits':>7} {'samples':>9} {'unique texts':>13} {'labels':>7} {'avg chars':>10}")
    for name, mteb in (("blurbs-clustering-s2s", "BlurbsClusteringS2S"), ("blurbs-clustering-p2p", "BlurbsClusteringP2P")):
        ours, ref = manifests[name]["statistics"], reference(mteb)
        print(f"  {name:<24} {ours['splits']:>7} {ours['samples']:>9,} {ours['unique_texts']:>13,} {ours['unique_labels']:>7} {ours['avg_chars']:>10}")
        print(f"  {'  (published)':<24} {28:>7} {ref['samples']:>9,} {ref['unique_texts']:>13,} {ref['unique_labels']:>7} {ref['avg_chars']:>10}")
    report = manifests["blurbs-clustering-s2s"]["report"]
    print(f"  selection on the dev set: {report['selected']} of {report['books_read']} books kept, "
          f"{report['rejected_several_top_level_genres']} with several top-level genres, "
          f"{report['rejected_more_than_two_second_level_genres']} with more than two second-level genres")
    tenkgnad_csv = SHARED / "data" / "10kgnad" / "test.csv"
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        (folder, manifest), = build("tenkgnad", tenkgnad_csv, Path(out))
        elapsed = time.perf_counter() - start
    ours, ref = manifest["statistics"], reference("TenKGnadClusteringP2P")
    print()
    print(f"TenKGnad P2P from the 10kGNAD test csv (1,028 articles, no titles so P2P only; {elapsed:.2f} s):")
    print(f"  {'tenkgnad-clustering-p2p':<24} {ours['splits']:>7} {ours['samples']:>9,} {ours['unique_texts']:>13,} {ours['unique_labels']:>7} {ours['avg_chars']:>10}")
    print(f"  {'  (published)':<24} {10:>7} {ref['samples']:>9,} {ref['unique_texts']:>13,} {ref['unique_labels']:>7} {ref['avg_chars']:>10}")
    print("  (the csv lacks titles, so its P2P texts are shorter than the published title + subheadline + body)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
