"""`recommend` ranks pipelines (model x reduction x algorithm), not only models: the first few with
their tie group (those whose difference to the best does not hold), the real second-best pipeline
among them even where it is the best model's own; it says what "runner-up", "holds" and "tied"
mean; it says why the leaderboard can name another winner; and a lead whose interval and
sign-flip test disagree says so in its line instead of beside an interval that excludes 0."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli_here

DATASET, MTEB = "blurbs-clustering-s2s", "BlurbsClusteringS2S"


def store(path: Path, means: dict, splits: int, step: float = 0.002) -> Path:
    """Rows for each (model, algorithm, reduction) at ``means``, split s adding s x ``step``; a list
    of values instead of a mean gives each split's value."""
    lines = []
    for (model, algorithm, reduction), mean in sorted(means.items()):
        for s in range(splits):
            v = mean[s] if isinstance(mean, list) else mean + step * s
            lines.append(json.dumps({
                "algorithm": algorithm, "algorithm_params": json.dumps({"n_clusters": 4, "random_state": 42}),
                "ami": v, "ari": v, "completeness": v, "homogeneity": v, "dataset": DATASET,
                "dataset_fingerprint": "b" * 64, "dataset_location": f"x/{DATASET}", "dataset_splits": splits,
                "model": model, "model_identity": f"{model}:x", "mteb_name": MTEB, "n_clusters_found": 4,
                "n_labels": 4, "n_samples": 40, "noise_fraction": 0.0, "profile": "current", "protocol": "legacy",
                "reduction": reduction, "reduction_params": json.dumps({"n_components": 2, "random_state": 42}),
                "seed": 42, "seeds": "42", "split": f"split-{s:02d}", "synthetic": False, "v_measure": v},
                sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recommend(path: Path, *extra: str):
    from tecb_eval.cli import main

    done = run_cli_here("recommend", str(path), *extra, main=main)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pipelines_are_ranked_with_their_tie_group_and_the_words_explained(tmp_path):
    out = recommend(store(tmp_path / "s.jsonl", {
        # a's agglomerative: a little behind on average, ahead on half the splits.
        ("a", "minibatch_kmeans", "none"): 0.50, ("a", "agglomerative", "none"): [0.52, 0.48, 0.53, 0.49, 0.52, 0.49,
                                                                                    0.53, 0.49],
        ("b", "minibatch_kmeans", "none"): 0.30, ("b", "agglomerative", "none"): 0.29}, splits=8))
    ranked = next(line for line in out.splitlines() if line.strip().startswith("pipelines ranked"))
    # The second-best pipeline is the best model's own, a hair behind: shown, and tied with the best.
    assert "1. a, none reduction, minibatch_kmeans" in ranked and "2. a, none reduction, agglomerative" in ranked
    assert "agglomerative 50.63 (tied with the best)" in ranked, ranked
    assert "3. b, none reduction, minibatch_kmeans 30.70 (behind the best: holds)" in ranked, ranked
    assert "of 4)" in ranked and "1 of them tied with the best" in ranked
    assert "runner-up: the best pipeline of another model" in out and "a lead holds when" in out
    data = json.loads(recommend(tmp_path / "s.jsonl", "--format", "json"))["recommendations"][0]
    assert [p["tied"] for p in data["pipelines"]] == [None, True, False, False]


def test_the_leaderboard_winner_that_differs_is_explained(tmp_path):
    out = recommend(store(tmp_path / "s.jsonl", {
        ("a", "minibatch_kmeans", "none"): 0.50, ("b", "minibatch_kmeans", "none"): 0.40,
        ("b", "hdbscan", "pca"): 0.60, ("a", "hdbscan", "pca"): 0.30}, splits=8))
    line = next(line for line in out.splitlines() if line.strip().startswith("leaderboard:"))
    assert "a leads the leaderboard" in line and "ranks every pipeline" in line


def test_an_interval_that_excludes_0_beside_a_verdict_that_does_not_hold_says_why(tmp_path):
    out = recommend(store(tmp_path / "s.jsonl", {
        ("a", "minibatch_kmeans", "none"): 0.50, ("b", "minibatch_kmeans", "none"): 0.45}, splits=3, step=0.01))
    lead = next(line for line in out.splitlines() if line.strip().startswith("lead:"))
    assert "the ranking does not hold" in lead
    assert "too few splits to tell" in lead and "the interval excludes 0, but the sign-flip test cannot reject" in lead, lead
