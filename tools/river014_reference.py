"""Write the labels real river 0.14.0's DBSTREAM gives on small fixed 2-D sets: the referee for
``DBSTREAMClusterer(cleanup="river-0.14")`` (tests/test_dbstream.py).

river 0.14.0 needs its own interpreter: it has wheels for CPython 3.8-3.10 only, and its source
build needs crates.io. With pyenv's 3.10::

    python3.10 -m venv /tmp/river014
    /tmp/river014/bin/pip install river==0.14.0 "numpy<1.24" "pandas<2" "scipy<1.11"
    /tmp/river014/bin/python tools/river014_reference.py tests/data/dbstream_river014.json

The protocol is our adapter's (and the paper's scripts'): every row through ``learn_one`` in
order, then ``predict_one`` for every row, with river's defaults. Rows are dicts of position ->
Python float. The data are written next to the labels, so the test does not depend on this
numpy regenerating them bit for bit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

SEED = 14


def blobs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Four Gaussian blobs, a little wider than DBSTREAM's radius of 1, two of them touching."""
    centres = np.array([[0.0, 0.0], [4.0, 0.5], [1.5, 4.0], [5.5, 4.5]])
    sizes = (90, 70, 80, 60)
    X = np.concatenate([rng.normal(c, 0.7, size=(n, 2)) for c, n in zip(centres, sizes)])
    y = np.repeat(np.arange(len(sizes)), sizes)
    return X, y


def umap_like(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """What UMAP makes of topic embeddings: dense clumps and bands of uneven density, a crescent,
    a sprinkling of strays, float32 coordinates between about -2 and 14."""
    parts, labels = [], []
    # a tight clump, a loose clump
    parts += [rng.normal([2.0, 10.0], 0.35, size=(80, 2)), rng.normal([10.0, 11.0], 0.9, size=(60, 2))]
    # an elongated band
    t = rng.uniform(0, 1, 70)
    parts.append(np.c_[3.0 + 7.0 * t, 2.0 + 1.5 * t] + rng.normal(0, 0.3, size=(70, 2)))
    # a crescent
    angle = rng.uniform(0.2 * np.pi, 1.2 * np.pi, 70)
    parts.append(np.c_[11.0 + 2.5 * np.cos(angle), 4.0 + 2.5 * np.sin(angle)] + rng.normal(0, 0.25, size=(70, 2)))
    # strays, labelled by the nearest of the four parts' centres
    strays = rng.uniform([-2.0, 0.0], [14.0, 14.0], size=(20, 2))
    centres = np.array([[2.0, 10.0], [10.0, 11.0], [6.5, 2.75], [11.0, 5.5]])
    labels = [np.full(80, 0), np.full(60, 1), np.full(70, 2), np.full(70, 3),
              np.argmin(((strays[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)]
    parts.append(strays)
    X = np.concatenate(parts).astype(np.float32).astype(np.float64)
    return X, np.concatenate(labels)


DATASETS = {"blobs": blobs, "umap_like": umap_like}


def dbstream_labels(X: np.ndarray) -> list[int]:
    from river.cluster import DBSTREAM

    model = DBSTREAM()
    rows = [dict(enumerate(row.tolist())) for row in np.asarray(X, dtype=float)]
    for row in rows:
        model.learn_one(row)
    return [int(model.predict_one(row)) for row in rows]


def main(argv: list[str]) -> int:
    import river

    if len(argv) != 1:
        print("usage: river014_reference.py OUTPUT.json", file=sys.stderr)
        return 2
    if river.__version__ != "0.14.0":
        print(f"this needs river 0.14.0, found {river.__version__}; see this script's docstring", file=sys.stderr)
        return 1
    out = Path(argv[0])
    # One stream per data set, from one seed, so adding a set leaves the others as they are.
    streams = np.random.SeedSequence(SEED).spawn(len(DATASETS))
    document = {
        "about": "labels of river 0.14.0's DBSTREAM (defaults; learn_one on every row in order, then "
                 "predict_one on every row); written by tools/river014_reference.py",
        "river": river.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "datasets": {},
    }
    for (name, make), stream in zip(DATASETS.items(), streams):
        rng = np.random.default_rng(stream)
        X, y = make(rng)
        order = rng.permutation(len(X))  # a stream interleaves the groups
        X, y = X[order], y[order]
        document["datasets"][name] = {"X": X.tolist(), "y": y.tolist(), "labels": dbstream_labels(X)}
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    temporary.replace(out)
    print(f"wrote {out}: " + ", ".join(f"{k} ({len(v['X'])} rows, {len(set(v['labels']))} clusters)"
                                       for k, v in document["datasets"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
