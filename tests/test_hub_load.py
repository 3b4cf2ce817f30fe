"""tecb_data.load on local folders and the choices it makes before touching the Hub or Reddit: a
mistyped folder is said to be missing and the Hub is never asked; a name that is neither a folder
nor a repo names both (loading by repo id against a Hub is in test_hub.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tecb_data
from helpers import grid_args, one_error, run_eval_cli
from hubserver import FakeHub
from tecb_data import layout
from tecb_data.errors import UserError, VerificationError
from tecb_data.load import REDDIT_IDS_DATASET, load, rehydration_dir


def test_a_local_folder_loads_verified(demo_datasets):
    bench = load(demo_datasets / "tenkgnad-clustering-p2p")
    rows = layout.read_split_rows(demo_datasets / "tenkgnad-clustering-p2p")
    assert bench.name == "tenkgnad-clustering-p2p" and bench.mteb_name == "TenKGnadClusteringP2P"
    assert [(list(s.texts), list(s.labels)) for s in bench.splits] == [(t, l) for t, l in rows]
    assert bench.location == str(demo_datasets / "tenkgnad-clustering-p2p")
    assert load(str(demo_datasets / "tenkgnad-clustering-p2p"), view="p2p").fingerprint == bench.fingerprint


def test_local_folder_mistakes_are_one_line_errors(demo_datasets, tmp_path):
    with pytest.raises(UserError, match="a local folder has no revisions"):
        load(demo_datasets / "blurbs-clustering-s2s", revision="main")
    with pytest.raises(UserError, match="holds the S2S view"):
        load(demo_datasets / "blurbs-clustering-s2s", view="p2p")
    # A path is a folder, never a repo id: it says which part is missing.
    with pytest.raises(UserError, match=r"no such dataset folder \(.*/missing/deeper/ does not exist\)"):
        load(tmp_path / "missing" / "deeper" / "folder")
    with pytest.raises(UserError, match="not a Hub repo id"):
        load("not a repo id")


def test_a_damaged_folder_does_not_load(demo_datasets, tmp_path):
    import shutil

    folder = tmp_path / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", folder)
    (folder / "data" / "samples.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(VerificationError, match="samples.jsonl"):
        load(folder)


def test_the_ids_dataset_asks_for_a_view_before_contacting_reddit(tmp_path):
    folder = layout.write_dataset(
        tmp_path,
        REDDIT_IDS_DATASET,
        {"data/submissions.jsonl": ['{"id":"abc","subreddit":"de"}\n']},
        {"dataset": REDDIT_IDS_DATASET, "seed": 42, "splits": []},
    )
    with pytest.raises(UserError, match="pass view='s2s' or view='p2p'"):
        load(folder)
    with pytest.raises(UserError, match="pass view='s2s' or view='p2p'"):
        load(folder, view="ids")


def test_rehydrated_datasets_live_beside_the_downloads(tmp_path):
    assert rehydration_dir(tmp_path) == tmp_path / "tecb-rehydrated"
    assert rehydration_dir().parts[-2:] == ("tecb", "rehydrated")


def test_a_rehydrated_view_is_reused_without_asking_reddit_again(tmp_path):
    ids = layout.write_dataset(
        tmp_path / "published",
        REDDIT_IDS_DATASET,
        {"data/submissions.jsonl": ['{"id":"abc","subreddit":"de"}\n']},
        {"dataset": REDDIT_IDS_DATASET, "seed": 7, "splits": []},
    )
    fingerprint = layout.read_manifest(ids)["fingerprint"]
    # What an earlier rehydration left in the cache folder for this ids dataset and seed.
    out = rehydration_dir(tmp_path / "cache") / f"{fingerprint[:16]}-seed7"
    layout.write_dataset(
        out,
        "reddit-clustering-s2s",
        {layout.DATA_FILE: ['{"labels":["de","at"],"sentences":["Hallo","Servus"]}\n']},
        {"dataset": "reddit-clustering-s2s", "view": "s2s", "splits": [{"name": "subreddits-00"}]},
    )
    bench = load(ids, view="s2s", cache_dir=tmp_path / "cache", praw_site="nowhere")
    assert bench.name == "reddit-clustering-s2s" and bench.splits[0].texts == ("Hallo", "Servus")
    assert bench.location.endswith("rehydrated s2s")


# -- a typo in a local path is a missing folder, not a Hub problem ---------------------------------

OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.fixture
def hub():
    server = FakeHub()
    server.start()
    yield server
    server.stop()


def hub_env(tmp_path: Path, endpoint: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_TELEMETRY="1", TECB_NETWORK_TIMEOUT="5")
    return env


@pytest.mark.slow
def test_a_mistyped_folder_is_said_to_be_missing_and_the_hub_is_never_asked(demo_datasets, hub, tmp_path):
    typo = f"{demo_datasets}/blurbs-clustering-s2"  # one letter short
    result = run_eval_cli(*grid_args(typo, tmp_path), env=hub_env(tmp_path, hub.url))
    line = one_error(result)
    assert "no such dataset folder" in line and f"{demo_datasets}/blurbs-clustering-s2s" in line, line
    assert hub.requests == []  # not one request: a folder path never goes to the Hub
    # Relative, under a folder that is here: `out/blurbs-clustering-s2` in the folder holding out/.
    relative = run_eval_cli(*grid_args(f"{demo_datasets.name}/blurbs-clustering-s2", tmp_path),
                            cwd=demo_datasets.parent, env=hub_env(tmp_path, hub.url))
    assert "did you mean" in one_error(relative) and hub.requests == []
    assert not (tmp_path / "r.jsonl").exists()


def test_the_library_s_load_takes_a_mistyped_folder_for_a_folder_too(demo_datasets, hub, tmp_path):
    # tecb_data.load() called directly (a notebook), not through tecb-eval: the same one line, and
    # the Hub (here the stand-in, in a child process pointed at it) is never asked.
    script = ("import sys, tecb_data\n"
              "try:\n    tecb_data.load(sys.argv[1])\n"
              "except tecb_data.UserError as exc:\n    print(exc)\n")
    for name, cwd in [(f"{demo_datasets}/blurbs-clustering-s2", tmp_path),
                      (f"{demo_datasets.name}/blurbs-clustering-s2", demo_datasets.parent)]:
        said = subprocess.run([sys.executable, "-c", script, name], cwd=cwd, env=hub_env(tmp_path, hub.url),
                              capture_output=True, text=True, timeout=120)
        assert said.returncode == 0 and said.stderr == "", said.stderr
        assert said.stdout.startswith(f"{name}: no such dataset folder") and "did you mean" in said.stdout, said.stdout
    assert hub.requests == []
    # A Path is always a folder, whatever it looks like; a file is said to be one.
    with pytest.raises(tecb_data.UserError, match="no such dataset folder"):
        tecb_data.load(Path("org-like/name"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(tecb_data.UserError, match="is a file, not a dataset folder"):
        tecb_data.load(tmp_path / "notes.txt")


@pytest.mark.slow
def test_a_name_that_is_neither_a_folder_nor_a_repo_names_both(hub, tmp_path):
    online = one_error(run_eval_cli(*grid_args("nobody-has/this-dataset", tmp_path), env=hub_env(tmp_path, hub.url)))
    assert "no dataset folder of that name here" in online and "no such dataset repository" in online, online
    offline = one_error(run_eval_cli(*grid_args("nobody-has/this-dataset", tmp_path),
                                     env={**hub_env(tmp_path, hub.url), **OFFLINE}))
    assert "no dataset folder of that name here" in offline and "HF_HUB_OFFLINE is set" in offline, offline
    assert "An error happened" not in offline  # huggingface_hub's own sentence says neither why nor what to do
