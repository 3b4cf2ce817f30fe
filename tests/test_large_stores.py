"""A store of thousands of models: `table`, `report` and `recommend` do work linear in the models
(one pass over the rows per step, never one filter of every row per model; a report's model page
does not list every other model once there are many) and show their
progress over the models past a few seconds. bench/bench_large_store.py times 4,000 models; here
the work is counted, not timed: the rows that boolean selections scan, for a store and one four
times its size."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import run_cli_here

SPLITS = 2


def store(path: Path, models: int) -> Path:
    lines = []
    for m in range(models):
        for s in range(SPLITS):
            v = 0.2 + 0.003 * m + 0.01 * s
            lines.append(json.dumps({
                "algorithm": "minibatch_kmeans", "algorithm_params": "{}", "ami": v, "ari": v, "completeness": v,
                "homogeneity": v, "dataset": "blurbs-clustering-s2s", "dataset_fingerprint": "b" * 64,
                "dataset_location": "x/blurbs-clustering-s2s", "dataset_splits": SPLITS, "model": f"m{m:04d}",
                "model_identity": f"m{m:04d}:x", "mteb_name": "BlurbsClusteringS2S", "n_clusters_found": 4,
                "n_labels": 4, "n_samples": 40, "noise_fraction": 0.0, "profile": "current", "protocol": "legacy",
                "reduction": "none", "reduction_params": "{}", "seed": 42, "seeds": "42", "split": f"split-{s}",
                "synthetic": True, "v_measure": v}, sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def scanned(monkeypatch, argv: list[str]) -> int:
    """Rows that boolean selections of data frames looked at while ``argv`` ran."""
    from tecb_eval.cli import main

    count = [0]
    select = pd.DataFrame._getitem_bool_array

    def counting(self, key):
        count[0] += len(self)
        return select(self, key)

    with monkeypatch.context() as patch:
        patch.setattr(pd.DataFrame, "_getitem_bool_array", counting)
        done = run_cli_here(*argv, main=main)
    assert done.returncode == 0, done.stderr
    return count[0]


@pytest.mark.parametrize("command", ["table", "report", "recommend"])
def test_work_grows_linearly_with_the_models(tmp_path, monkeypatch, command):
    if command == "report":
        from tecb_eval.reports import html

        # A small report's pages link every model; past this many only the leaderboards page does.
        monkeypatch.setattr(html, "NAV_MODELS", 8)
    work = {}
    for models in (10, 40):
        path = store(tmp_path / f"{models}.jsonl", models)
        argv = {"table": ["table", str(path)], "recommend": ["recommend", str(path)],
                "report": ["report", str(path), "--no-figures", "--out", str(tmp_path / f"site-{models}")]}[command]
        work[models] = scanned(monkeypatch, argv)
    # Four times the models: four times the rows and the work (plus what does not grow); a filter of
    # every row per model would make it sixteen times.
    assert work[40] < 6 * work[10], work
    if command == "report":  # and the pages: every page listing every model would grow them sixteen times
        size = {n: sum(p.stat().st_size for p in (tmp_path / f"site-{n}").rglob("*.html")) for n in (10, 40)}
        assert size[40] < 6 * size[10], size


def test_a_long_step_over_the_models_shows_its_progress(tmp_path, monkeypatch):
    from tecb_eval.cli import main
    from tecb_eval.reports import working

    monkeypatch.setattr(working, "PROGRESS_DELAY", 0.0)
    done = run_cli_here("table", str(store(tmp_path / "s.jsonl", 12)), main=main)
    assert done.returncode == 0, done.stderr
    assert "comparing each model with the best on BlurbsClusteringS2S: 11/11 models" in done.stderr, done.stderr
