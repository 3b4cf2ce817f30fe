"""Every path built from a stored value stays inside the folder the user named: a dataset's
manifest (data someone published) and a results store (data someone may have sent you) name files
only by plain names, and each place that joins such a name to a folder checks that the joined path
stays inside it. A page's file name built from a name is bounded, however long the name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import one_line_error, run_cli_here
from tecb_data.errors import UserError
from tecb_data.layout import manifest_fingerprint

DATASET = "tenkgnad-clustering-s2s"
NOT_PLAIN = ["../../escape/X", "a/b", "a\\b", ".hidden", "..", "tab\there", "", "x" * 300]


def _published(demo_datasets, tmp_path: Path, **fields) -> Path:
    """A copy of a demo dataset under another name whose manifest carries ``fields``, with the
    fingerprint recomputed: a folder that verifies, as a published one would."""
    folder = tmp_path / "published"
    shutil.copytree(demo_datasets / DATASET, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest.update({"dataset": "someones-clustering-s2s", **fields})
    manifest["fingerprint"] = manifest_fingerprint(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _refused(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` refuses a dataset whose manifest does not verify: exit 1 (what `verify` gives
    a folder that does not match its manifest) and one line."""
    from tecb_eval.cli import main

    code = main(argv)
    error = capsys.readouterr().err
    assert code == 1 and error.count("\n") == 1 and error.startswith("tecb-eval: error: "), error
    return error


def _nothing_under(folder: Path) -> None:
    assert not folder.exists() or not any(folder.rglob("*")), sorted(folder.rglob("*"))


@pytest.mark.parametrize("field", ["dataset", "mteb_name", "source", "view"])
@pytest.mark.parametrize("value", NOT_PLAIN, ids=repr)
def test_verify_refuses_a_manifest_name_that_is_not_a_plain_name(demo_datasets, tmp_path, field, value):
    folder = _published(demo_datasets, tmp_path, **{field: value})
    done = run_cli_here("verify", str(folder))
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert str(folder / "manifest.json") in done.stderr and f"'{field}'" in done.stderr
    assert "rebuild the dataset" in done.stderr


def test_a_plain_name_still_verifies(demo_datasets, tmp_path):
    folder = _published(demo_datasets, tmp_path, mteb_name="SomeonesClusteringS2S+Other")
    assert run_cli_here("verify", str(folder)).returncode == 0


def test_run_never_writes_where_a_manifest_name_points(demo_datasets, tmp_path, capsys):
    # From OUT.partial/mteb/results/<model>/<revision>/: five folders up is tmp_path.
    escape = tmp_path / "escape"
    folder = _published(demo_datasets, tmp_path, mteb_name="../" * 5 + "escape/ESCAPE")
    error = _refused(capsys, ["run", "--data", str(folder), "--model", "tfidf-lsa", "--config",
                                    "minibatch_kmeans:none", "--results", str(tmp_path / "r.jsonl"),
                                    "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"),
                                    "--quiet", "--no-figure1"])
    assert "'mteb_name'" in error and "manifest.json" in error
    _nothing_under(escape)
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.jsonl").exists()


def test_pretrain_never_writes_where_a_manifest_name_points(demo_datasets, tiny_bert, tmp_path, capsys):
    escape = tmp_path / "escape"
    escape.mkdir()  # OUT.partial/../escape/PT: a folder that is there to write into
    folder = _published(demo_datasets, tmp_path, dataset="../escape/PT")
    error = _refused(capsys, ["pretrain", "--model", str(tiny_bert), "--data", str(folder), "--out",
                                    str(tmp_path / "pte"), "--max-steps", "1", "--eval-every", "1", "--seeds", "1",
                                    "--quiet"])
    assert "'dataset'" in error
    _nothing_under(escape)
    assert not (tmp_path / "pte").exists() and not (tmp_path / "pte.partial").exists()


def test_pretrain_keeps_a_loaded_benchmarks_name_inside_out(demo_datasets, tiny_bert, tmp_path):
    """A benchmark built in Python never passed a manifest check: the join itself refuses."""
    import dataclasses

    from tecb_data.load import load
    from tecb_eval.pretraining import pretrain

    (tmp_path / "escape").mkdir()
    bench = dataclasses.replace(load(demo_datasets / DATASET), name="../escape/PT")
    with pytest.raises(UserError, match=r"outside"):
        pretrain(tiny_bert, [bench], output_dir=tmp_path / "pte", max_steps=1, eval_every=1, seeds=(1,),
                 progress=False)
    _nothing_under(tmp_path / "escape")


def test_inside_joins_and_refuses_an_escape(tmp_path):
    from tecb_data.outputs import inside

    assert inside(tmp_path, "a", "b.json") == tmp_path / "a" / "b.json"
    for parts in (["..", "x"], ["a/../../x"], ["/etc/passwd"], ["a", "../../x.json"]):
        with pytest.raises(UserError, match="outside"):
            inside(tmp_path, *parts)
    (tmp_path / "link").symlink_to(tmp_path.parent)  # a link inside that leads out
    with pytest.raises(UserError, match="outside"):
        inside(tmp_path, "link", "x.json")


# -- a results store's values -----------------------------------------------------------------

@pytest.fixture(scope="module")
def store_rows(demo_datasets, tmp_path_factory) -> list[dict]:
    """The rows of a cheap store: tfidf-lsa, k-means on the embeddings, one split."""
    from tecb_eval.cli import main

    root = tmp_path_factory.mktemp("stored")
    store = root / "r.jsonl"
    assert main(["run", "--data", str(demo_datasets / DATASET), "--model", "tfidf-lsa", "--config",
                 "minibatch_kmeans:none", "--results", str(store), "--cache-dir", str(root / "cache"),
                 "--limit-splits", "1", "--quiet"]) == 0
    return [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]


def _store(rows: list[dict], path: Path, **fields) -> Path:
    # dataset_splits as many as the rows hold: the dataset counts as complete, so MTEB's layout is written.
    splits = len({r["split"] for r in rows})
    path.write_text("".join(json.dumps({**r, "dataset_splits": splits, **fields}, sort_keys=True) + "\n"
                            for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("ups", [4, 12])
def test_export_refuses_a_stored_name_that_is_a_path_and_names_the_line(store_rows, tmp_path, capsys, ups):
    # Four ../ from mteb/results/<model>/<revision>/ is the root of --out; twelve leave it.
    store = _store(store_rows, tmp_path / "sent.jsonl", mteb_name="../" * ups + "tmp/x/ESCAPED")
    out = tmp_path / "deep" / "er" / "out"
    error = one_line_error(capsys, ["export", str(store), "--out", str(out)])
    assert f"{store}:1:" in error and "mteb_name" in error
    assert not out.exists()
    assert not list(tmp_path.rglob("ESCAPED*"))


def test_a_frame_from_elsewhere_is_checked_where_the_mteb_layout_is_joined(store_rows, tmp_path):
    """A frame handed to the writer in Python passed no store: the join refuses."""
    import pandas as pd

    from tecb_eval.mteb.results import write_results

    frame = pd.DataFrame([{**r, "dataset_splits": 1, "mteb_name": "../" * 4 + "ESCAPED"} for r in store_rows])
    with pytest.raises(UserError):
        write_results(frame, tmp_path / "out" / "mteb")
    assert not list(tmp_path.rglob("ESCAPED*"))


def test_a_long_model_name_gets_a_bounded_page_name(store_rows, tmp_path, capsys):
    from tecb_eval.cli import main

    long = "m" * 5000
    store = _store(store_rows, tmp_path / "long.jsonl", model=long)
    assert main(["report", str(store), "--out", str(tmp_path / "report"), "--no-figures"]) == 0, capsys.readouterr().err
    pages = list((tmp_path / "report" / "models").iterdir())
    assert len(pages) == 1 and len(pages[0].name.encode()) <= 120
    assert long in pages[0].read_text(encoding="utf-8")
    # Two long names that share their first characters still get a page each.
    other = _store(store_rows, tmp_path / "other.jsonl", model=long + "n")
    assert main(["report", str(store), str(other), "--out", str(tmp_path / "two"), "--no-figures"]) == 0
    assert len(list((tmp_path / "two" / "models").iterdir())) == 2
