"""Where and how training computes: the device, mixed precision, deterministic kernels and the
seed of torch's global generator."""

from __future__ import annotations

import contextlib
import os

from tecb_data.errors import UserError


def resolve_device(requested: str | None) -> str:
    import torch

    if requested is None or requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {requested!r} asked for, but torch sees no CUDA GPU here; use --device cpu")
    return requested


def autocast_factory(precision: str, device: str):
    """A zero-argument context factory for the forward passes (None for fp32)."""
    import torch

    if precision == "fp32":
        return None
    device_type = device.split(":")[0]
    if precision == "fp16" and device_type != "cuda":
        raise UserError("precision fp16 needs a CUDA GPU; on CPU use bf16 or fp32")
    if precision == "bf16" and device_type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError("this GPU does not support bf16; use fp16 or fp32")
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)


@contextlib.contextmanager
def deterministic(seed: int, device: str):
    """Seed torch's global generator (dropout and the initialisation of new heads draw from it) and
    ask for deterministic kernels; the previous setting is restored afterwards."""
    import torch

    if device.startswith("cuda"):
        # cuBLAS is only deterministic with a fixed workspace; it must be set before its first use.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


def to_device(batch, device: str):
    if isinstance(batch, list):
        return [to_device(b, device) for b in batch]
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}
