"""A heartbeat for long steps: a line at least every 30 s of work off a terminal, even while the
step is blocked in one call (loading or exporting a model, one long batch, one long clustering
unit, a slow network answer) and so never reaches its :class:`~tecb_data.progress.Progress`.

A daemon thread watches what the bar writes; when nothing was written for ``interval`` seconds it
writes the bar's line again (its count, what it is doing, the ETA once it means something). On a
terminal the tqdm bar keeps its own elapsed time, and nothing is added. ``clock`` and ``wait`` are
injectable (and module defaults, :data:`CLOCK` and :data:`WAIT`, that tests replace) so that a
test drives hours of a slow fake step in milliseconds.
Used by tecb_data and (below every room) tecb_eval.
"""

from __future__ import annotations

import threading
import time

from tecb_data.progress import LINE_INTERVAL

# Module defaults a test may replace (monkeypatch) to drive every heartbeat of a real command.
CLOCK = time.monotonic
WAIT = None  # None: wait on the heartbeat's stop event (real seconds)
# How often the thread looks, as a share of the interval: a gap is at most interval * (1 + share).
_LOOK = 0.1


class _Tracked:
    """The bar's stream, noting when it was last written to."""

    def __init__(self, stream, heartbeat: "Heartbeat"):
        self._stream, self._heartbeat = stream, heartbeat

    def write(self, text):
        if text.strip():
            self._heartbeat.last = self._heartbeat.clock()
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class Heartbeat:
    """``with Heartbeat(bar):`` around a long step; a no-op for a disabled bar or on a terminal."""

    def __init__(self, bar, *, interval: float | None = None, clock=None, wait=None):
        self.bar = bar
        self.interval = interval if interval is not None else getattr(bar, "interval", LINE_INTERVAL)
        self.clock = clock or CLOCK
        self._stop = threading.Event()
        self._wait = wait or WAIT or self._stop.wait
        self._thread = None
        self.last = self.clock()
        self.active = bool(getattr(bar, "enabled", False)) and not getattr(bar, "terminal", True)

    def __enter__(self):
        if self.active:
            self.bar.stream = _Tracked(self.bar.stream, self)
            self._thread = threading.Thread(target=self._run, name="tecb-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if isinstance(self.bar.stream, _Tracked):
            self.bar.stream = self.bar.stream._stream

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wait(self.interval * _LOOK)
            if self._stop.is_set() or not self.bar.enabled:
                return
            if self.clock() - self.last >= self.interval:
                # The bar's own line, as it would write it now (count, status, ETA).
                self.bar.beat()
