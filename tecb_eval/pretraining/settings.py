"""Training settings of the two adaptive pre-training methods, with the paper's defaults.

Every field can be overridden by name; ``None`` in an override means "the method's default". A
profile (``tecb_eval.clustering.profiles``) changes some defaults: the ``paper`` profile trains TSDAE for 30
epochs and evaluates it on sentence-transformers 2.2's schedule, as the authors' script did.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED

METHODS = ("wwm", "tsdae")
PRECISIONS = ("fp32", "fp16", "bf16")
POOLINGS = ("mean", "cls", "max")
# "global": every eval_every optimizer steps counted from the start, plus the last step.
# "per-epoch": eval_every counted from each epoch's start, plus the end of every epoch: what
# sentence-transformers 2.2's fit did (its step counter restarts each epoch), so the authors' TSDAE
# was evaluated at each epoch's end (Blurbs S2S from the dev set: 231 steps an epoch, under 512).
EVAL_SCHEDULES = ("global", "per-epoch")


@dataclass(frozen=True)
class PretrainSettings:
    method: str  # "wwm" (whole-word masking) or "tsdae"
    epochs: int  # passes over the training texts (WWM 30, TSDAE 1; the paper profile's TSDAE 30)
    learning_rate: float  # peak learning rate of AdamW (WWM 1e-4, TSDAE 3e-5)
    weight_decay: float  # AdamW's decoupled weight decay (WWM 0.01, TSDAE 0)
    batch_size: int  # texts per forward pass (WWM 32, TSDAE 8)
    grad_accumulation: int  # forward passes per optimizer step (WWM 8: 256 texts a step)
    warmup_ratio: float  # share of all optimizer steps spent warming up, then constant
    max_length: int  # tokens, clipped to the model's position embeddings
    eval_every: int  # optimizer steps between evaluations (the last step is always evaluated)
    eval_schedule: str = "global"  # one of EVAL_SCHEDULES
    mlm_probability: float = 0.15  # WWM: share of words masked
    deletion_ratio: float = 0.6  # TSDAE: share of words deleted (the TSDAE paper's best)
    # TSDAE: what the decoder sees of the sentence. Mean, because evaluation mean-pools too; the
    # TSDAE paper preferred CLS for its own (retrieval) evaluation.
    pooling: str = "mean"
    max_steps: int | None = None  # stop after this many optimizer steps (None: all epochs)
    # Keep only the model's first k layers and train that (Rep et al. 2024's truncated-model
    # fine-tuning); None: the whole model. Checked against the model in pretraining.truncate.
    truncate_at: int | None = None
    max_grad_norm: float = 1.0  # the transformers Trainer's default clipping
    eval_batch_size: int = 32  # the grid's: evaluations then give its vectors bit for bit
    kmeans_seed: int = DEFAULT_SEED  # MiniBatchKMeans random_state, as in the paper
    precision: str = "fp32"  # training arithmetic: fp32, fp16 or bf16 (mixed precision); evaluations stay fp32
    device: str | None = None  # None: CUDA when present, else CPU
    save_best: bool = True  # keep each seed's best checkpoint by V-measure (False: scores only)


DEFAULTS: dict[str, dict] = {
    # The paper's WWM: lr 1e-4, weight decay 0.01, 32 x 8 per step, constant after 6 % warm-up.
    "wwm": dict(epochs=30, learning_rate=1e-4, weight_decay=0.01, batch_size=32, grad_accumulation=8,
                warmup_ratio=0.06, max_length=512, eval_every=25),
    # The paper's TSDAE: batch 8, lr 3e-5 constant, no weight decay, tied decoder.
    "tsdae": dict(epochs=1, learning_rate=3e-5, weight_decay=0.0, batch_size=8, grad_accumulation=1,
                  warmup_ratio=0.0, max_length=512, eval_every=512),
}

FIELD_NAMES = tuple(f.name for f in fields(PretrainSettings) if f.name != "method")


def profile_defaults(method: str, profile) -> dict:
    """What ``profile`` changes in ``method``'s defaults (a :class:`tecb_eval.clustering.profiles.Profile`)."""
    if method != "tsdae":
        return {}
    return {"epochs": profile.tsdae_epochs, "eval_schedule": profile.tsdae_eval_schedule}


def settings_for(method: str, profile=None, **overrides) -> PretrainSettings:
    """The method's defaults under ``profile`` (a name or a Profile; None: the default profile) with
    ``overrides`` applied (``None`` values are ignored), validated."""
    from tecb_eval.clustering.profiles import get_profile

    if method not in METHODS:
        raise UserError(f"unknown pre-training method {method!r}; choose one of {', '.join(METHODS)}")
    profile = get_profile(profile)
    unknown = sorted(k for k in overrides if k not in FIELD_NAMES)
    if unknown:
        raise TypeError(f"unknown pre-training setting(s) {', '.join(unknown)}; known: {', '.join(FIELD_NAMES)}")
    base = PretrainSettings(method=method, **{**DEFAULTS[method], **profile_defaults(method, profile)})
    settings = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    validate(settings)
    return settings


def _option(name: str) -> str:
    """The `tecb-eval pretrain` option of a setting, for messages that name the keyword first."""
    return f"(--{name.replace('_', '-')})"


def validate(s: PretrainSettings) -> None:
    def positive(name: str) -> None:
        value = getattr(s, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
            raise UserError(f"{name} must be a positive integer, got {value!r} {_option(name)}")

    def number(name: str, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> None:
        # NaN fails every comparison and inf every bound, so neither slips through to the
        # optimizer, where they would only show up as a NaN loss (or nothing at all) much later.
        value = getattr(s, name)
        is_number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        inside = is_number and math.isfinite(value) and (low < value if low_open else low <= value) \
            and (value < high if high_open else value <= high)
        if not inside:
            span = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
            raise UserError(f"{name} must be a finite number in {span}, got {value!r} {_option(name)}")

    for name in ("epochs", "batch_size", "grad_accumulation", "max_length", "eval_every", "eval_batch_size", "max_steps",
                 "truncate_at"):
        positive(name)
    # Fine-tuning a pre-trained transformer with AdamW: a learning rate above 1 (or a weight
    # decay above 1, which shrinks every weight by learning_rate x weight_decay a step) destroys
    # the model in its first steps rather than adapting it.
    number("learning_rate", 0, 1, low_open=True)
    number("weight_decay", 0, 1)
    number("max_grad_norm", 0, math.inf, low_open=True, high_open=True)
    for name in ("warmup_ratio", "mlm_probability", "deletion_ratio"):
        number(name, 0, 1, high_open=True)
    if s.mlm_probability == 0:
        raise UserError(f"mlm_probability must be above 0 {_option('mlm_probability')}: with nothing masked there "
                        "is nothing to learn")
    if s.precision not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {s.precision!r}")
    if s.eval_schedule not in EVAL_SCHEDULES:
        raise UserError(f"eval_schedule must be one of {', '.join(EVAL_SCHEDULES)}, got {s.eval_schedule!r} "
                        f"{_option('eval_schedule')}")
    if s.pooling not in POOLINGS:
        raise UserError(f"pooling must be one of {', '.join(POOLINGS)}, got {s.pooling!r} {_option('pooling')}")


def as_dict(s: PretrainSettings) -> dict:
    return asdict(s)
