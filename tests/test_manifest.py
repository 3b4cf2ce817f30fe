"""A published folder's ``manifest.json`` and what it vouches for (``tecb_data.layout``): its
fingerprint is the same for the same build and moves with the meaning; a manifest that was edited,
or forged with a fresh fingerprint, neither verifies nor loads; data that differ from the manifest
are said to differ, never described."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import error_line, run_cli
from tecb_data import layout
from tecb_data.cli import main as data_main
from tecb_eval.cli import main


def test_the_fingerprint_is_the_same_for_the_same_build_and_moves_with_the_meaning(demo_datasets):
    manifest = json.loads((demo_datasets / "blurbs-clustering-s2s" / "manifest.json").read_text())
    assert layout.manifest_fingerprint(manifest) == manifest["fingerprint"]
    for field in layout.MEANING_FIELDS:
        assert layout.manifest_fingerprint({**manifest, field: "x"}) != manifest["fingerprint"], field
    # Provenance is not meaning: another package version builds the same dataset.
    assert layout.manifest_fingerprint({**manifest, "package_version": "9"}) == manifest["fingerprint"]


@pytest.mark.parametrize("field, value", [("mteb_name", "TenKGnadClusteringS2S"), ("seed", 7),
                                          ("dataset", "tenkgnad-clustering-s2s"), ("mteb_name", None),
                                          ("splits", [])])
def test_an_edited_manifest_neither_verifies_nor_loads(demo_datasets, tmp_path, capsys, field, value):
    folder = tmp_path / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, field: value}))
    assert data_main(["verify", str(folder)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err
    results = tmp_path / "results.jsonl"
    assert main(["run", "--data", str(folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--results", str(results), "--limit-splits", "1", "--cache-dir", str(tmp_path / "c"), "--quiet"]) != 0
    assert not results.exists() or results.read_text() == ""


def test_a_manifest_forged_with_a_fresh_fingerprint_is_still_checked_against_the_registry(demo_datasets, tmp_path,
                                                                                          capsys):
    folder = tmp_path / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    forged = {**manifest, "mteb_name": "TenKGnadClusteringS2S"}
    forged["fingerprint"] = layout.manifest_fingerprint(forged)
    (folder / "manifest.json").write_text(json.dumps(forged))
    assert data_main(["verify", str(folder)]) == 1
    assert "BlurbsClusteringS2S" in capsys.readouterr().err


def test_stats_of_a_tampered_dataset_says_so_instead_of_describing_it(demo_datasets, tmp_path):
    folder = tmp_path / "tenkgnad-clustering-s2s"
    shutil.copytree(demo_datasets / "tenkgnad-clustering-s2s", folder)
    assert run_cli("stats", str(folder)).returncode == 0
    data = folder / layout.DATA_FILE
    data.write_bytes(data.read_bytes().replace(b"Sport", b"Sp0rt", 1))
    result = run_cli("stats", str(folder))
    assert result.returncode == 1 and result.stdout == ""
    assert "data/test.jsonl: content differs from manifest.json" in error_line(result.stderr)
