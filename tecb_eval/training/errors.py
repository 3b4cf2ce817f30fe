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


_DISK_FULL = (28, 122, 27)  # ENOSPC, EDQUOT, EFBIG


def write_failure(where, exc: BaseException) -> UserError | None:
    """A failed write of training output as one line (a full disk named as one), or None when
    ``exc`` is no write failure. safetensors reports the OS error inside its own exception type."""
    if isinstance(exc, OSError):
        full = exc.errno in _DISK_FULL
        reason = exc.strerror or str(exc)
    elif type(exc).__name__ == "SafetensorError":
        text = " ".join(str(exc).split())
        full = any(f"os error {code})" in text for code in _DISK_FULL)
        reason = text
    else:
        return None
    if full:
        return UserError(f"{where}: writing failed, the disk is full ({reason}); free space, then rerun the same "
                         "command: it resumes from the finished units")
    return UserError(f"{where}: writing failed ({reason}); make it writable or choose another --out, then rerun")
