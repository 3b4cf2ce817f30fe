"""One seed's training: seeded data order, gradient accumulation, warm-up then constant learning
rate, optional mixed precision, and an evaluation every ``eval_every`` optimizer steps."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import Progress
from tecb_eval.pretraining.settings import PretrainSettings
from tecb_eval.training.data import epoch_order
from tecb_eval.training.device import to_device
from tecb_eval.training.errors import NonFiniteVectors, TrainingDiverged
from tecb_eval.training.optimiser import OptimiserStep, adamw


@dataclass
class Schedule:
    micro_batches_per_epoch: int
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int

    @classmethod
    def of(cls, n_texts: int, s: PretrainSettings) -> "Schedule":
        micro = math.ceil(n_texts / s.batch_size)
        per_epoch = math.ceil(micro / s.grad_accumulation)
        total = per_epoch * s.epochs
        if s.max_steps is not None:
            total = min(total, s.max_steps)
        return cls(micro, per_epoch, total, round(s.warmup_ratio * total))


def diverged(settings: PretrainSettings, *, step: int, total_steps: int, seed: int, label: str, what: str,
             tracker) -> TrainingDiverged:
    """The one-line error of a run that diverged at optimizer step ``step``, naming what is kept."""
    where = f"seed {seed}, {label}" if label else f"seed {seed}"
    best = tracker.best.get(seed)
    if best is not None and best.get("path"):
        kept = (f"the evaluations so far and this seed's best checkpoint before it (step {best['step']}, "
                f"V-measure {100 * best['v_measure']:.2f}) are in {tracker.workdir / best['path']}, until the next "
                "pretrain into the same --out")
    else:
        kept = f"the evaluations so far are in {tracker.workdir}, until the next pretrain into the same --out"
    return TrainingDiverged(
        f"training diverged at step {step} of {total_steps} ({where}): {what}; nothing was published to --out, "
        f"{kept}; try a lower --learning-rate (this run: {settings.learning_rate:g})"
        + (" or --precision fp32" if settings.precision != "fp32" else ""))


@dataclass
class SeedOutcome:
    seed: int
    epoch_seconds: list[float] = field(default_factory=list)  # training only, evaluations excluded
    steps: int = 0


def evaluation_due(settings: PretrainSettings, step: int, step_in_epoch: int, end_of_epoch: bool,
                   total_steps: int) -> bool:
    """Whether the model is evaluated after optimizer step ``step`` (``step_in_epoch`` within its epoch)."""
    if step == total_steps:
        return True
    if settings.eval_schedule == "per-epoch":
        return step_in_epoch % settings.eval_every == 0 or end_of_epoch
    return step % settings.eval_every == 0


def train_seed(objective, texts: list[str], settings: PretrainSettings, seed: int, schedule: Schedule,
               evaluate, tracker, *, device: str, autocast, progress: bool, label: str = "") -> SeedOutcome:
    """Train ``objective`` on ``texts``; ``evaluate(step, epoch)`` is called as ``settings.eval_schedule``
    says and after the last step. ``label`` (e.g. the dataset's name) heads the progress bar."""
    from transformers import get_constant_schedule_with_warmup

    module = objective.module
    optimizer = adamw(module, learning_rate=settings.learning_rate, weight_decay=settings.weight_decay)
    scheduler = get_constant_schedule_with_warmup(optimizer, schedule.warmup_steps)
    stepper = OptimiserStep(module, optimizer, scheduler, max_grad_norm=settings.max_grad_norm,
                            fp16=settings.precision == "fp16")
    outcome = SeedOutcome(seed)
    step = 0
    module.train()
    for epoch in range(settings.epochs):
        if step >= schedule.total_steps:
            break
        order = epoch_order(len(texts), seed, "pretrain", settings.method, epoch=epoch)
        chunks = [order[i:i + settings.batch_size] for i in range(0, len(order), settings.batch_size)]
        groups = [chunks[i:i + settings.grad_accumulation] for i in range(0, len(chunks), settings.grad_accumulation)]
        bar = Progress(total=min(len(groups), schedule.total_steps - step), enabled=progress, unit="steps",
                       desc=f"{label + ' ' if label else ''}seed {seed}: {settings.method.upper()} "
                        f"epoch {epoch + 1}/{settings.epochs}")
        # A line at least every 30 s while one step (or an evaluation) holds the loop; the beat ends
        # with the bar (Progress.close, on every way out of the epoch).
        Heartbeat(bar).__enter__()
        training = 0.0
        started = time.perf_counter()
        for step_in_epoch, group in enumerate(groups, start=1):
            losses = []
            for chunk in group:
                batch = to_device(objective.make_batch([texts[i] for i in chunk]), device)
                with autocast() if autocast else contextlib.nullcontext():
                    loss = objective.loss(batch)
                if loss is None:
                    continue
                value = float(loss.detach())
                # A NaN or infinite loss is an overflow of the forward pass, which no step can repair:
                # in fp32 and bf16 it would carry into every weight, and fp16's GradScaler (which
                # handles overflowing gradients, not losses) would skip every step from here on.
                if not math.isfinite(value):
                    tracker.loss(seed, step + 1, (step + 1) / schedule.steps_per_epoch, value,
                                 stepper.learning_rate)
                    bar.close()
                    raise diverged(settings, step=step + 1, total_steps=schedule.total_steps, seed=seed, label=label,
                                   what=f"the loss is {value}", tracker=tracker)
                # The mean over the group's micro-batches: one step of batch_size x grad_accumulation.
                stepper.backward(loss / len(group))
                losses.append(value)
            if losses:
                norm = stepper.clip()
                # Clipping by a NaN or infinite norm gives NaN or zero gradients: the weights would
                # turn NaN, or silently stop changing. fp16's GradScaler skips such a step itself.
                if not math.isfinite(norm) and not stepper.skips_overflows:
                    tracker.loss(seed, step + 1, (step + 1) / schedule.steps_per_epoch, sum(losses) / len(losses),
                                 stepper.learning_rate)
                    bar.close()
                    raise diverged(settings, step=step + 1, total_steps=schedule.total_steps, seed=seed, label=label,
                                   what=f"the gradients' norm is {norm}", tracker=tracker)
                stepper.apply()
            learning_rate = stepper.advance()
            step += 1
            bar.update(1)
            epoch_position = step / schedule.steps_per_epoch
            mean_loss = sum(losses) / len(losses) if losses else float("nan")
            tracker.loss(seed, step, epoch_position, mean_loss, learning_rate)
            bar.set_postfix(loss=f"{mean_loss:.4f}")
            if evaluation_due(settings, step, step_in_epoch, step_in_epoch == len(groups), schedule.total_steps):
                training += time.perf_counter() - started
                bar.status(f"evaluating step {step}", working=False)  # kept out of the steps' ETA
                try:
                    evaluate(step, epoch_position)
                except NonFiniteVectors as exc:
                    bar.close()
                    raise diverged(settings, step=step, total_steps=schedule.total_steps, seed=seed, label=label,
                                   what=f"the evaluation's vectors are not finite ({exc})", tracker=tracker) from None
                started = time.perf_counter()
                bar.status(f"loss {mean_loss:.4f}")
            if step >= schedule.total_steps:
                break
        training += time.perf_counter() - started
        bar.close()
        outcome.epoch_seconds.append(training)
    outcome.steps = step
    return outcome
