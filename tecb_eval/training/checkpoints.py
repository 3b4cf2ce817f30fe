"""Checkpoints on disk: a folder written whole under a temporary name and then renamed, so that a
reader never sees half a checkpoint; and the library versions a run's record names."""

from __future__ import annotations

import json
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable


def replace_folder(source: Path, target: Path) -> None:
    """Move ``source`` to ``target``, replacing a previous ``target`` without a moment when neither exists."""
    old = target.with_name(target.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    source.rename(target)
    if old.exists():
        shutil.rmtree(old)


def save_checkpoint(save: Callable[[Path], None], target: Path, record_name: str, record: dict) -> None:
    """``save(folder)`` writes the model into a fresh ``<target>.partial``; ``record`` is written
    beside it as ``record_name`` (JSON), and the folder then replaces ``target``."""
    from tecb_eval.training.errors import write_failure

    temporary = target.with_name(target.name + ".partial")
    try:
        if temporary.exists():
            shutil.rmtree(temporary)
        temporary.mkdir(parents=True)
        _save_quietly(save, temporary)
        drop_loading_options(temporary)
        (temporary / record_name).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        replace_folder(temporary, target)
    except Exception as exc:
        # A checkpoint is whole or absent: the part written goes, and a full disk is one line.
        shutil.rmtree(temporary, ignore_errors=True)
        failure = write_failure(f"checkpoint {target}", exc)
        if failure is None:
            raise
        raise failure from None


# What transformers keeps of how a tokenizer was read and writes back into its tokenizer_config.json:
# with HF_HUB_OFFLINE=1 it forces local_files_only=True, so the same training wrote other bytes
# offline than online. It says nothing of the tokenizer, and a checkpoint's bytes must not depend on it.
LOADING_OPTIONS = ("local_files_only",)


def drop_loading_options(folder: Path) -> None:
    """Remove :data:`LOADING_OPTIONS` from every tokenizer_config.json under ``folder``, rewritten as
    transformers writes it (sorted keys, indent 2, UTF-8, a final newline)."""
    for config in sorted(Path(folder).rglob("tokenizer_config.json")):
        data = json.loads(config.read_text(encoding="utf-8"))
        if isinstance(data, dict) and any(option in data for option in LOADING_OPTIONS):
            for option in LOADING_OPTIONS:
                data.pop(option, None)
            config.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _save_quietly(save: Callable[[Path], None], folder: Path) -> None:
    from transformers.utils import logging as hf_logging

    # The "Writing model shards" bar would break into the training bar; it comes back afterwards.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        save(folder)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def library_versions() -> dict:
    """The versions a training run's record names (pretraining and finetuning share it)."""
    found = {}
    for dist in ("torch", "transformers", "sentence-transformers", "scikit-learn", "tecb"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "unknown"
    return found
