"""Encoding backends and precisions for minilm-l6 on the GermEval 2019 dev set's Blurbs texts.

For each variant (torch float32, the baseline; torch bfloat16; sentence-transformers' ONNX Runtime
and OpenVINO backends, where they can be imported here; the ONNX export quantized to int8) and each view (S2S titles, P2P blurbs):
texts per second over the view's unique texts (best of ``--repeats`` passes, model loaded once),
the largest cosine distance between the variant's vectors and the baseline's, and the V-measure
(k-means on the embeddings, seed 42, the grid's own cells) on the 28 splits against the baseline's:
mean difference and the largest per split. A backend that cannot be imported is one line saying why.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_backend.py [--repeats 2] [--variants 'torch float32,onnx'] [--views s2s,p2p] [--sample N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tecb_data.build import build  # noqa: E402
from tecb_data.errors import UserError  # noqa: E402
from tecb_data.load import load  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.models.encoders import get_encoder  # noqa: E402

SHARED = REPO.parent / "shared"
VARIANTS = {
    "torch float32": {},
    "onnx": {"backend": "onnx"},
    "onnx int8": {"backend": "onnx", "dtype": "int8"},
    "openvino": {"backend": "openvino"},
    "torch bfloat16": {"dtype": "bfloat16"},
}


class Precomputed:
    """Vectors already computed, served to the grid by text."""

    def __init__(self, texts, vectors):
        self.index = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors.astype(np.float32)

    def encode(self, texts):
        return self.vectors[[self.index[t] for t in texts]]


def texts_per_second(encoder, texts, repeats):
    best = None
    for _ in range(repeats):
        started = time.perf_counter()
        vectors = encoder.encode(texts)
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return len(texts) / best, np.asarray(vectors, dtype=np.float64)


def cosine_distance(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.max(1.0 - np.sum(a * b, axis=1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sample", type=int,
                        help="time and compare a seeded sample of N unique texts per view instead of all; the "
                             "V-measure columns need every text and are left out (a loaded machine: P2P at ~1 text/s)")
    parser.add_argument("--views", default="s2s,p2p", help="comma-separated (default s2s,p2p)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, the baseline first (default: {','.join(VARIANTS)})")
    args = parser.parse_args()
    source = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"
    if not source.exists():
        print(f"{source} is absent: this bench needs ../shared/data", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        build("blurbs", source, Path(tmp) / "data")
        views = [v.strip() for v in args.views.split(",")]
        folders = {view: Path(tmp) / "data" / f"blurbs-clustering-{view}" for view in views}
        texts = {view: sorted({t for s in load(f).splits for t in s.texts}) for view, f in folders.items()}
        if args.sample:
            rng = np.random.default_rng(42)
            texts = {view: sorted(rng.choice(t, size=min(args.sample, len(t)), replace=False).tolist())
                     for view, t in texts.items()}
        baseline_vectors, baseline_scores = {}, {}
        print("| variant | view | texts | texts/s | speed-up | max cosine distance | V-measure x100 (mean) | "
              "mean dV | max |dV| per split |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        baseline_speed = {}
        chosen = [v.strip() for v in args.variants.split(",")]
        if chosen[0] != "torch float32" or any(v not in VARIANTS for v in chosen):
            parser.error(f"--variants: names from {', '.join(VARIANTS)}, 'torch float32' first")
        for variant in chosen:
            options = VARIANTS[variant]
            try:
                started = time.perf_counter()
                encoder = get_encoder("minilm-l6", device="cpu", **options)
            except UserError as exc:
                print(f"| {variant} | - | - | - | - | - | - | - | not run: {exc} |", flush=True)
                continue
            print(f"{variant}: loaded (and exported) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            for view, folder in folders.items():
                speed, vectors = texts_per_second(encoder, texts[view], args.repeats)
                if not options:
                    baseline_vectors[view], baseline_speed[view] = vectors, speed
                line = (f"| {variant} | {view} | {len(texts[view]):,} | {speed:.1f} | {speed / baseline_speed[view]:.2f}x | "
                        f"{cosine_distance(vectors, baseline_vectors[view]):.2e} |")
                if args.sample:
                    print(line + " n/a (sample) | | |", flush=True)
                    continue
                # The grid's own cells on exactly the vectors timed above.
                frame = run_grid([folder], [(variant, Precomputed(texts[view], vectors))],
                                 configurations=["minibatch_kmeans:none"], progress=False, log=lambda m: None, jobs=1)
                scores = dict(zip(frame.split, frame.v_measure))
                if not options:
                    baseline_scores[view] = scores
                base = baseline_scores[view]
                deltas = [scores[k] - base[k] for k in sorted(base)]
                print(line + f" {100 * np.mean(list(scores.values())):.2f} | {100 * np.mean(deltas):+.3f} | "
                      f"{100 * np.max(np.abs(deltas)):.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
