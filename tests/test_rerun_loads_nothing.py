"""A rerun whose cells are all in the results store loads no model: the identity the store keys
its rows by is read from the model's files (their fingerprint and configuration), and the weights
are opened only where a cell is left to compute."""

from __future__ import annotations

import json
import shutil

import pytest

from tecb_eval.grid.run import run_grid
from tecb_eval.models import kinds
from tecb_eval.models.spec import known_identity, model_spec, open_model

CONFIG = ["minibatch_kmeans:none"]


def _run(data, model: str, tmp_path, lines: list | None = None):
    return run_grid([data], [model], configurations=CONFIG, limit_splits=1, results=tmp_path / "r.jsonl",
                    cache_dir=tmp_path / "cache", progress=False, jobs=1,
                    log=(lines.append if lines is not None else lambda m: None))


def _rows(frame) -> list[dict]:
    return frame.drop(columns=[c for c in frame.columns if c.endswith("_s")]).to_dict("records")


def test_a_rerun_on_a_finished_store_loads_no_model_and_a_changed_model_is_loaded(
        demo_datasets, tiny_sentence_transformer, tmp_path, monkeypatch):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    model = tmp_path / "model"
    shutil.copytree(tiny_sentence_transformer, model)
    first = _run(data, str(model), tmp_path)
    opened = kinds.pretrained.open_folder
    loads: list[str] = []

    def counted(folder, *args, **options):
        loads.append(str(folder))
        return opened(folder, *args, **options)

    monkeypatch.setattr(kinds.pretrained, "open_folder", counted)
    again = _run(data, str(model), tmp_path)
    assert loads == []
    assert _rows(again) == _rows(first)

    # Other files: another identity, whose cells are not stored; it is opened and computed.
    config = model / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": 16}))
    changed = _run(data, str(model), tmp_path)
    assert loads == [str(model)]
    assert set(changed["model_identity"]) == {open_model(model_spec(str(model)), 42).encoder.identity}
    assert set(changed["model_identity"]).isdisjoint(first["model_identity"])


@pytest.mark.parametrize("options", [{}, {"max_length": 64}, {"prompt": "Titel: "}, {"dtype": "bfloat16"}])
def test_the_identity_from_a_models_files_is_the_one_loading_gives(tiny_sentence_transformer, options):
    for spec in ("minilm-l6", str(tiny_sentence_transformer)):
        item = model_spec({"spec": spec, **options})
        assert known_identity(item) == open_model(item, 42).encoder.identity


def test_where_only_loading_tells_the_identity_is_not_guessed(tiny_bert):
    assert known_identity(model_spec("tfidf-lsa")) is None  # fitted per dataset
    assert known_identity(model_spec(str(tiny_bert))) is None  # a plain checkpoint, mean-pooled in torch
    assert known_identity(model_spec({"spec": "minilm-l6", "layer": 2})) is None
    assert known_identity(model_spec({"spec": "minilm-l6", "backend": "onnx"})) is None
