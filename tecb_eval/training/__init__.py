"""The machinery both kinds of training stand on: adaptive pre-training (``tecb_eval.pretraining``)
and fine-tuning on a clustering metric (``tecb_eval.finetuning``). Each of those keeps only its own
objectives, loop and command; neither imports the other.

- ``model``: which model is trained (its transformers checkpoint and sentence-transformers folder)
  and loading it as a sentence-transformers model;
- ``encoding``: how the model under training is encoded, the way ``tecb-eval run`` encodes it;
- ``tracking``: the live encoders, evaluation during training, its CSV logs and the best checkpoint;
- ``device``: the device, mixed precision, deterministic kernels and seeding of torch;
- ``optimiser``: parameter groups (no weight decay on biases and norms) and AdamW;
- ``checkpoints``: writing a checkpoint folder atomically, and the library versions a run records;
- ``data``: loading the datasets and the seeded order of the texts in each epoch;
- ``errors``: a run that diverged.

Heavy libraries (torch, transformers, sentence-transformers) load only when training starts.
"""
