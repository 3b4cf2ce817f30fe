"""tecb_eval: evaluate embedding models x clustering algorithms x reductions on the benchmark.

``tecb_eval.run_grid(...)`` runs (or resumes) the grid; ``tecb_eval.get_encoder(spec)`` gives an
encoder; ``tecb_eval.pretrain(...)`` continues pre-training a model (package ``tecb_eval.pretraining``);
``tecb_eval.mteb_tasks(...)`` gives MTEB's own tasks bound to our datasets, and
``tecb_eval.MtebEncoder(encoder)`` lets MTEB call any of our encoders; ``tecb_eval.layer_sweep(...)``
scores every layer of a transformers model from one forward pass.
All are imported on first use, so importing a submodule stays cheap.
"""

_LAZY = {"run_grid": "tecb_eval.grid", "get_encoder": "tecb_eval.encoders", "pretrain": "tecb_eval.pretraining",
         "mteb_tasks": "tecb_eval.mteb_bridge", "MtebEncoder": "tecb_eval.mteb_bridge",
         "layer_sweep": "tecb_eval.layers"}


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tecb_eval' has no attribute {name!r}")


__all__ = ["MtebEncoder", "get_encoder", "layer_sweep", "mteb_tasks", "pretrain", "run_grid"]
