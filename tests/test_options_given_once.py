"""An option runs as given or is refused: a key repeated inside a model spec, and an option that
another makes meaningless, are one line and exit 2, never the last value or one option ignored."""

from __future__ import annotations

import pytest

from helpers import one_line_error, run_args, run_cli_here


@pytest.mark.parametrize("model", ["tfidf-lsa,name=a,name=b", "minilm-l6,max_length=64,max_length=256",
                                   "minilm-l6,layer=2,layer=3", "minilm-l6,dtype=float32,dtype=bfloat16"])
def test_an_option_repeated_inside_a_model_spec_is_one_line(demo_datasets, tmp_path, capsys, model):
    key = model.split(",")[1].split("=")[0]
    argv = run_args(demo_datasets / "tenkgnad-clustering-s2s", tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("--model") + 1] = model
    error = one_line_error(capsys, argv)
    assert f"{key}= given more than once" in error and repr(model) in error
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "cache").exists()


def test_algorithm_or_reduction_beside_config_is_one_line(demo_datasets, tmp_path, capsys):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    for extra, named in ((["--algorithm", "hdbscan"], "--algorithm"), (["--reduction", "umap"], "--reduction")):
        error = one_line_error(capsys, run_args(data, tmp_path / "r.jsonl", tmp_path / "cache", *extra))
        assert "--config names the exact configurations" in error and f"{named} beside it would be ignored" in error
    assert not (tmp_path / "r.jsonl").exists()


def test_input_split_for_a_table_file_is_one_line(tmp_path):
    table = tmp_path / "x.csv"
    table.write_text("text,label\n" + "".join(f"Ein Text Nummer {i},{'ab'[i % 2]}\n" for i in range(40)))
    done = run_cli_here("build", "--source", "table", "--input", str(table), "--name", "x", "--text", "text",
                        "--label", "label", "--input-split", "train", "--out", str(tmp_path / "out"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--input-split train" in lines[0] and "leave --input-split out" in lines[0]
    assert not (tmp_path / "out").exists()


def test_every_model_option_the_error_names_is_one_the_parser_takes(demo_datasets, tmp_path, capsys):
    """The options a kind's error lists are options `--model` parses: tfidf-lsa's own are taken,
    and what it refuses names them."""
    from tecb_eval.cli.options import parse_model

    assert parse_model("tfidf-lsa,max_features=10,n_components=8") == {"spec": "tfidf-lsa", "max_features": 10,
                                                                        "n_components": 8}
    argv = run_args(demo_datasets / "tenkgnad-clustering-s2s", tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("--model") + 1] = "tfidf-lsa,layer=3"
    error = one_line_error(capsys, argv)
    assert "does not take layer=3" in error and "max_features, n_components" in error
