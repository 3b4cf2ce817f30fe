"""Fine-tuning settings. The defaults are what the COB paper (Kashyapi & Dietz, RepL4NLP 2021) and
its authors' code (github.com/nihilistsumo/Blackbox_clustering: ``experiments/ng20_run.py``,
``experiments/train_model.py``, ``model/BBCluster.py``) set, except where a comment says otherwise:

- AdamW, lr 2e-5, weight decay 0.01, eps 1e-6 (``transformers.AdamW``'s default, which their
  ``fit`` used), 10 % linear warm-up then linear decay (``WarmupLinear``), gradient clipping 1;
- 1 epoch (``-ep 1``), an evaluation on the validation instances every 100 steps (``-es 100``) and
  after each epoch, the best checkpoint by validation ARI;
- one clustering instance of 50 texts per step (``-np 50``, ``-bt 1``);
- lambda 90 and r 1.0: their tuned 20 Newsgroups values, the topical setting closest to ours (the
  scripts' own defaults, ``-lm 200 -rg 2.5``, were the search's starting point);
- the regulariser's same-cluster mean counts each text's pair with itself (their ``true_adj_mat``
  sets ``i == j`` to 1), at distance 0;
- triplet: 1/25 of each instance's valid triples (``-tf 25``, ``get_frac_triples``).

The options that restore this package's earlier choices (``adam_eps=1e-8``, ``epochs=2``,
``eval_every=10``, ``triples_per_instance=50``, ``self_pairs=False``) are kept for reruns of
earlier results.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.grid.seeds import check_seed

# cob: the paper's loss; cob-r0: without the regulariser; reg-only: the regulariser alone;
# triplet: sentence-transformers' TripletLoss on triples drawn inside each instance (their
# baseline); contrastive: sentence-transformers' BatchAllTripletLoss, label-aware and in-batch.
METHODS = ("cob", "cob-r0", "reg-only", "triplet", "contrastive")
BASELINE = "none"  # the model without training, in tables and comparisons


@dataclass(frozen=True)
class FinetuneSettings:
    lambda_: float = 90.0  # COB's blackbox step lambda (`--lambda`; the paper's 20 Newsgroups value), above 0
    reg: float = 1.0  # COB's regulariser weight r (the paper's 20 Newsgroups value)
    epochs: int = 1  # the authors' -ep
    instance_size: int = 50  # texts per clustering instance (the authors' -np)
    learning_rate: float = 2e-5  # AdamW's learning rate, linear decay after the warm-up
    weight_decay: float = 0.01  # AdamW's decoupled weight decay
    warmup_ratio: float = 0.1  # share of the optimizer steps spent warming up
    max_grad_norm: float = 1.0  # gradient clipping norm
    eval_every: int = 100  # optimizer steps between evaluations (plus before training and after the last); -es
    max_steps: int | None = None  # stop after this many optimizer steps (None: all epochs)
    adam_eps: float = 1e-6  # transformers.AdamW's default, which the authors' fit used (torch's is 1e-8)
    # Triplet: each instance gives len(valid triples) // triple_fraction of its valid triples (the
    # authors' -tf). triples_per_instance, when set, draws that many at random instead (earlier default 50).
    triple_fraction: int = 25
    triples_per_instance: int | None = None  # see triple_fraction; None: use triple_fraction
    self_pairs: bool = True  # the regulariser's same-cluster mean counts the self pairs (the authors')
    max_length: int | None = None  # None: the model's own
    eval_batch_size: int = 32  # the grid's
    kmeans_seed: int = DEFAULT_SEED  # MiniBatchKMeans random_state of the evaluations during training
    device: str | None = None  # None: CUDA when present, else CPU
    save_best: bool = True  # keep each unit's checkpoint of best validation ARI (False: scores only)


FIELD_NAMES = tuple(f.name for f in fields(FinetuneSettings))


def _option(name: str) -> str:
    return "--lambda" if name == "lambda_" else "--" + name.replace("_", "-")


def settings_for(**overrides) -> FinetuneSettings:
    unknown = sorted(k for k in overrides if k not in FIELD_NAMES)
    if unknown:
        raise TypeError(f"unknown fine-tuning setting(s) {', '.join(unknown)}; known: {', '.join(FIELD_NAMES)}")
    s = replace(FinetuneSettings(), **{k: v for k, v in overrides.items() if v is not None})
    validate(s)
    return s


def validate(s: FinetuneSettings) -> None:
    for name in ("epochs", "instance_size", "eval_every", "max_steps", "triple_fraction", "triples_per_instance",
                 "max_length", "eval_batch_size"):
        value = getattr(s, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
            raise UserError(f"{name} must be a positive integer, got {value!r} ({_option(name)})")

    def number(name, low, high, low_open=False):
        value = getattr(s, name)
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
            and (value > low if low_open else value >= low) and value <= high
        if not ok:
            raise UserError(f"{name.rstrip('_')} must be a finite number {'above' if low_open else 'at least'} {low:g}"
                            f"{'' if high == math.inf else f' and at most {high:g}'}, got {value!r} ({_option(name)})")

    number("lambda_", 0, math.inf, low_open=True)
    number("reg", 0, math.inf)
    number("learning_rate", 0, 1, low_open=True)
    number("weight_decay", 0, 1)
    number("warmup_ratio", 0, 0.999)
    number("max_grad_norm", 0, math.inf, low_open=True)
    number("adam_eps", 0, 1, low_open=True)
    if not isinstance(s.self_pairs, bool):
        raise UserError(f"self_pairs must be True or False, got {s.self_pairs!r} (--regulariser-without-self-pairs)")
    # A seed is what numpy, scikit-learn and torch take (the grid's rule), named by its option here.
    check_seed(s.kmeans_seed, f"kmeans_seed ({_option('kmeans_seed')})")
    if s.instance_size < 4:
        raise UserError(f"instance_size must be at least 4 (two labels with two texts each), got {s.instance_size} "
                        "(--instance-size)")


def for_method(s: FinetuneSettings, method: str) -> FinetuneSettings:
    """The settings a method trains with: r = 0 for cob-r0."""
    return replace(s, reg=0.0) if method == "cob-r0" else s


def as_dict(s: FinetuneSettings) -> dict:
    out = asdict(s)
    out["lambda"] = out.pop("lambda_")
    return out
