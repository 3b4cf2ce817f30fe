"""COB's four settings follow the paper and its authors' code by default (Kashyapi & Dietz 2021;
github.com/nihilistsumo/Blackbox_clustering), each with an option that gives the other behaviour:

- the triplet baseline trains on 1/25 of each instance's valid triples (``get_frac_triples`` in
  their ``experiments/ng20_run.py``), not 50 random ones;
- AdamW's eps is 1e-6 (``transformers.AdamW``'s default, which their ``fit`` used), not 1e-8;
- the "paper's defaults" are theirs: 1 epoch, an evaluation every 100 steps (``-ep``, ``-es``);
- the regulariser's same-cluster mean counts the self pairs (their ``true_adj_mat`` puts 1 on
  the diagonal), at distance 0.

Each is checked against an independent formulation written here from their code, not against
our own functions.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from tecb_data.errors import UserError
from tecb_eval.finetuning import blackbox
from tecb_eval.finetuning.instances import Instance, fraction_of_triples, triples, valid_triples
from tecb_eval.finetuning.objectives import Objective
from tecb_eval.finetuning.settings import FinetuneSettings, settings_for
from tecb_eval.training.optimiser import adamw

from helpers import one_line_error

LABELS = ("a", "a", "a", "b", "b", "c", "c", "c", "c", "d")
INSTANCE = Instance(tuple(f"text {i}" for i in range(len(LABELS))), LABELS)


def test_the_defaults_are_the_authors():
    s = settings_for()
    # ng20_run.py: -ep 1, -es 100, -np 50, -tf 25, -ws 0.1; BBCluster.py's fit: lr 2e-5, weight
    # decay 0.01, clipping 1, transformers.AdamW (eps 1e-6); the paper's tuned lambda 90, r 1.
    assert (s.epochs, s.eval_every, s.instance_size, s.triple_fraction, s.warmup_ratio) == (1, 100, 50, 25, 0.1)
    assert (s.learning_rate, s.weight_decay, s.max_grad_norm, s.adam_eps) == (2e-5, 0.01, 1.0, 1e-6)
    assert (s.lambda_, s.reg, s.self_pairs, s.triples_per_instance) == (90.0, 1.0, True, None)
    assert FinetuneSettings() == s


@pytest.mark.parametrize("name, value, says", [("adam_eps", 0.0, "adam_eps must be"), ("adam_eps", float("nan"), "adam_eps"),
                                               ("triple_fraction", 0, "triple_fraction must be"),
                                               ("self_pairs", "yes", "self_pairs must be")])
def test_bad_values_of_the_new_settings_are_one_line(name, value, says):
    with pytest.raises(UserError, match=says) as caught:
        settings_for(**{name: value})
    assert "\n" not in str(caught.value)


# --- the triplet baseline -----------------------------------------------------------------------

def _authors_valid_sets(labels) -> set[frozenset]:
    """The three-text sets with exactly two labels among them: the triples get_frac_triples keeps
    (``len(set([t[i], t[j], t[k]])) == 2``), each set once."""
    return {frozenset(c) for c in itertools.combinations(range(len(labels)), 3)
            if len({labels[i] for i in c}) == 2}


def test_valid_triples_are_each_two_label_set_once_with_the_pair_as_anchor_and_positive():
    found = valid_triples(INSTANCE)
    assert {frozenset(map(int, row)) for row in found} == _authors_valid_sets(LABELS)
    assert len(found) == len(_authors_valid_sets(LABELS))  # each set once
    for a, p, n in found:
        assert LABELS[a] == LABELS[p] != LABELS[n] and a < p
    # The count in closed form: each label of c texts gives C(c, 2) pairs times the n - c others.
    counts = [LABELS.count(label) for label in set(LABELS)]
    assert len(found) == sum(c * (c - 1) // 2 * (len(LABELS) - c) for c in counts)


def test_the_triplet_baseline_takes_a_25th_of_the_valid_triples_without_replacement():
    labels = tuple("abcde"[i % 5] for i in range(50))  # an instance of the paper's size
    instance = Instance(tuple(map(str, range(50))), labels)
    valid = {tuple(map(int, row)) for row in valid_triples(instance)}
    drawn = fraction_of_triples(instance, 25, np.random.default_rng(0))
    assert len(drawn) == len(valid) // 25 == 9000 // 25  # 5 labels x C(10, 2) pairs x 40 others
    assert len(set(drawn)) == len(drawn) and set(drawn) <= valid
    assert drawn == fraction_of_triples(instance, 25, np.random.default_rng(0))
    assert drawn != fraction_of_triples(instance, 25, np.random.default_rng(1))
    # Fewer valid triples than the fraction: none, as len(triples) // 25 is 0 for the authors.
    assert fraction_of_triples(Instance(("x", "y", "z"), ("a", "a", "b")), 25, np.random.default_rng(0)) == []


@pytest.fixture(scope="module")
def tiny(blurbs_folder, tiny_bert_with_dropout):
    """The demo Blurbs S2S folder and the tiny BERT of conftest.py (with BERT's dropout)."""
    return blurbs_folder, tiny_bert_with_dropout


@pytest.mark.slow
def test_the_triplet_objective_uses_the_fraction_by_default_and_the_count_when_asked(tiny, monkeypatch):
    from tecb_eval.finetuning import objectives
    from tecb_eval.training.model import load_sentence_model

    model = load_sentence_model(str(tiny[1]), device="cpu")
    calls = []
    monkeypatch.setattr(objectives, "fraction_of_triples",
                        lambda *a: calls.append(("fraction", a[1])) or fraction_of_triples(*a))
    monkeypatch.setattr(objectives, "triples", lambda *a: calls.append(("count", a[1])) or triples(*a))
    rng = np.random.default_rng(0)
    Objective(model, "triplet", settings_for(), "cpu").loss(INSTANCE, rng)
    Objective(model, "triplet", settings_for(triples_per_instance=50), "cpu").loss(INSTANCE, rng)
    assert calls == [("fraction", 25), ("count", 50)]


# --- AdamW's eps --------------------------------------------------------------------------------

@pytest.mark.slow
def test_adamw_gets_the_settings_eps(tiny, tmp_path, monkeypatch):
    from tecb_eval.finetuning import finetune, loop

    assert adamw(torch.nn.Linear(2, 2), learning_rate=1e-3, weight_decay=0.0).defaults["eps"] == 1e-8  # torch's
    seen = []

    def spy(module, **kwargs):
        optimizer = adamw(module, **kwargs)
        seen.append(optimizer.defaults["eps"])
        return optimizer

    monkeypatch.setattr(loop, "adamw", spy)
    common = dict(method="cob", folds=1, seeds=(42,), score_seeds=(42,), progress=False, resamples=99, max_steps=1,
                  eval_every=1, instance_size=20, save_best=False)
    finetune(str(tiny[1]), tiny[0], output_dir=tmp_path / "a", **common)
    finetune(str(tiny[1]), tiny[0], output_dir=tmp_path / "b", adam_eps=1e-8, **common)
    assert seen == [1e-6, 1e-8]


# --- the regulariser ----------------------------------------------------------------------------

def _authors_regulariser(x: np.ndarray, labels) -> float:
    """BBClusterLossModel.forward's regulariser: mean distance over the gold matrix with 1 on the
    diagonal (``i == j or label[i] == label[j]``) minus the mean over its zeros; their distances
    are torch.norm(x[:, None] - x), exactly 0 on the diagonal."""
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    n = len(labels)
    t = np.array([[1.0 if i == j or labels[i] == labels[j] else 0.0 for j in range(n)] for i in range(n)])
    return float((d * t).sum() / t.sum() - (d * (1 - t)).sum() / (1 - t).sum())


def test_the_regulariser_is_the_authors_with_self_pairs_and_the_earlier_one_without():
    x = np.random.default_rng(3).normal(size=(len(LABELS), 4))
    distances = blackbox.pairwise_distances(torch.tensor(x))
    gold = torch.tensor(blackbox.gold_adjacency(LABELS))
    ours = float(blackbox.regulariser(distances, gold))
    assert ours == pytest.approx(_authors_regulariser(x, LABELS), abs=1e-12)
    # Without the self pairs: the plain means over the pairs of two different texts.
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    same = np.array([[LABELS[i] == LABELS[j] and i != j for j in range(len(LABELS))] for i in range(len(LABELS))])
    different = np.array([[LABELS[i] != LABELS[j] for j in range(len(LABELS))] for i in range(len(LABELS))])
    earlier = d[same].mean() - d[different].mean()
    assert float(blackbox.regulariser(distances, gold, self_pairs=False)) == pytest.approx(earlier, abs=1e-9)
    assert ours != pytest.approx(earlier, abs=1e-3)  # the two differ: the test can tell them apart
    loss, _ = blackbox.cob_loss(torch.tensor(x), LABELS, lambda_=90.0, reg=1.0, blackbox=False)
    assert float(loss) == pytest.approx(_authors_regulariser(x, LABELS), abs=1e-12)


def test_the_cli_passes_the_new_options(tiny, tmp_path, monkeypatch, capsys):
    from tecb_eval import finetuning
    got = {}

    def fake(model, data, **kwargs):
        got.update(kwargs)
        raise UserError("stopped here by the test")

    monkeypatch.setattr(finetuning, "finetune", fake)
    argv = ["finetune", "--model", str(tiny[1]), "--data", str(tiny[0]), "--out", str(tmp_path / "o"),
            "--adam-eps", "1e-8", "--triple-fraction", "10", "--regulariser-without-self-pairs", "--quiet"]
    assert "stopped here by the test" in one_line_error(capsys, argv)
    assert (got["adam_eps"], got["triple_fraction"], got["self_pairs"], got["triples_per_instance"]) == (1e-8, 10, False,
                                                                                                           None)


# --- referees of the solver and the gradients ---------------------------------------------------

def _scipy_adjacency(distances: np.ndarray, k: int) -> np.ndarray:
    """An independent average-linkage HAC: scipy's, cut into k clusters."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    labels = fcluster(linkage(squareform(distances, checks=False), method="average"), k, criterion="maxclust")
    return (labels[:, None] == labels[None, :]).astype(float)


def _instances(count: int):
    rng = np.random.default_rng(7)
    for _ in range(count):
        n, k = int(rng.integers(12, 51)), int(rng.integers(2, 9))
        labels = [str(i % k) for i in range(n)]
        x = rng.normal(size=(n, 6)) + 2.0 * np.eye(k, 6)[[i % k for i in range(n)]]  # clusters that overlap
        yield x, labels, k


def test_the_solver_is_scipys_average_linkage_on_random_instances():
    for x, _, k in _instances(25):
        d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
        assert np.array_equal(blackbox.hac_adjacency(d, k), _scipy_adjacency(d, k))


def test_the_blackbox_gradient_is_the_authors_optimcluster_on_random_instances():
    """Their OptimCluster.backward: D' = max(0, D + lambda * dL/dA), gradient -(A - HAC(D')) / lambda,
    written here with scipy's HAC as the solver; the upstream dL/dA is the error count's, 1 - 2T."""
    lam = 90.0
    moved = 0
    for x, labels, k in _instances(10):
        distances = blackbox.pairwise_distances(torch.tensor(x, dtype=torch.float64, requires_grad=True))
        distances.retain_grad()
        gold = torch.tensor(blackbox.gold_adjacency(labels))
        adjacency = blackbox.hac_blackbox(distances, k, lam)
        (adjacency * (1 - gold) + (1 - adjacency) * gold).sum().backward()
        d = distances.detach().numpy()
        upstream = 1 - 2 * gold.numpy()
        expected = -(_scipy_adjacency(d, k) - _scipy_adjacency(np.maximum(d + lam * upstream, 0.0), k)) / lam
        assert np.array_equal(distances.grad.numpy(), expected)
        moved += int(np.count_nonzero(expected))
    assert moved > 0  # the instances are mis-clustered somewhere: the gradients compared are not all zero


def test_the_regulariser_gradient_matches_finite_differences():
    """The regulariser is smooth (away from coinciding points): autograd against central differences."""
    for self_pairs in (True, False):
        x = torch.tensor(np.random.default_rng(11).normal(size=(len(LABELS), 3)), dtype=torch.float64,
                         requires_grad=True)
        gold = torch.tensor(blackbox.gold_adjacency(LABELS))

        def value(points):
            return blackbox.regulariser(blackbox.pairwise_distances(points), gold, self_pairs=self_pairs)

        value(x).backward()
        step = 1e-6
        numeric = np.zeros(x.shape)
        for index in np.ndindex(*x.shape):
            plus, minus = x.detach().clone(), x.detach().clone()
            plus[index] += step
            minus[index] -= step
            numeric[index] = (float(value(plus)) - float(value(minus))) / (2 * step)
        assert np.allclose(x.grad.numpy(), numeric, atol=1e-7)
