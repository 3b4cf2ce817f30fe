"""MTEB is the referee: its own task classes, pointed at our built folders, score the same encoder
that our grid runs, and every split (legacy) and bootstrap (v2) must agree to 1e-9.

The datasets are every one we can build here: Blurbs S2S and P2P from the real GermEval 2019 dev
set, TenKGnad P2P from the real 10kGNAD test csv, TenKGnad S2S from the embedded OMPC demo sample.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import shared_file

import mteb  # noqa: E402

from tecb_data.build import build  # noqa: E402
from tecb_eval.mteb import encoders as mteb_encoders, tasks as mteb_bridge  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.mteb.encoders import HashingEncoder  # noqa: E402

# Both sides at one thread, MTEB's draws for our fast protocol made in this process (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread", "draws_here")]
TOLERANCE = 1e-9


@pytest.fixture(scope="module")
def folders(tmp_path_factory, demo_datasets, germeval_dev_datasets):
    out = tmp_path_factory.mktemp("referee")
    build("tenkgnad", shared_file("10kgnad/test.csv"), out)
    return {
        "BlurbsClusteringS2S": germeval_dev_datasets["blurbs-clustering-s2s"][0],
        "BlurbsClusteringP2P": germeval_dev_datasets["blurbs-clustering-p2p"][0],
        "TenKGnadClusteringP2P": out / "tenkgnad-clustering-p2p",
        "TenKGnadClusteringS2S": demo_datasets / "tenkgnad-clustering-s2s",
    }


def _ours(folder, protocol, cache_dir, frame=None):
    """Our grid's scores in MTEB's order; ``frame``: that grid's scores, run already."""
    import tecb_data

    if frame is None:
        frame = run_grid([folder], [HashingEncoder()], configurations=["minibatch_kmeans:none"], protocol=protocol,
                         cache_dir=cache_dir, progress=False, log=lambda m: None)
    if protocol == "legacy":
        order = [s.name for s in tecb_data.load(folder).splits]
    else:
        order = sorted(frame.split)
    by_split = dict(zip(frame.split, frame.v_measure))
    return [by_split[name] for name in order]


def _mtebs(task, version):
    """MTEB's evaluation of the hashing encoder on ``task`` (MTEB's own, its data loaded by MTEB)."""
    result = mteb.evaluate(mteb_encoders.MtebEncoder(HashingEncoder()), tasks=[task], cache=None,
                           show_progress_bar=False, encode_kwargs={"batch_size": 32})
    (task_result,) = result.task_results
    scores = task_result.scores["test"][0]
    return task_result, scores


@pytest.mark.parametrize("task", ["BlurbsClusteringS2S", "BlurbsClusteringP2P", "TenKGnadClusteringP2P",
                                  "TenKGnadClusteringS2S"])
@pytest.mark.parametrize("protocol", ["legacy", "fast"])
def test_scores_equal_mtebs_own_tasks_on_our_folders(folders, task, protocol, tmp_path, mteb_loaded_task, request):
    folder = folders[task]
    version = "v2" if protocol == "fast" else "legacy"
    # The dev set's Blurbs S2S on the fast protocol: the grid tests/test_levels.py runs too, run once.
    shared = request.getfixturevalue("dev_s2s_fast_hashing") if (task, protocol) == ("BlurbsClusteringS2S",
                                                                                      "fast") else None
    ours = _ours(folder, protocol, tmp_path, shared)
    task_result, scores = _mtebs(mteb_loaded_task(folder, version), version)
    assert task_result.task_name == (f"{task}.v2" if version == "v2" else task)
    theirs = scores["v_measures"]["Level 0"] if version == "v2" else scores["v_measures"]
    assert len(ours) == len(theirs) == (10 if version == "v2" else len(ours))
    assert max(abs(a - b) for a, b in zip(ours, theirs)) < TOLERANCE
    assert abs(np.mean(ours) - scores["main_score"]) < TOLERANCE
    # Not a degenerate agreement: the encoder separates the labels to some degree, differently per split.
    assert 0.0 < min(ours) and len(set(np.round(ours, 12))) > 1


def test_mteb_tasks_are_mtebs_own_classes_bound_to_our_folder(folders):
    from mteb.abstasks.clustering import AbsTaskClustering
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy

    import tecb_data

    folder = folders["BlurbsClusteringS2S"]
    bench = tecb_data.load(folder)
    (legacy,) = mteb_bridge.mteb_tasks([folder])
    (fast,) = mteb_bridge.mteb_tasks(folder, version="v2")
    assert type(legacy) is type(mteb.get_task("BlurbsClusteringS2S")) and isinstance(legacy, AbsTaskClusteringLegacy)
    assert type(fast) is type(mteb.get_task("BlurbsClusteringS2S.v2")) and isinstance(fast, AbsTaskClustering)
    assert legacy.metadata.dataset["path"] == str(folder) and legacy.metadata.revision == bench.fingerprint
    # MTEB's registry still points at the published dataset.
    assert mteb.get_task("BlurbsClusteringS2S").metadata.dataset["path"] == "slvnwhrl/blurbs-clustering-s2s"
    with pytest.raises(Exception, match="unknown MTEB task version"):
        mteb_bridge.mteb_tasks([folder], version="v3")


def test_export_writes_mtebs_results_layout_that_mteb_reads(folders, tmp_path):
    from tecb_eval.reports.export import export_all

    frames = [run_grid([folders["TenKGnadClusteringP2P"]], [("hashing", HashingEncoder())],
                       configurations=["minibatch_kmeans:none"], protocol=p, cache_dir=tmp_path / "cache",
                       progress=False, log=lambda m: None) for p in ("legacy", "fast")]
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True)
    # One protocol per export (its tables and MTEB JSON show one version); an export folder holds one export.
    for protocol, name in (("legacy", "TenKGnadClusteringP2P"), ("fast", "TenKGnadClusteringP2P.v2")):
        export_all(frame, tmp_path / protocol, log=lambda m: None, selection={"protocol": protocol})
        root = tmp_path / protocol / "mteb"
        loaded = mteb.ResultCache(root).load_results(include_remote=False, require_model_meta=True)
        (model,) = loaded.model_results
        assert model.model_name == "hashing"
        got = {r.task_name: r.scores["test"][0] for r in model.task_results}
        assert set(got) == {name}
        ours = frame[frame.protocol == protocol].v_measure.mean()
        assert got[name]["main_score"] == pytest.approx(ours, abs=1e-6)  # MTEB rounds to 6 decimals on disk
        assert got[name]["tecb_profile"] == "current" and got[name]["tecb_protocol"] == protocol
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json"))
        assert all(f.startswith("results/hashing/") for f in files) and any(f.endswith("/model_meta.json") for f in files)
        meta = json.loads(next(root.rglob("model_meta.json")).read_text())
        assert meta["name"] == "hashing"


@pytest.mark.parametrize("protocol", ["legacy", "fast"])
def test_a_dataset_mteb_has_no_task_for_gets_one_of_mtebs_kind(folders, protocol, tmp_path):
    """Reddit has no MTEB task: the same data under its name is scored by a task of MTEB's kind."""
    import dataclasses

    import tecb_data

    bench = tecb_data.load(folders["TenKGnadClusteringP2P"])
    reddit = dataclasses.replace(bench, manifest={**bench.manifest, "mteb_name": "RedditClusteringP2P"})
    version = "v2" if protocol == "fast" else "legacy"
    (task,) = mteb_bridge.mteb_tasks([reddit], version=version)
    # MTEB's RedditClusteringP2P is its English set: the German view is our own task.
    name = "RedditClusteringP2P-DE" + (".v2" if version == "v2" else "")
    assert task.metadata.name == name
    result = mteb.evaluate(mteb_encoders.MtebEncoder(HashingEncoder()), tasks=[task], cache=None,
                           show_progress_bar=False)
    (task_result,) = result.task_results
    assert task_result.task_name == name
    scores = task_result.scores["test"][0]
    theirs = scores["v_measures"]["Level 0"] if version == "v2" else scores["v_measures"]
    frame = run_grid([reddit], [HashingEncoder()], configurations=["minibatch_kmeans:none"], protocol=protocol,
                     cache_dir=tmp_path, progress=False, log=lambda m: None)
    ours = frame.sort_values("split").v_measure.tolist()
    assert len(ours) == len(theirs) and max(abs(a - b) for a, b in zip(ours, theirs)) < TOLERANCE
