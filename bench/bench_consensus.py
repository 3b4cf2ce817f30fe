"""What consensus costs on its own: 60 partitions of the same 2,000 texts (``consensus.MAX_TEXTS``,
what a larger split is sampled to), 1,770 pairs, beside scikit-learn's ``adjusted_mutual_info_score``
over the same pairs (the referee), and the largest difference between the two (printed, not a test).

The partitions are seeded draws shaped like a grid's: three pipelines of 20 partitions each, k from
3 to 60 in steps of 3, one with balanced cluster sizes (as k-means gives), one unbalanced, one with
a third of the texts as noise (-1, as HDBSCAN gives). What a pair costs depends on the cluster sizes,
not on which texts share a cluster.

    python bench/bench_consensus.py
    python bench/bench_consensus.py --texts 2000 --partitions 60 --repeat 3

Times are CPU seconds of this process (one thread); the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def partitions(texts: int, count: int, seed: int = 0) -> tuple[list[np.ndarray], list[str]]:
    rng = np.random.default_rng(seed)
    parts, groups = [], []
    shapes = ("balanced", "unbalanced", "noise")
    for index in range(count):
        shape = shapes[index % 3]
        k = 3 * (index // 3 % 20 + 1)
        alpha = {"balanced": 8.0, "unbalanced": 0.7, "noise": 2.0}[shape]
        labels = rng.choice(k, texts, p=rng.dirichlet(np.full(k, alpha)))
        if shape == "noise":
            labels[rng.uniform(size=texts) < 1 / 3] = -1
        parts.append(labels)
        groups.append(shape)
    return parts, groups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from sklearn.metrics import adjusted_mutual_info_score

    from tecb_eval.clustering.consensus import consensus

    parts, groups = partitions(args.texts, args.partitions)
    n = len(parts)
    ours, found = [], None
    for _ in range(args.repeat):
        start = time.process_time()
        found = consensus(parts, groups)
        ours.append(time.process_time() - start)
    start = time.process_time()
    ami = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            ami[i, j] = ami[j, i] = adjusted_mutual_info_score(parts[i], parts[j])
    referee = time.process_time() - start
    counts = {g: groups.count(g) for g in groups}
    weights = np.array([1.0 / counts[g] for g in groups])
    worst = 0.0
    for i in range(n):
        others = np.arange(n) != i
        expected = (weights[others] * ami[i, others]).sum() / weights[others].sum()
        worst = max(worst, abs(found[i] - expected))
    print(f"{n} partitions of {args.texts} texts, {n * (n - 1) // 2} pairs")
    print(f"consensus: {min(ours):.2f} CPU s (best of {args.repeat}: {', '.join(f'{t:.2f}' for t in ours)})")
    print(f"scikit-learn's adjusted_mutual_info_score over the same pairs: {referee:.2f} CPU s")
    print(f"largest |consensus - the same mean of scikit-learn's AMI|: {worst:.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
