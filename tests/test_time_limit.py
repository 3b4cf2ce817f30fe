"""The time limit: a configuration whose cells are estimated to take longer than --time-limit on
one core is refused before any work, in one line naming it, its estimate and what to do instead
(as a unit that cannot fit the memory budget is skipped in one line)."""

from __future__ import annotations

import pytest
from helpers import eval_error
from tablefiles import unlabelled_corpus

from tecb_eval.clustering import registry
from tecb_eval.grid.plan import ESTIMATE_DIM


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return unlabelled_corpus(tmp_path_factory.mktemp("time-limit"))


def test_a_cell_over_the_time_limit_is_refused_in_one_line_before_any_work(corpus, tmp_path, capsys):
    # Exact Ward on the 120 texts' unreduced vectors, on the matrix (it fits any budget): its estimate.
    seconds = sum(registry.algorithm("agglomerative").cost(120, ESTIMATE_DIM, k, "matrix") for k in (3, 6))
    results, cache = tmp_path / "r.jsonl", tmp_path / "c"
    said = eval_error(capsys, ["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "agglomerative:none",
                               "--k", "3,6", "--results", str(results), "--cache-dir", str(cache),
                               "--time-limit", f"{seconds / 2}"])
    assert ("agglomerative:none on the 120 texts of split 'all' of corpus-s2s: about 0 min on one core for its 2 "
            "cells (estimated for 256-d vectors)") in said
    assert "more than --time-limit 0 min" in said and "or a larger --time-limit" in said
    assert not results.exists() and not cache.exists()


def test_the_default_time_limit_refuses_exact_ward_on_100000_unreduced_texts_and_offers_what_fits():
    from types import SimpleNamespace

    from tecb_data.errors import UserError
    from tecb_eval.clustering.cluster_counts import Setting
    from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT
    from tecb_eval.grid.plan import check_time

    # The plan's face check_time reads: one split of 100,000 texts, k from 5 to 60.
    unit = SimpleNamespace(texts=range(100_000), base_texts=range(100_000), name="all", k=0)
    bench = SimpleNamespace(fingerprint="f", name="corpus-s2s")
    plan = SimpleNamespace(benchmarks=[bench], units={("f", 42): [unit]}, seed=42, profile=None,
                           configurations=[("agglomerative", "none")], settings=lambda a: tuple(Setting("k", k) for k in range(5, 65, 5)))
    with pytest.raises(UserError, match=r"agglomerative:none on the 100,000 texts of split 'all' of corpus-s2s: "
                                        r"about \d+\.\d h on one core for its 12 cells .* more than --time-limit 1\.0 h; "
                                        r"use minibatch_kmeans, a reduction"):
        check_time(plan, DEFAULT_TIME_LIMIT, 16 * 2**30)
    # On UMAP's two dimensions exact Ward on the vectors takes minutes: it runs.
    plan.configurations = [("agglomerative", "umap"), ("agglomerative_knn", "umap")]
    check_time(plan, DEFAULT_TIME_LIMIT, 16 * 2**30)
