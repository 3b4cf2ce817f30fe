"""The clustering solver as a layer: average-linkage HAC with the true k, differentiated as a
black box (Vlastelica et al. 2020), and COB's loss (Kashyapi & Dietz, "Learn The Big Picture").

Forward: D (pairwise Euclidean distances of an instance's embeddings) -> HAC average linkage with
k = the number of gold labels -> A, the 0/1 same-cluster matrix. The loss is the Rand index's error
count, sum |A - T| over the pairs (T: the gold same-cluster matrix), so dL/dA = 1 - 2T.
Backward: the solver is piecewise constant, so its true gradient is zero almost everywhere; the
blackbox gradient instead re-solves on distances moved towards a better solution,
D' = max(0, D + lambda * dL/dA), and returns -(A - A') / lambda: non-zero exactly on the pairs
whose clustering changes in D', which for a large enough lambda are the mis-clustered pairs.
"""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError


def hac_adjacency(distances: np.ndarray, k: int) -> np.ndarray:
    """The 0/1 same-cluster matrix of scikit-learn's average-linkage HAC on ``distances`` with ``k`` clusters."""
    from sklearn.cluster import AgglomerativeClustering

    labels = AgglomerativeClustering(n_clusters=int(k), metric="precomputed", linkage="average").fit_predict(distances)
    return (labels[:, None] == labels[None, :]).astype(np.float64)


def gold_adjacency(labels) -> np.ndarray:
    codes = np.unique(np.asarray(labels), return_inverse=True)[1]
    return (codes[:, None] == codes[None, :]).astype(np.float64)


def check_lambda(value) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise UserError(f"lambda must be a finite number above 0, got {value!r} (--lambda): the blackbox gradient "
                        "divides by it, and the moved distances need a positive step")
    return value


def _autograd_function():
    import torch

    class HacBlackbox(torch.autograd.Function):
        """A = HAC(D); dL/dD = -(A - HAC(max(0, D + lambda * dL/dA))) / lambda."""

        @staticmethod
        def forward(ctx, distances, k, lambda_):
            d = distances.detach().cpu().double().numpy()
            adjacency = hac_adjacency(d, k)
            ctx.k, ctx.lambda_, ctx.d, ctx.adjacency = k, lambda_, d, adjacency
            return torch.from_numpy(adjacency).to(distances.dtype).to(distances.device)

        @staticmethod
        def backward(ctx, grad_output):
            g = grad_output.detach().cpu().double().numpy()
            moved = np.maximum(ctx.d + ctx.lambda_ * g, 0.0)
            better = hac_adjacency(moved, ctx.k)
            grad = -(ctx.adjacency - better) / ctx.lambda_
            return torch.from_numpy(grad).to(grad_output.dtype).to(grad_output.device), None, None

    return HacBlackbox


_FUNCTION = None


def hac_blackbox(distances, k: int, lambda_: float):
    """A = HAC(D) with the blackbox gradient (a ``torch.autograd.Function``)."""
    global _FUNCTION
    if _FUNCTION is None:
        _FUNCTION = _autograd_function()
    return _FUNCTION.apply(distances, int(k), check_lambda(lambda_))


def pairwise_distances(embeddings):
    """Euclidean distances, differentiable everywhere (the square root's gradient at 0, on the
    diagonal, would be infinite; the tiny offset keeps it finite and its weight there is zero)."""
    diff = embeddings[:, None, :] - embeddings[None, :, :]
    return ((diff * diff).sum(-1) + 1e-12).sqrt()


def regulariser(distances, gold, *, self_pairs: bool = True):
    """Mean distance of the gold same-cluster pairs minus that of the different-cluster pairs.

    ``self_pairs`` (the authors' ``BBClusterLossModel``: their gold matrix has 1 on the diagonal)
    counts each text's pair with itself among the same-cluster pairs, at distance 0: the mean is
    over n more pairs, which weakens the pull on the same-cluster pairs by the factor
    (same pairs) / (same pairs + n). ``self_pairs=False`` (this package's earlier regulariser)
    leaves them out. The diagonal's distance is taken as exactly 0 either way (``pairwise_distances``
    keeps a tiny offset there for the gradient)."""
    import torch

    off = 1.0 - torch.eye(len(gold), dtype=distances.dtype, device=distances.device)
    same = gold * off
    counted = gold if self_pairs else same
    different = 1.0 - gold
    return (distances * same).sum() / counted.sum().clamp(min=1.0) - (distances * different).sum() / different.sum().clamp(min=1.0)


def cob_loss(embeddings, labels, *, lambda_: float, reg: float, blackbox: bool = True, self_pairs: bool = True):
    """COB's loss of one clustering instance: sum |A - T| + reg * regulariser (``self_pairs``: see
    :func:`regulariser`); ``blackbox=False`` gives the regulariser alone (the ablation). Returns (loss, error count of the forward HAC)."""
    import torch

    k = len(set(labels))
    if k < 2:
        raise UserError(f"a clustering instance needs at least two labels; this one has {k} "
                        f"({len(labels)} texts): draw larger instances or use a dataset with more labels")
    distances = pairwise_distances(embeddings)
    gold = torch.from_numpy(gold_adjacency(labels)).to(distances.dtype).to(distances.device)
    loss = reg * regulariser(distances, gold, self_pairs=self_pairs) if reg else distances.sum() * 0.0
    errors = float("nan")
    if blackbox:
        adjacency = hac_blackbox(distances, k, lambda_)
        error = (adjacency * (1.0 - gold) + (1.0 - adjacency) * gold).sum()
        errors = float(error.detach())
        loss = loss + error
    return loss, errors
