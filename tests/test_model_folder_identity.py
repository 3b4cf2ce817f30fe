"""A model folder's identity (the fingerprint in rows, caches and a warm worker's key) covers
every file a load reads, through symlinked files and symlinked subfolders."""

import json
import os
import shutil
from pathlib import Path

from tecb_eval.models.kinds.common import folder_digest
from tecb_eval.models.kinds.pretrained import resolve_model


def _set_pooling(folder: Path, mode: str) -> None:
    config = folder / "config.json"
    settings = json.loads(config.read_text())
    for key in [k for k in settings if k.startswith("pooling_mode_")]:
        settings[key] = False
    settings[f"pooling_mode_{mode}_token"] = True
    config.write_text(json.dumps(settings))


def _pooling_folder(model: Path) -> str:
    return next(m["path"] for m in json.loads((model / "modules.json").read_text()) if m["type"].endswith("Pooling"))


def test_a_symlinked_module_folder_is_part_of_the_identity(tiny_sentence_transformer, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_sentence_transformer, model)
    pooling = _pooling_folder(model)
    outside = tmp_path / "elsewhere" / "pooling"
    outside.parent.mkdir()
    shutil.move(model / pooling, outside)
    os.symlink(outside, model / pooling)
    before = resolve_model(str(model))[1]
    assert folder_digest(model) == folder_digest(tiny_sentence_transformer)  # a link reads as the folder it names

    _set_pooling(outside, "cls")
    assert resolve_model(str(model))[1] != before


def test_a_symlinked_weights_file_and_a_linked_folder_above_are_read_through(tiny_sentence_transformer, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_sentence_transformer, model)
    os.symlink(model, model / "loop")  # a cycle: the walk must end
    weights = next(p for p in model.rglob("*.safetensors"))
    moved = tmp_path / "weights.safetensors"
    shutil.move(weights, moved)
    os.symlink(moved, weights)
    before = folder_digest(model)
    assert before == folder_digest(tiny_sentence_transformer)

    moved.write_bytes(moved.read_bytes()[:-1] + b"\0")
    assert folder_digest(model) != before


def test_a_model_inside_a_cache_folder_is_hashed_by_its_files(tiny_sentence_transformer, tmp_path):
    model = tmp_path / ".cache" / "models" / "model"
    shutil.copytree(tiny_sentence_transformer, model)
    before = folder_digest(model)
    _set_pooling(model / _pooling_folder(model), "cls")
    assert folder_digest(model) != before
