"""Which prompt a model is encoded with on a task, chosen as MTEB chooses it.

MTEB's leaderboard encodes a sentence-transformers model with the prompt its wrapper picks from the
model's ``prompts`` for the task (``task name``, then ``task type`` such as ``Clustering``; a
clustering task asks for no query/document prompt type); where none fits, sentence-transformers
falls back to the model's ``default_prompt_name``. MTEB's own functions decide here
(:func:`mteb.models.abs_encoder.get_prompt_name` and its key validation), so a model's prompt is
the one MTEB would use, not our reading of its rules.

A prompt is part of an encoder's identity (:func:`identity_suffix`): the embedding cache, the
results store and the tables keep prompted and unprompted runs of one model apart. No prompt adds
nothing, so an identity without one is the identity the model had before prompts existed.
"""

from __future__ import annotations

import json
import warnings

from tecb_data.errors import UserError


def valid_prompts(prompts: dict | None) -> dict | None:
    """``prompts`` less the keys MTEB would ignore (neither a task, a task type nor a prompt type),
    validated by MTEB's own check, as its sentence-transformers wrapper does on loading."""
    if not prompts:
        return None
    from mteb.models.abs_encoder import AbsEncoder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MTEB warns per ignored key; the choice is what matters here
        valid, _ = AbsEncoder.validate_task_to_prompt_name(dict(prompts), raise_for_invalid_keys=False)
    return valid or None


def mteb_prompt(prompts: dict | None, default_prompt_name: str | None, task_metadata) -> str | None:
    """The prompt text MTEB's sentence-transformers wrapper encodes a clustering task with: the
    model prompt MTEB picks for the task, else the model's default prompt (sentence-transformers'
    own fallback when MTEB passes none), else None."""
    from mteb.models.abs_encoder import get_prompt_name

    valid = valid_prompts(prompts)
    name = get_prompt_name(valid, task_metadata, None) if valid else None
    if name is not None:
        return valid[name]
    if default_prompt_name and prompts and prompts.get(default_prompt_name):
        return prompts[default_prompt_name]
    return None


def named_prompt(prompts: dict | None, name: str, model: str) -> str:
    """The prompt called ``name`` in the model's configuration, or one line naming what it has."""
    if not prompts or name not in prompts:
        have = ", ".join(sorted(prompts)) if prompts else "none"
        raise UserError(f"model {model}: has no prompt named {name!r} (its prompts: {have}); give the prompt "
                        "text with prompt=TEXT, or a name from its config_sentence_transformers.json")
    return prompts[name] or ""


def identity_suffix(prompt: str | None) -> str:
    """What a prompt adds to an encoder's identity: nothing without one, else the exact text."""
    return "" if not prompt else f"|prompt={json.dumps(prompt, ensure_ascii=False)}"
