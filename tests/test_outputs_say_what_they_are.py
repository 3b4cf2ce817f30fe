"""Synthetic (demo) data say so wherever they go: the card's first line, the manifest, `tecb-data
push`, which refuses them unless --allow-synthetic, pre-training's summary, and every table."""

from __future__ import annotations

import os
import shutil

import pytest

from helpers import run_cli
from tecb_data import layout
from tecb_data.card import SYNTHETIC_NOTICE, check_card

FOLDER = "blurbs-clustering-s2s"


def _body(card: str) -> str:
    """The card below its YAML metadata block: what the Hub shows first."""
    assert card.startswith("---\n")
    return card.split("\n---\n", 1)[1]


def test_demo_card_says_synthetic_in_its_first_line_and_manifest_says_it_too(demo_datasets):
    for folder in sorted(p for p in demo_datasets.iterdir() if p.is_dir()):
        card = (folder / layout.CARD).read_text(encoding="utf-8")
        assert _body(card).splitlines()[0] == SYNTHETIC_NOTICE, folder.name
        manifest = layout.read_manifest(folder)
        assert manifest["synthetic"] is True
        check_card(card, manifest, where=str(folder))  # still valid metadata for the Hub


def test_data_that_are_not_the_demo_sample_carry_no_mark(tmp_path):
    """A copy of the demo files (other bytes, the same records) is still synthetic; one title
    changed makes them the user's data."""
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    source = tmp_path / "blurbs"
    shutil.copytree(demo_input("blurbs"), source)
    with open(source / "blurbs_test.txt", "a", encoding="utf-8") as handle:
        handle.write("\n")
    (_, copied), *_ = build("blurbs", source, tmp_path / "copy", views=("s2s",))
    assert copied["synthetic"] is True
    train = source / "blurbs_train.txt"
    train.write_text(train.read_text(encoding="utf-8").replace("<title>", "<title>Neu: ", 1), encoding="utf-8")
    (folder, manifest), *_ = build("blurbs", source, tmp_path / "out", views=("s2s",))
    assert "synthetic" not in manifest
    card = (folder / layout.CARD).read_text(encoding="utf-8")
    assert SYNTHETIC_NOTICE not in card and "ynthetic" not in _body(card).splitlines()[0]


def _offline_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    return env


def test_push_refuses_synthetic_data_unless_allowed_and_the_dry_run_says_synthetic(demo_datasets, tmp_path):
    folder = str(demo_datasets / FOLDER)
    env = _offline_env(tmp_path)
    refused = run_cli("push", folder, "--repo-id", "me/blurbs", env=env)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "synthetic" in refused.stderr and "--allow-synthetic" in refused.stderr

    plan = run_cli("push", folder, "--repo-id", "me/blurbs", "--dry-run", env=env)
    assert plan.returncode == 0, plan.stderr
    first = plan.stdout.splitlines()[0]
    assert first.startswith("synthetic demo data") and "refused unless --allow-synthetic" in first, plan.stdout

    allowed = run_cli("push", folder, "--repo-id", "me/blurbs", "--dry-run", "--allow-synthetic", env=env)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.splitlines()[0].startswith("synthetic demo data") and "allowed by --allow-synthetic" in allowed.stdout


def test_allowed_synthetic_push_sends_a_card_that_says_so_first(demo_datasets, tmp_path):
    from hubserver import FakeHub

    token = "hf_tecbTestSecret0123456789abcdef"
    hub = FakeHub(tokens={token: "maintainer"})
    hub.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
        env.update(HF_ENDPOINT=hub.url, HF_TOKEN=token, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0",
                   HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1")
        pushed = run_cli("push", str(demo_datasets / FOLDER), "--repo-id", "tecb-test/demo", "--allow-synthetic", env=env)
        assert pushed.returncode == 0, pushed.stderr
        card = hub.files("tecb-test/demo")["README.md"].decode("utf-8")
        assert _body(card).splitlines()[0] == SYNTHETIC_NOTICE
    finally:
        hub.stop()


def test_an_older_demo_folder_whose_card_says_nothing_is_not_pushed(demo_datasets, tmp_path):
    """Built before the card said it (the manifest has no flag): found by its inputs, and refused even
    with --allow-synthetic, since the card would not say what the data are."""
    import json

    from tecb_data.hub import check_synthetic
    from tecb_data.errors import UserError

    folder = tmp_path / FOLDER
    shutil.copytree(demo_datasets / FOLDER, folder)
    card = (folder / layout.CARD).read_text(encoding="utf-8").replace(SYNTHETIC_NOTICE + "\n\n", "")
    (folder / layout.CARD).write_text(card, encoding="utf-8")
    manifest = json.loads((folder / layout.MANIFEST).read_text(encoding="utf-8"))
    del manifest["synthetic"]
    with pytest.raises(UserError, match="does not say so in its first line"):
        check_synthetic(folder, manifest, allow=True, dry_run=False)
    with pytest.raises(UserError, match="--allow-synthetic"):
        check_synthetic(folder, manifest, allow=False, dry_run=False)


def test_pretraining_on_demo_data_says_synthetic_in_its_summary(demo_datasets, tiny_bert, tmp_path):
    from tecb_eval.cli import main
    from tecb_eval.reports.tables import DEMO_NOTE

    data = demo_datasets / FOLDER
    out = tmp_path / "out"
    assert main(["pretrain", "--model", str(tiny_bert), "--data", str(data), "--method", "tsdae", "--seeds", "7",
                 "--max-steps", "1", "--eval-every", "1", "--batch-size", "8", "--out", str(out), "--quiet"]) == 0
    summaries = sorted(out.rglob("summary.md"))
    assert summaries
    for path in summaries:
        assert path.read_text(encoding="utf-8").startswith(DEMO_NOTE), path


@pytest.mark.parametrize("option", ["--levels", "--density"])
def test_levels_and_density_tables_of_demo_rows_say_synthetic(small_store, capsys, option):
    from tecb_eval.cli import main
    from tecb_eval.reports.tables import DEMO_NOTE

    assert main(["table", str(small_store), option]) == 0
    assert DEMO_NOTE in capsys.readouterr().out
    assert main(["table", str(small_store), option, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert DEMO_NOTE in captured.err and DEMO_NOTE not in captured.out  # a CSV stays data only
