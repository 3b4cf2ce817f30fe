"""Waiting on our Dask tasks with an eye on the workers that run them.

A worker that stops answering (stopped with SIGSTOP or Ctrl-Z, swapping, cut off by the network)
keeps its tasks: the scheduler drops it only after its ``worker-ttl`` (five minutes by default), and
until then a run shows the same count for minutes without a word. While we wait, the scheduler is
asked now and then which workers run our tasks and when each last sent its heartbeat; once nothing
has finished for ``after`` seconds (:data:`SILENCE_SECONDS`) and a worker running one of our tasks
has sent nothing for as long, one line names it. The wait itself goes on as Dask's does: the run
continues when the worker answers again (which is said too), or when the scheduler drops it and
its tasks run elsewhere.

The scheduler's heartbeat times are compared with earlier ones from the same scheduler, never with
this machine's clock, so a scheduler on another machine with another time is judged alike.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

# About a minute: far longer than a worker's heartbeat (a fraction of a second to a few seconds on a
# large cluster), shorter than the scheduler's own five minutes before it gives a worker up.
SILENCE_SECONDS = 60.0
# How often the scheduler is asked while nothing finishes: a few times per ``after``, at most every 15 s.
_CHECKS_PER_SILENCE = 4
_LONGEST_CHECK = 15.0


class SilentWorkers:
    """What a wait on ``what`` (``"encoding with minilm-l6"``) has seen of the workers: when each
    last changed its heartbeat, which were named as silent; it says so through ``log``."""

    def __init__(self, client, log, what: str, after: float = SILENCE_SECONDS):
        if not after > 0:
            raise ValueError(f"the silence before a worker is named must be positive, got {after!r}")
        self.client, self.log, self.what, self.after = client, log, what, float(after)
        self.poll = min(self.after / _CHECKS_PER_SILENCE, _LONGEST_CHECK)
        self.last_progress = time.monotonic()
        self.heard: dict[str, tuple[object, float]] = {}  # worker -> (its last_seen, when it last changed here)
        self.named: set[str] = set()

    def progressed(self, keys) -> None:
        """A task finished (``keys``: those still running)."""
        self.last_progress = time.monotonic()
        if self.named:
            self.check(keys)  # a named worker that answers again is said at once

    def check(self, keys) -> None:
        """Ask the scheduler about the workers running ``keys`` (ours still running) and name those
        silent for ``after`` seconds while nothing of ours finished."""
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
            processing = self.client.processing()
        except Exception:  # noqa: BLE001 -- a scheduler that is gone is said by the wait itself
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
        if now - self.last_progress < self.after:
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


def finished(running: dict, watch: SilentWorkers) -> Iterator[tuple]:
    """(future, what ``running`` held for it) for each future of ``running`` (future -> anything) as
    it finishes, taken out of ``running``; among those finishing together in the order they were
    submitted. A future added to ``running`` meanwhile (a task sent again) is waited on too.
    ``watch`` is told of the waits in between."""
    from distributed import wait

    while running:
        try:
            done = wait(list(running), timeout=watch.poll, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            watch.check([future.key for future in running])
            continue
        ready = [(future, running.pop(future)) for future in list(running) if future in done]
        watch.progressed([future.key for future in running])
        yield from ready


def watched_result(future, watch: SilentWorkers):
    """``future.result()``, waited on under ``watch``."""
    for _ in finished({future: None}, watch):
        pass
    return future.result()
