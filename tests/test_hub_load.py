"""tecb_data.load on local folders and the choices it makes before touching the Hub or Reddit
(loading by repo id against a Hub is in test_hub.py)."""

from __future__ import annotations

import pytest

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
