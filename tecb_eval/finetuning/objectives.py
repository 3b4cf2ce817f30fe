"""The training objectives on one clustering instance, over a sentence-transformers model."""

from __future__ import annotations

import numpy as np

from tecb_eval.finetuning.blackbox import cob_loss
from tecb_eval.finetuning.instances import Instance, fraction_of_triples, triples


def embed(model, texts, device: str):
    """Embeddings with gradients, through the model's own modules (pooling, normalisation)."""
    features = model.preprocess(list(texts)) if hasattr(model, "preprocess") else model.tokenize(list(texts))
    features = {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}
    return model(features)["sentence_embedding"]


class Objective:
    """``loss(instance, rng)`` -> (loss tensor or None, extra) for one method."""

    def __init__(self, model, method: str, settings, device: str):
        self.model, self.method, self.s, self.device = model, method, settings, device
        if method == "triplet":
            from sentence_transformers.sentence_transformer.losses import TripletLoss

            self.triplet = TripletLoss(model)
        elif method == "contrastive":
            from sentence_transformers.sentence_transformer.losses import BatchAllTripletLoss

            self.batch_all = BatchAllTripletLoss(model)

    def loss(self, instance: Instance, rng: np.random.Generator):
        import torch

        if self.method in ("cob", "cob-r0", "reg-only"):
            vectors = embed(self.model, instance.texts, self.device)
            return cob_loss(vectors, instance.labels, lambda_=self.s.lambda_, reg=self.s.reg,
                            blackbox=self.method != "reg-only", self_pairs=self.s.self_pairs)
        if self.method == "triplet":
            if self.s.triples_per_instance is not None:
                drawn = triples(instance, self.s.triples_per_instance, rng)
            else:
                drawn = fraction_of_triples(instance, self.s.triple_fraction, rng)
            if not drawn:
                return None, float("nan")
            # Each distinct text is embedded once; the triples index into those vectors.
            vectors = embed(self.model, instance.texts, self.device)
            index = torch.tensor(drawn, device=vectors.device)
            columns = [vectors[index[:, 0]], vectors[index[:, 1]], vectors[index[:, 2]]]
            return self.triplet.compute_loss_from_embeddings(columns, None), float("nan")
        codes = np.unique(np.asarray(instance.labels), return_inverse=True)[1]
        vectors = embed(self.model, instance.texts, self.device)
        labels = torch.tensor(codes, device=vectors.device)
        return self.batch_all.batch_all_triplet_loss(labels, vectors), float("nan")
