"""Waiting on our Dask tasks with an eye on the workers that run them.

A worker that stops answering (stopped with SIGSTOP or Ctrl-Z, swapping, cut off by the network)
keeps its tasks: the scheduler drops it only after its ``worker-ttl`` (five minutes by default), and
until then a run shows the same count for minutes without a word. While a loop waits on our tasks
(Dask's ``as_completed``, unchanged), a thread asks the scheduler now and then which workers run
them and when each last sent its heartbeat; once nothing has finished for ``after`` seconds
(:data:`SILENCE_SECONDS`) and a worker running one of our tasks has sent nothing for as long, one
line names it. The wait itself goes on as Dask's does: the run continues when the worker answers
again (which is said too), or when the scheduler drops it and its tasks run elsewhere.

The scheduler's heartbeat times are compared with earlier ones from the same scheduler, never with
this machine's clock, so a scheduler on another machine with another time is judged alike.
"""

from __future__ import annotations

import threading
import time

# About a minute: far longer than a worker's heartbeat (a fraction of a second to a few seconds on a
# large cluster), shorter than the scheduler's own five minutes before it gives a worker up.
SILENCE_SECONDS = 60.0
# How often the scheduler is asked while nothing finishes: a few times per ``after``, at most every 15 s.
_CHECKS_PER_SILENCE = 4
_LONGEST_CHECK = 15.0


class SilentWorkers:
    """A context that watches the workers running the futures of ``running`` (future -> anything,
    read as the loop changes it) while a loop waits on ``what`` (``"encoding with minilm-l6"``); the
    loop calls :meth:`progressed` for each task that finishes. Lines go through ``log``."""

    def __init__(self, client, log, what: str, after: float = SILENCE_SECONDS, running: dict | None = None):
        if not after > 0:
            raise ValueError(f"the silence before a worker is named must be positive, got {after!r}")
        self.client, self.log, self.what, self.after = client, log, what, float(after)
        self.running = running if running is not None else {}
        self.poll = min(self.after / _CHECKS_PER_SILENCE, _LONGEST_CHECK)
        self.last_progress = time.monotonic()
        self.heard: dict[str, tuple[object, float]] = {}  # worker -> (its last_seen, when it last changed here)
        self.named: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"tecb silent workers: {what}", daemon=True)

    def __enter__(self) -> "SilentWorkers":
        self._thread.start()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self._stop.set()
        self._thread.join()
        if kind is None and self.named:  # the wait ended because a named worker answered: say so
            self.check([])

    def progressed(self) -> None:
        """A task finished."""
        self.last_progress = time.monotonic()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                keys = [future.key for future in list(self.running)]
            except RuntimeError:  # the loop changed ``running`` meanwhile: asked again at the next poll
                continue
            self.check(keys)

    def check(self, keys) -> None:
        """Ask the scheduler about the workers running ``keys`` (ours still running) and name those
        silent for ``after`` seconds while nothing of ours finished."""
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
            processing = self.client.processing()
        except Exception:  # noqa: BLE001 -- a scheduler that is gone is said by the loop's own wait
            return
        now = time.monotonic()
        for worker, info in workers.items():
            seen = info.get("last_seen")
            if worker not in self.heard or self.heard[worker][0] != seen:
                self.heard[worker] = (seen, now)
        for worker in sorted(self.named):
            if worker not in workers:
                self.named.discard(worker)  # dropped by the scheduler: its tasks run again elsewhere
            elif now - self.heard[worker][1] < self.after:
                self.named.discard(worker)
                self.log(f"note: {self.what}: Dask worker {worker} answers again; going on")
        if now - self.last_progress < self.after or self._stop.is_set():
            return
        ours = {str(key) for key in keys}
        for worker in sorted(processing):
            if worker in self.named or worker not in self.heard or not ours & {str(k) for k in processing[worker]}:
                continue
            silent = now - self.heard[worker][1]
            if silent >= self.after:
                self.named.add(worker)
                self.log(f"note: {self.what}: nothing finished for {now - self.last_progress:.0f} s; Dask worker "
                         f"{worker} does not answer (no heartbeat for {silent:.0f} s or more: stopped, swapping or "
                         "cut off?); waiting for it: the run goes on when it answers, or once the scheduler gives "
                         "it up and its tasks run elsewhere")
