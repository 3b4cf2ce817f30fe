"""Figures (printed, not a test): our scores against MTEB's own tasks on the same folders.

For every dataset we can build here (Blurbs S2S and P2P from the real GermEval 2019 dev set,
TenKGnad P2P from the real 10kGNAD test csv, TenKGnad S2S from the embedded OMPC demo sample),
both protocols: our grid (``legacy``, ``fast``) against ``mteb.evaluate`` with MTEB's task classes
(``<Task>``, ``<Task>.v2``) bound to the same folder by ``tecb_eval.mteb_tasks``. Prints the mean
V-measure x100 of each and the largest |difference| over splits / bootstrap samples.

Encoders: ``hash`` (character-trigram hashing: a text's vector does not depend on its batch, so
the two must agree exactly) and, with ``--model minilm-l6``, the real all-MiniLM-L6-v2 (MTEB
encodes in its own batches, we encode each unique text once; CPU float sums differ by ~1e-7 with
batch composition, which k-means may or may not amplify: the figure says how much it did).

    python bench/bench_mteb.py [--model hash|minilm-l6] [--datasets s2s,p2p] [--protocols legacy,fast]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tecb_data  # noqa: E402
from tecb_data.build import build  # noqa: E402
from tecb_data.demo import demo_input  # noqa: E402
from tecb_eval.mteb import encoders as mteb_encoders, tasks as mteb_bridge  # noqa: E402
from tecb_eval.models.encoders import get_encoder  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402

SHARED = REPO.parent / "shared" / "data"


def build_all(out: Path) -> dict[str, Path]:
    build("blurbs", SHARED / "germeval2019" / "blurbs_dev.txt.gz", out / "real")
    build("tenkgnad", SHARED / "10kgnad" / "test.csv", out / "real")
    build("tenkgnad", demo_input("tenkgnad"), out / "demo")
    return {
        "BlurbsClusteringS2S": out / "real" / "blurbs-clustering-s2s",
        "BlurbsClusteringP2P": out / "real" / "blurbs-clustering-p2p",
        "TenKGnadClusteringS2S": out / "demo" / "tenkgnad-clustering-s2s",
        "TenKGnadClusteringP2P": out / "real" / "tenkgnad-clustering-p2p",
    }


def compare(folder: Path, protocol: str, encoder, cache: Path) -> tuple[list[float], list[float], float, float]:
    started = time.perf_counter()
    frame = run_grid([folder], [encoder], configurations=["minibatch_kmeans:none"], protocol=protocol,
                     cache_dir=cache, progress=False, log=lambda m: None)
    ours_s = time.perf_counter() - started
    order = [s.name for s in tecb_data.load(folder).splits] if protocol == "legacy" else sorted(frame.split)
    by_split = dict(zip(frame.split, frame.v_measure))
    ours = [by_split[name] for name in order]
    import mteb

    version = "v2" if protocol == "fast" else "legacy"
    started = time.perf_counter()
    result = mteb.evaluate(mteb_encoders.MtebEncoder(encoder), tasks=mteb_bridge.mteb_tasks([folder], version=version),
                           cache=None, show_progress_bar=False, encode_kwargs={"batch_size": 32})
    mteb_s = time.perf_counter() - started
    scores = result.task_results[0].scores["test"][0]
    theirs = scores["v_measures"]["Level 0"] if version == "v2" else scores["v_measures"]
    return ours, theirs, ours_s, mteb_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["hash", "minilm-l6"], default="hash")
    parser.add_argument("--datasets", default="s2s,p2p", help="views to include (s2s, p2p)")
    parser.add_argument("--protocols", default="legacy,fast")
    args = parser.parse_args()
    logging.getLogger("mteb").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()
    views = [v.strip().upper() for v in args.datasets.split(",")]
    protocols = [p.strip() for p in args.protocols.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folders = build_all(Path(tmp))
        print(f"| dataset (source) | protocol | MTEB task | ours x100 | MTEB x100 | max abs diff | units | ours s | MTEB s |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        worst = 0.0
        for task, folder in folders.items():
            if not any(task.endswith(v) for v in views):
                continue
            for protocol in protocols:
                encoder = mteb_encoders.HashingEncoder() if args.model == "hash" else get_encoder("minilm-l6")
                ours, theirs, ours_s, mteb_s = compare(folder, protocol, encoder, Path(tmp) / f"cache-{args.model}")
                diff = max(abs(a - b) for a, b in zip(ours, theirs))
                worst = max(worst, diff)
                name = task + (".v2" if protocol == "fast" else "")
                source = "demo OMPC" if "demo" in str(folder) else "real"
                print(f"| {folder.name} ({source}) | {protocol} | {name} | {100 * np.mean(ours):.2f} | "
                      f"{100 * np.mean(theirs):.2f} | {diff:.2e} | {len(ours)} | {ours_s:.1f} | {mteb_s:.1f} |", flush=True)
        print(f"\nmodel {args.model}: largest |difference| of a split / bootstrap V-measure: {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
