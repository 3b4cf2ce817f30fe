"""Degenerate inputs give the same bits in every run and in every process.

The input: a 256-d signed hashing bag of words (many exact duplicates and near-duplicates) of the
GermEval dev set's titles, four copies of every book as ``bench/bench_scale.py`` replicates them,
here only the books of two top-level genres so that the first two splits are small (the encoder and
the replica: tests/degenerate_inputs.py). UMAP's spectral start breaks such a graph into many small
components, some of them cliques of copies on which ARPACK asks for a restart vector; unless a
generator of ours gives it, scipy draws it from the operating system's entropy, and each run,
process or worker gets other bits for the ``umap`` and ``pca50+umap`` cells. Serial, local workers
and Dask on such inputs: tests/test_parallel.py.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tecb_data
from helpers import shared_file
from degenerate_inputs import HashingEncoder, replicate_books, unit_bits
from tecb_data.build import build
from tecb_eval.clustering import algorithms as algo

GENRES = ("Ganzheitliches Bewusstsein", "Glaube & Ethik")


@pytest.fixture(scope="module")
def degenerate(tmp_path_factory):
    text = gzip.open(shared_file("germeval2019/blurbs_dev.txt.gz"), "rt", encoding="utf-8").read()
    out = tmp_path_factory.mktemp("degenerate")
    source = out / "blurbs_dev_x4.txt"
    source.write_text(replicate_books(text, 4, lambda book: any(f'<topic d="0">{g}</topic>' in book for g in GENRES)),
                      encoding="utf-8")
    return build("blurbs", source, out / "data", views=("s2s",))[0][0]


@pytest.fixture(scope="module")
def in_process(degenerate):
    return unit_bits(degenerate)


@pytest.mark.slow
def test_the_same_unit_twice_in_one_process_gives_the_same_bits(degenerate, in_process):
    split = tecb_data.load(degenerate).splits[1]
    X = HashingEncoder().encode(split.texts)
    assert len(np.unique(X, axis=0)) < len(X) / 3  # the premise: four copies of every title, and collisions
    assert unit_bits(degenerate) == in_process


@pytest.mark.slow
def test_another_process_with_another_hash_seed_gives_the_same_bits(degenerate, in_process):
    # This process's hash seed is random unless PYTHONHASHSEED fixes it; the child's differs either way.
    ours = os.environ.get("PYTHONHASHSEED", "random")
    theirs = "2" if ours == "1" else "1"
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from degenerate_inputs import unit_bits; print(json.dumps(unit_bits(sys.argv[2])))")
    child = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(degenerate)],
                           capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": theirs})
    assert child.returncode == 0, child.stderr[-2000:]
    assert json.loads(child.stdout.strip().splitlines()[-1]) == in_process


@pytest.mark.filterwarnings("ignore:n_jobs value:UserWarning")  # the referee, seeded as we seed it
@pytest.mark.slow
def test_ordinary_inputs_keep_umaps_own_bits():
    """Where ARPACK needs no restart, the seeded spectral start is UMAP's own, bit for bit: one
    connected graph, and blobs far apart (one component each, the multi-component layout)."""
    import umap
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 8, size=(6, 20))
    # A few hundred points take UMAP's paths for data this size (exact neighbours, 500 epochs) as
    # thousands would: which layout runs is the point, checked below, not the size.
    blobs = np.vstack([rng.normal(c, 1.0, size=(60, 20)) for c in centres]).astype(np.float32)
    cloud = rng.standard_normal((300, 20)).astype(np.float32)
    for X, components in ((cloud, 1), (blobs, 6)):
        model = umap.UMAP(n_components=2, metric="cosine", n_neighbors=15, random_state=42)
        theirs = model.fit_transform(X)
        assert connected_components(model.graph_)[0] == components  # the premise: which layout runs
        assert np.array_equal(algo.reduce("umap", X, 42), theirs)
