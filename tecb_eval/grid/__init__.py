"""The model x dataset x reduction x algorithm grid: its options checked once (``plan.GridConfig``),
the plan (``plan``) and its run (``run``), units (``work``, ``protocols``), where they run
(``executors``, ``dask_executor``, sharing ``scheduling``), the results store (``store``), the
embedding and reduction caches (``cache``) and what a seed may be (``seeds``).
Imports ``models``, ``clustering``, ``mteb`` and the benchmark loader; nothing above them.
"""
