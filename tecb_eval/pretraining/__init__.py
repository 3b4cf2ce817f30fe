"""Adaptive pre-training (whole word masking, TSDAE) on the benchmark's texts, with V-measure
tracked during training. Heavy libraries (torch, transformers) load only when training starts.

The function is also ``tecb_eval.pretrain``; this package is named ``pretraining`` so that the
function and the package never shadow each other.
"""

from tecb_eval.training.errors import TrainingDiverged
from tecb_eval.pretraining.run import PretrainResult, PretrainRun, pretrain
from tecb_eval.pretraining.settings import DEFAULTS, METHODS, PretrainSettings, settings_for

__all__ = ["DEFAULTS", "METHODS", "PretrainResult", "PretrainRun", "PretrainSettings", "TrainingDiverged", "pretrain",
           "settings_for"]
