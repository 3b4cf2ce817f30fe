"""One unit of training: one method, one fold, one seed. One instance per optimizer step (AdamW,
linear warm-up then linear decay, clipping), evaluated before training, every ``eval_every`` steps
and after the last: validation ARI chooses the checkpoint, the scored splits' V-measure is logged.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import Progress

from tecb_data import seeding
from tecb_data.errors import UserError
from tecb_eval.finetuning.instances import epoch_instances, valid_triples
from tecb_eval.finetuning.objectives import Objective
from tecb_eval.finetuning.scoring import tracking_scores
from tecb_eval.training.checkpoints import save_checkpoint
from tecb_eval.training.device import deterministic
from tecb_eval.training.errors import TrainingDiverged
from tecb_eval.training.optimiser import OptimiserStep, adamw
from tecb_eval.training.tracking import CsvLog, LiveSentenceTransformerEncoder

EVALUATION_FIELDS = ("method", "fold", "seed", "step", "epoch", "validation_ari", "scored_v_measure")
LOSS_FIELDS = ("method", "fold", "seed", "step", "epoch", "loss", "hac_errors", "learning_rate")


@dataclass
class UnitOutcome:
    steps: int = 0
    epoch_seconds: list = field(default_factory=list)  # training only, evaluations excluded
    dropped_instances: int = 0
    best: dict = field(default_factory=dict)  # step, epoch, validation_ari, scored_v_measure, path


def plan(fold, s, seed: int, method: str | None = None) -> list[list]:
    """Each epoch's instances, drawn up front: the schedule needs the number of steps. An instance
    that gives ``method`` nothing to train on (triplet: no triple to draw) is left out here and
    counted with the dropped ones, so that every step of the schedule is a step that trains."""
    epochs = []
    for epoch in range(s.epochs):
        instances, dropped = epoch_instances(fold.train, s.instance_size, seed, epoch, fold.name)
        kept = [i for i in instances if trains(i, method, s)]
        epochs.append((kept, dropped + len(instances) - len(kept)))
    return epochs


def check_trainable(fold, s, seed: int, method: str) -> list:
    """The unit's plan, or one line (before any work, when the command calls it first) when no
    instance gives the method anything to train on."""
    epochs = plan(fold, s, seed, method)
    if not any(instances for instances, _ in epochs):
        detail = (f"{s.triples_per_instance} random triples need a label that comes twice" if s.triples_per_instance
                  else f"1/{s.triple_fraction} of the valid triples needs {s.triple_fraction} or more")
        raise UserError(f"{method}, fold {fold.name}: no instance of {s.instance_size} texts gives a triple to train on "
                        f"({detail}); raise --instance-size (the paper's is 50)")
    return epochs


def trains(instance, method: str | None, s) -> bool:
    """Whether ``instance`` gives ``method`` a loss: triplet needs a triple (a label that comes
    twice; with the authors' fraction, at least ``triple_fraction`` valid triples, as they drew)."""
    if method != "triplet":
        return True
    if s.triples_per_instance is not None:
        return len(set(instance.labels)) < len(instance.labels)
    return len(valid_triples(instance)) >= s.triple_fraction


def train_unit(model, method: str, fold, s, seed: int, unit_dir: Path, *, device: str, progress: bool,
               info: dict) -> UnitOutcome:
    from transformers import get_linear_schedule_with_warmup

    epochs = check_trainable(fold, s, seed, method)
    per_epoch = [len(instances) for instances, _ in epochs]
    total = sum(per_epoch) if s.max_steps is None else min(sum(per_epoch), s.max_steps)
    outcome = UnitOutcome(dropped_instances=sum(d for _, d in epochs))
    evaluations = CsvLog(unit_dir / "evaluations.csv", EVALUATION_FIELDS)
    losses = CsvLog(unit_dir / "losses.csv", LOSS_FIELDS)
    encoder = LiveSentenceTransformerEncoder(model, batch_size=s.eval_batch_size)
    common = {"method": method, "fold": fold.name, "seed": seed}

    def evaluate(step: int, epoch: float) -> None:
        scores = tracking_scores(encoder, fold, s.kmeans_seed)
        evaluations.write({**common, "step": step, "epoch": round(epoch, 4), **scores})
        best = outcome.best
        if not best or scores["validation_ari"] > best["validation_ari"]:
            outcome.best = {"step": step, "epoch": round(epoch, 4), **scores, "path": None}
            if s.save_best:
                save_checkpoint(lambda folder: model.save(str(folder)), unit_dir / "best", "finetuning.json", {**info, "seed": seed, "chosen_by": "validation ARI",
                                                 **{k: v for k, v in outcome.best.items() if k != "path"}})
                outcome.best["path"] = "best"

    try:
        with deterministic(seed, device):
            optimizer = adamw(model, learning_rate=s.learning_rate, weight_decay=s.weight_decay, eps=s.adam_eps)
            scheduler = get_linear_schedule_with_warmup(optimizer, round(s.warmup_ratio * total), max(total, 1))
            stepper = OptimiserStep(model, optimizer, scheduler, max_grad_norm=s.max_grad_norm)
            objective = Objective(model, method, s, device)
            rng = seeding.rng(seed, "finetune", "triples", method, fold.name)
            evaluate(0, 0.0)
            step = 0
            # Plain lines in a log (tqdm wrote its \r frames there), one at least every 30 s of training.
            bar = Progress(total=total, enabled=progress, unit="steps", desc=f"{method} {fold.name} seed {seed}")
            beat = Heartbeat(bar).__enter__()
            for epoch, (instances, _) in enumerate(epochs):
                if step >= total:
                    break
                started, training = time.perf_counter(), 0.0
                model.train()
                for index, instance in enumerate(instances, start=1):
                    loss, errors = objective.loss(instance, rng)
                    value = float(loss.detach()) if loss is not None else float("nan")
                    if loss is not None:
                        if not math.isfinite(value):
                            raise TrainingDiverged(f"{method}, fold {fold.name}, seed {seed}: the loss is {value} at step "
                                                   f"{step + 1}; try a lower --learning-rate ({s.learning_rate:g})")
                        stepper.backward(loss)
                        stepper.clip()
                        stepper.apply()
                    learning_rate = stepper.advance()
                    step += 1
                    bar.update(1)
                    position = epoch + index / max(per_epoch[epoch], 1)
                    losses.write({**common, "step": step, "epoch": round(position, 4), "loss": value,
                                  "hac_errors": errors, "learning_rate": learning_rate})
                    if step % s.eval_every == 0 or step == total:
                        training += time.perf_counter() - started
                        evaluate(step, position)
                        model.train()
                        started = time.perf_counter()
                    if step >= total:
                        break
                training += time.perf_counter() - started
                outcome.epoch_seconds.append(training)
            beat.stop()
            bar.close()
            outcome.steps = step
    finally:
        if "beat" in locals():  # an error mid-training: the heartbeat's thread ends with the unit
            beat.stop()
        evaluations.close()
        losses.close()
    return outcome
