"""What stops a training run: numbers that are not finite."""

from __future__ import annotations

from tecb_data.errors import UserError


class TrainingDiverged(UserError):
    """Training produced numbers that are not finite (a loss, a gradient norm, the vectors of an
    evaluation): the model cannot recover, so the run stops there instead of training and
    evaluating a broken model (k-means cannot cluster NaN)."""


class NonFiniteVectors(ArithmeticError):
    """An evaluation's encoder gave NaN or infinite vectors (raised by the tracker, turned into
    :class:`TrainingDiverged` by the loop, which knows the step, seed and dataset)."""

    def __init__(self, count: int, total: int):
        super().__init__(f"{count} of {total} vectors are not finite")
        self.count, self.total = count, total
