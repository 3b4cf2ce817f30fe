"""Where the grid's work runs (``tecb_eval.grid.scheduling``): a grid with one unit, or too little
work to pay for starting workers, runs in this process unless workers are asked for; the work
estimate grows with the grid; asking for more jobs or memory than the machine has is a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tecb_eval.grid import executors
from tecb_eval.grid.run import run_grid


class _NoPool:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a worker pool was started")


@pytest.mark.slow
@pytest.mark.usefixtures("draws_here")  # where the fast protocol's samples are drawn is not this test's subject
def test_a_grid_of_one_unit_runs_in_this_process(blurbs_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "LocalExecutor", _NoPool)
    # Fast protocol, one configuration: one unit (the pooled sample), whatever jobs asks for.
    frame = run_grid([blurbs_folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], protocol="fast", jobs=2,
                     cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert len(frame) == 10
    # Legacy on one split, one configuration: one unit too.
    frame = run_grid([blurbs_folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1, jobs=2,
                     cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert len(frame) == 1
    # Two splits are two units side by side: the pool is asked for.
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs_folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=2, jobs=2,
                 cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)


@pytest.mark.slow
def test_a_grid_too_small_for_workers_runs_here_unless_workers_are_asked_for(blurbs_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "LocalExecutor", _NoPool)
    monkeypatch.delenv("TECB_JOBS", raising=False)
    # Two demo splits, UMAP among the reductions: 8 units, about a second of work; two worker
    # processes would spend more than that importing the stack.
    args = dict(configurations=["minibatch_kmeans:none", "minibatch_kmeans:umap", "hdbscan:umap",
                                "minibatch_kmeans:pca", "agglomerative:pca50+umap"], limit_splits=2,
                progress=False, log=lambda m: None)
    frame = run_grid([blurbs_folder], ["tfidf-lsa"], cache_dir=tmp_path / "auto", **args)
    assert len(frame) == 2 * 5
    # Asked for, by jobs or by $TECB_JOBS, workers start whatever the size.
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs_folder], ["tfidf-lsa"], cache_dir=tmp_path / "jobs", jobs=2, **args)
    monkeypatch.setenv("TECB_JOBS", "2")
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs_folder], ["tfidf-lsa"], cache_dir=tmp_path / "env", **args)


def test_a_unit_that_first_loads_scikit_learn_still_runs_on_one_thread():
    """threadpoolctl limits the libraries already loaded; a run imports scikit-learn (its OpenMP
    runtime, SciPy's BLAS) only for its first unit, inside the limit. In a fresh interpreter, as a
    run starts: every thread pool a unit's fits use is at one thread."""
    code = ("import sys\nfrom tecb_eval.grid.work import one_thread\n"
            "assert 'sklearn' not in sys.modules\n"
            "with one_thread():\n"
            "    import sklearn.cluster\n"
            "    from threadpoolctl import threadpool_info\n"
            "    import json\n"
            "    print(json.dumps(sorted({(i['internal_api'], i['num_threads']) for i in threadpool_info()})))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    pools = json.loads(done.stdout)
    assert {api for api, _ in pools} >= {"openmp", "openblas"} and {n for _, n in pools} == {1}, pools


def test_workers_start_only_for_work_that_pays_for_them():
    from tecb_eval.grid.scheduling import MIN_POOL_WORK_SECONDS, local_jobs

    big, small = 10 * MIN_POOL_WORK_SECONDS, MIN_POOL_WORK_SECONDS / 2
    assert local_jobs(8, chosen=False, side_by_side=3, work_seconds=big) == 3  # no idle workers
    assert local_jobs(2, chosen=False, side_by_side=10, work_seconds=big) == 2
    assert local_jobs(2, chosen=False, side_by_side=10, work_seconds=small) == 1
    assert local_jobs(2, chosen=True, side_by_side=10, work_seconds=small) == 2
    assert local_jobs(2, chosen=True, side_by_side=1, work_seconds=big) == 1  # one unit: here, asked or not


def test_the_work_estimate_grows_with_the_grid(blurbs_folder, tmp_path):
    from tecb_eval.grid.plan import GridConfig
    from tecb_eval.grid.run import Grid
    from tecb_eval.grid.store import ResultsStore

    def grid(splits, configurations, models=("tfidf-lsa",)):
        config = GridConfig(models=models, configurations=configurations, limit_splits=splits, progress=False)
        return Grid([blurbs_folder], config, store=ResultsStore(None), log=lambda m: None)

    one = grid(1, ["minibatch_kmeans:umap"])
    assert one.units_side_by_side() == 1
    assert 0 < one.estimated_work() < grid(3, ["minibatch_kmeans:umap"]).estimated_work()
    assert grid(3, ["minibatch_kmeans:umap"]).units_side_by_side() == 3
    # Two algorithms on one reduction share its unit; two models double the work, not the units.
    two = grid(3, ["minibatch_kmeans:umap", "agglomerative:umap"], models=("tfidf-lsa", "minilm-l6"))
    assert two.units_side_by_side() == 3
    assert two.estimated_work() > 2 * grid(3, ["minibatch_kmeans:umap"]).estimated_work()


def test_more_jobs_or_memory_than_the_machine_has_is_a_warning():
    from tecb_eval.cli.options import warn_beyond_machine
    from tecb_eval.grid.scheduling import machine_memory

    cores = len(os.sched_getaffinity(0))
    lines = warn_beyond_machine(jobs=cores + 1, memory_limit=f"{2 * machine_memory() // 2**30 + 1}GiB")
    assert len(lines) == 2 and all(line.startswith("warning: ") for line in lines)
    assert f"{cores} cores" in lines[0] and "GiB" in lines[1]
    assert warn_beyond_machine(jobs=1, memory_limit="0.5") == []
