"""Checking a torch device name before a model is loaded on it (grid encoders and pre-training)."""

from __future__ import annotations

from tecb_data.errors import UserError

# Where our models run; torch parses more names (meta, xla, ...), none of which they run on here.
USABLE = ("cpu", "cuda", "mps")


def check_device(device: str | None, *, option: str = "--device") -> str | None:
    """``device`` as given if torch can run our models there now (None: choose automatically);
    otherwise one line naming it and what is usable on this machine."""
    if device is None or device == "auto":
        return device
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    usable = ["cpu"]
    if torch.cuda.is_available():
        usable += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        usable.append("mps")
    if parsed is None or parsed.type not in USABLE:
        raise UserError(f"{option} {device}: not a device torch can run the model on; use one of {', '.join(usable)}")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{option} {device}: torch sees no CUDA GPU here; use {', '.join(usable)}")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise UserError(f"{option} {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s); "
                        f"use one of {', '.join(usable)}")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"{option} {device}: torch has no MPS (Apple GPU) backend here; use {', '.join(usable)}")
    return device
