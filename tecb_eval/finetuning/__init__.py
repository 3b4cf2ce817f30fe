"""Supervised fine-tuning of an embedding model on a clustering metric: COB (Kashyapi & Dietz,
blackbox differentiation of average-linkage HAC) and its baselines (triplet, contrastive, the
ablations), trained and scored under leak-free protocols (leave one genre out, transfer).
Heavy libraries (torch, sentence-transformers) load only when training starts.

The function is also ``tecb_eval.finetune``.
"""

from tecb_eval.finetuning.run import FinetuneResult, finetune
from tecb_eval.finetuning.settings import METHODS, FinetuneSettings, settings_for

__all__ = ["FinetuneResult", "FinetuneSettings", "METHODS", "finetune", "settings_for"]
