"""tecb_eval: evaluate embedding models x clustering algorithms x reductions on the benchmark.

``tecb_eval.run_grid(...)`` runs (or resumes) the grid; ``tecb_eval.get_encoder(spec)`` gives an
encoder; ``tecb_eval.pretrain(...)`` continues pre-training a model (package ``tecb_eval.pretraining``);
``tecb_eval.mteb_tasks(...)`` gives MTEB's own tasks bound to our datasets, and
``tecb_eval.MtebEncoder(encoder)`` lets MTEB call any of our encoders; ``tecb_eval.layer_sweep(...)``
scores every layer of a transformers model from one forward pass; ``tecb_eval.compare`` (the module
:mod:`tecb_eval.reports.compare`) says how sure a ranking is.
All are imported on first use, so importing a submodule stays cheap.

The rooms, bottom to top (a room imports only rooms below it; ``tests/test_architecture.py``
keeps it so): ``files`` and ``benchmark`` (writing our files; the one loader of the published
layout), ``models`` (text -> vectors) and ``clustering`` (reductions, algorithms, profiles),
``mteb`` (our data as MTEB tasks, its v2 sampling and results layout), ``grid`` (plan, units,
executors, results store, caches), ``training`` (what pre-training and fine-tuning share), then
``reports``, ``layers``, ``pretraining`` and ``finetuning``, and ``cli``.
"""

_LAZY = {"run_grid": "tecb_eval.grid.run", "get_encoder": "tecb_eval.models.encoders", "pretrain": "tecb_eval.pretraining",
         "finetune": "tecb_eval.finetuning",
         "mteb_tasks": "tecb_eval.mteb.tasks", "MtebEncoder": "tecb_eval.mteb.encoders",
         "layer_sweep": "tecb_eval.layers"}
_LAZY_MODULES = {"compare": "tecb_eval.reports.compare"}


def __getattr__(name):
    from importlib import import_module

    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    if name in _LAZY_MODULES:
        return import_module(_LAZY_MODULES[name])
    raise AttributeError(f"module 'tecb_eval' has no attribute {name!r}")


__all__ = ["MtebEncoder", "compare", "finetune", "get_encoder", "layer_sweep", "mteb_tasks", "pretrain", "run_grid"]
