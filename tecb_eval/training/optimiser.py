"""The optimiser both kinds of training use: AdamW over two parameter groups."""

from __future__ import annotations

# torch.optim.AdamW's own default, which the transformers Trainer (the authors' WWM) also uses.
TORCH_ADAMW_EPS = 1e-8


def parameter_groups(module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only, not on biases and normalisation weights (as the transformers
    Trainer does). Shared (tied) parameters appear once."""
    decay, no_decay = [], []
    for parameter in module.parameters():  # parameters() yields each shared tensor once
        if parameter.requires_grad:
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def adamw(module, *, learning_rate: float, weight_decay: float, eps: float = TORCH_ADAMW_EPS):
    """AdamW over ``module``'s trainable parameters, weight decay on its matrices only."""
    import torch

    return torch.optim.AdamW(parameter_groups(module, weight_decay), lr=learning_rate, eps=eps)
