"""Adaptive pre-training (whole word masking, TSDAE) on the benchmark's texts, with V-measure
tracked during training. Heavy libraries (torch, transformers) load only when training starts.

The function is also ``tecb_eval.pretrain``; this package is named ``pretraining`` so that the
function and the package never shadow each other.
"""

import importlib

# Loaded on first use: the command line reads METHODS from ``settings`` to print its help, and
# importing ``run`` with it (scikit-learn, the evaluation) took seconds before any page appeared.
_LAZY = {"TrainingDiverged": "tecb_eval.training.errors", "PretrainResult": "tecb_eval.pretraining.run",
         "PretrainRun": "tecb_eval.pretraining.run", "pretrain": "tecb_eval.pretraining.run",
         "DEFAULTS": "tecb_eval.pretraining.settings", "METHODS": "tecb_eval.pretraining.settings",
         "PretrainSettings": "tecb_eval.pretraining.settings", "settings_for": "tecb_eval.pretraining.settings"}

__all__ = ["DEFAULTS", "METHODS", "PretrainResult", "PretrainRun", "PretrainSettings", "TrainingDiverged", "pretrain",
           "settings_for"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
