"""Our data in MTEB's terms: our datasets as MTEB tasks (``tasks``), MTEB's v2 sampling for the
fast protocol (``sampling``), MTEB calling our encoders (``encoders``) and MTEB's results layout
(``results``). Imports the benchmark loader and :mod:`tecb_eval.files`, nothing above them.

MTEB is the referee for what a legacy or v2 clustering score is, so this room calls MTEB's own
code wherever it can instead of keeping a copy in step by hand:

- :func:`mteb_tasks` returns MTEB's own task objects (``BlurbsClusteringS2S``,
  ``BlurbsClusteringS2S.v2``, ``TenKGnadClusteringP2P.v2``, ...) whose dataset is one of our
  folders or ``repo_id@revision``, so ``mteb.evaluate(model, tasks=tecb_eval.mteb_tasks([...]))``
  runs any MTEB model on rebuilt data.
- :func:`~tecb_eval.mteb.sampling.fast_sample` gives the grid's ``fast`` protocol the texts and bootstrap samples MTEB v2
  clusters: each task's own ``dataset_transform`` (Blurbs v2: all rows flattened without
  de-duplication, labels seen once dropped, a stratified subsample of 2048; TenKGnad v2: MTEB's
  generic pooling), then the downsampling and the bootstrap draws from the task's own
  ``rng_state``, with the task's own sizes. The order of those draws is the one thing kept here in
  step with ``AbsTaskClustering._evaluate_subset``; ``tests/test_mteb_referee.py`` runs MTEB on the
  same folders and asserts equal scores per bootstrap.
- :class:`MtebEncoder` lets MTEB call any tecb encoder; :func:`write_results` writes MTEB's results
  layout (``results/<model>/<revision>/<Task>.json`` + ``model_meta.json``) with MTEB's own
  ``TaskResult``, so ``mteb.ResultCache(OUT).load_results(include_remote=False)`` reads it.

MTEB's own class is used only where MTEB's task is our German dataset (language ``deu-Latn``, the
same dataset). Every other dataset gets a task of the same kind built from our own metadata, in its
own language: legacy as MTEB v1 clusters, v2 through MTEB's generic ``_convert_to_fast`` pooling
with every text embedded (as the TenKGnad v2 tasks do). Where MTEB uses the name for another
dataset, ours carries MTEB's language-variant suffix: the German Reddit views are
``RedditClusteringS2S-DE`` and ``RedditClusteringP2P-DE``, never MTEB's English
``RedditClusteringP2P``.

``mteb`` is imported on first use: it takes seconds to import.
"""
