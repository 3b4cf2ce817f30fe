"""What a model given on the command line or to ``run_grid`` names (``tecb_eval.models.spec``): an
option the model kind does not take is named, a name with a control character is refused where it
is given, one name for two models is refused, and a model missing from the offline cache stops the
run before any text is encoded."""

from __future__ import annotations

import pytest

from helpers import one_error, one_line_error, run_args, run_eval_cli
from tecb_data.errors import UserError

DATASET = "tenkgnad-clustering-s2s"
OFFLINE = {"HF_HUB_OFFLINE": "1"}


def test_an_unknown_model_option_is_named(demo_datasets, tmp_path, capsys):
    argv = run_args(demo_datasets / DATASET, tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("tfidf-lsa")] = "minilm-l6,foo=bar"
    error = one_line_error(capsys, argv)
    assert "'foo'" in error


def test_a_model_name_with_a_control_character_is_one_line_where_it_is_given(demo_datasets, tmp_path, capsys):
    argv = run_args(demo_datasets / "blurbs-clustering-s2s", tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("tfidf-lsa")] = "tfidf-lsa,name=evil\nimport os"
    assert "control character" in one_line_error(capsys, argv)
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("name", ["evil\nimport os", "tab\there", "line\u2028sep"])
def test_a_model_name_with_a_control_character_is_refused_where_it_is_given(name):
    from tecb_eval.models.spec import model_spec

    with pytest.raises(UserError, match="control character"):
        model_spec({"spec": "tfidf-lsa", "name": name})


def test_a_model_folder_with_a_newline_in_its_name_is_refused(tmp_path):
    from tecb_eval.models.spec import model_spec

    folder = tmp_path / "model\nimport os"
    folder.mkdir()
    with pytest.raises(UserError, match="control character"):
        model_spec(str(folder))


def test_one_name_for_two_different_models_is_refused(demo_datasets, tmp_path):
    """Two models under one name= would be averaged into one row of every table."""
    from tecb_eval.grid.run import run_grid

    with pytest.raises(UserError, match="'twin' is given to two different models"):
        run_grid([demo_datasets / "blurbs-clustering-s2s"],
                 [{"spec": "tfidf-lsa", "name": "twin"}, {"spec": "minilm-l6", "name": "twin"}],
                 configurations=["minibatch_kmeans:none"], limit_splits=1, results=tmp_path / "r.jsonl",
                 progress=False)
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.slow
def test_a_model_missing_from_the_offline_cache_stops_the_run_before_any_encoding(demo_datasets, tmp_path):
    env = {**OFFLINE, "HF_HOME": str(tmp_path / "empty-hf-home")}
    data = str(demo_datasets / "blurbs-clustering-s2s")
    result = run_eval_cli("run", "--data", data, "--model", "minilm-l6", "--model", "nobody-has/this-model,layer=6",
                          "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"),
                          "--jobs", "2", env=env)
    line = one_error(result)
    assert "nobody-has/this-model" in line and "not in the local Hugging Face cache" in line, line
    assert "encoding" not in result.stderr and "leaked semaphore" not in result.stderr
    assert not (tmp_path / "r.jsonl").exists()
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))  # no embedding was computed
