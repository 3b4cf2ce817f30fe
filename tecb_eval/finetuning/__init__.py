"""Supervised fine-tuning of an embedding model on a clustering metric: COB (Kashyapi & Dietz,
blackbox differentiation of average-linkage HAC) and its baselines (triplet, contrastive, the
ablations), trained and scored under leak-free protocols (leave one genre out, transfer).
Heavy libraries (torch, sentence-transformers) load only when training starts.

The function is also ``tecb_eval.finetune``.
"""

import importlib

# Loaded on first use: the command line reads PROTOCOLS from ``protocols`` to print its help, and
# importing ``run`` with it (scikit-learn, the evaluation) took seconds before any page appeared.
_LAZY = {"FinetuneResult": "tecb_eval.finetuning.run", "finetune": "tecb_eval.finetuning.run",
         "METHODS": "tecb_eval.finetuning.settings", "FinetuneSettings": "tecb_eval.finetuning.settings",
         "settings_for": "tecb_eval.finetuning.settings"}

__all__ = ["FinetuneResult", "FinetuneSettings", "METHODS", "finetune", "settings_for"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
