"""The optimiser both kinds of training use: AdamW over two parameter groups, and its step."""

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


class OptimiserStep:
    """One optimizer step as both kinds of training take it: the losses' backward passes (scaled
    for fp16 by torch's ``GradScaler``; unscaled otherwise), the gradients clipped to
    ``max_grad_norm``, AdamW's step, then the gradients zeroed and the learning-rate schedule
    moved on. The steps are apart so that a caller can stop between them (a norm that is not
    finite) with nothing applied."""

    def __init__(self, module, optimizer, scheduler, *, max_grad_norm: float, fp16: bool = False):
        import torch

        self.module, self.optimizer, self.scheduler = module, optimizer, scheduler
        self.max_grad_norm = max_grad_norm
        self.scaler = torch.amp.GradScaler("cuda", enabled=fp16)

    @property
    def learning_rate(self) -> float:
        """The learning rate the next step applies."""
        return self.scheduler.get_last_lr()[0]

    @property
    def skips_overflows(self) -> bool:
        """Whether a step whose gradients overflowed is skipped by the scaler (fp16) rather than taken."""
        return self.scaler.is_enabled()

    def backward(self, loss) -> None:
        self.scaler.scale(loss).backward()

    def clip(self) -> float:
        """The gradients unscaled and clipped to ``max_grad_norm``; their norm before clipping."""
        import torch

        self.scaler.unscale_(self.optimizer)
        return float(torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.max_grad_norm))

    def apply(self) -> None:
        """AdamW's step on the clipped gradients (the scaler skips one that overflowed in fp16)."""
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def advance(self) -> float:
        """The gradients zeroed and the schedule moved on; the learning rate the step used."""
        self.optimizer.zero_grad(set_to_none=True)
        learning_rate = self.learning_rate
        self.scheduler.step()
        return learning_rate
