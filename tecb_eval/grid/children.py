"""What every child process the grid starts through loky does first: its local workers
(:mod:`tecb_eval.grid.executors`) and the child that draws MTEB's samples ahead
(:mod:`tecb_eval.grid.samples`). Light on purpose: a child imports this module before it runs."""

from __future__ import annotations


def quiet_child() -> None:
    """Leave Ctrl-C to the coordinator, and give tqdm a thread lock.

    Ctrl-C: the coordinator stops its children and says what was kept. tqdm: UMAP and ``datasets``
    draw (disabled) bars, whose first use creates tqdm's multiprocessing lock, a named semaphore
    registered with the resource tracker; a child stopped at the end never unregisters it, and the
    tracker then warns of "leaked semaphore objects" after the run. A child runs one thing at a
    time: a thread lock is all tqdm needs there.
    """
    import signal
    import threading

    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())
