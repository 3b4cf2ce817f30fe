"""Progress for long steps: a tqdm bar on a terminal, plain periodic lines in a log.

tqdm redraws its bar with carriage returns and escape codes; written to a file (``2> log``, CI, a
job scheduler) that is one line of thousands of characters. Off a terminal this writes one
ordinary line now and then instead. Both say what the step is doing (``status``) while no item
moves, and give an ETA only once enough items have been timed for it to mean something.
Used by tecb_data and (below every room) tecb_eval.
"""

from __future__ import annotations

import sys
import threading
import time

# Off a terminal: at most one line per this many seconds (besides the first and the last).
LINE_INTERVAL = 30.0
# An ETA needs this many timed items and this share of the work behind it; fewer give wild figures
# (one slow first item, or a start-up cost, extrapolated over hours).
ETA_MIN_ITEMS = 5
ETA_MIN_SHARE = 0.02


def unit_for(unit: str, count: int) -> str:
    """``unit`` ("rows", "texts", "cells") for ``count`` of them: one is a row, not "1 rows"."""
    return unit[:-1] if count == 1 and unit.endswith("s") and not unit.endswith("ss") else unit


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """``update(n)`` counts finished items; ``update(n, timed=False)`` counts items that took no
    work (read from a cache or a results store) and so say nothing about the time left.
    ``status(text)`` says what happens while the count stands still (encoding, loading)."""

    def __init__(self, total: int | None = None, desc: str = "", unit: str = "items", *, enabled: bool = True,
                 stream=None, interval: float = LINE_INTERVAL, initial: int = 0, clock=time.monotonic,
                 delay: float = 0.0):
        # ``clock`` (seconds, monotonic) is injectable so that tests drive the heartbeat and the ETA
        # with a fake clock instead of sleeping and hoping the scheduler is kind.
        self.clock = clock
        # As tqdm's `delay`: nothing is shown until the step has run this long, so a step that ends
        # (or fails) quickly leaves no line; a failure then stays one line of error.
        self.delay = delay
        # The heartbeat thread (tecb_data.heartbeat) writes lines too: one line at a time.
        self._lock = threading.RLock()
        self.total, self.desc, self.unit = total, desc, unit.strip()
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.interval = interval
        self.n = initial
        self.timed = 0
        self.busy = 0.0  # seconds spent on timed items (status changes pause it)
        self._status = ""
        self._since = self._started = clock()  # start of the current timed stretch; of the step
        self._paused = False
        self._last_line = None
        self._last_n = None
        self._bar = None
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())
        if self.enabled and self.terminal:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=f" {self.unit}", file=self.stream,
                             leave=False, dynamic_ncols=True, delay=delay,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}]{postfix}"
                             if total else "{desc}: {n_fmt} [{elapsed}]{postfix}")

    # -- what the caller says ---------------------------------------------------------------
    def update(self, n: int = 1, *, timed: bool = True) -> None:
        if n <= 0:
            return
        self.n += n
        if timed:
            self.timed += n
        self._show()

    def status(self, text: str = "", *, working: bool = True) -> None:
        """What the step does now; ``working=False`` (e.g. while encoding before the cells it
        feeds) keeps that time out of the ETA of the counted items."""
        now = self.clock()
        if not self._paused:
            self.busy += now - self._since
        self._paused = not working
        self._since = now
        if text != self._status:
            self._status = text
            # A pause (encoding, evaluating) is said at once; back at work, the next line says so.
            self._show(force=not working)

    def set_postfix(self, **values) -> None:
        """A running figure (a loss) beside the count, as tqdm's set_postfix; shown with the next line."""
        self._status = ", ".join(f"{key} {value}" for key, value in values.items())
        self._show()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and not self.terminal and self._last_line is not None and self.n != self._last_n:
            self._line(final=True)
        self.enabled = False

    def __enter__(self):
        if self.enabled and not self.terminal:
            self._line()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- what it shows ----------------------------------------------------------------------
    def eta(self) -> float | None:
        """Seconds left, from the items timed so far; None until that means something."""
        if not self.total or self.timed < ETA_MIN_ITEMS or self.timed < ETA_MIN_SHARE * self.total:
            return None
        busy = self.busy + (0.0 if self._paused else self.clock() - self._since)
        if busy <= 0:
            return None
        return (self.total - self.n) * busy / self.timed

    def _tail(self) -> str:
        parts = [self._status] if self._status else []
        # During a pause (encoding) the time left depends on the pause too, which nothing has timed.
        eta = None if self._paused else self.eta()
        if eta is not None and self.n < (self.total or 0):
            parts.append(f"about {_clock(eta)} left")
        return ", ".join(parts)

    def _show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self._bar is not None:
            # A redraw at most ten times a second, as tqdm's own mininterval.
            if force or self.n >= (self.total or self.n + 1) or now - (self._last_line or 0.0) >= 0.1:
                self._last_line = now
                self._bar.set_postfix_str(self._tail(), refresh=False)
                self._bar.n = self.n
                self._bar.refresh()
            return
        if force or self._last_line is None or now - self._last_line >= self.interval:
            self._line()

    def beat(self) -> None:
        """Write the current line now (off a terminal; a no-op on one or once closed). Safe to
        call from another thread: the heartbeat's way of saying that a blocked step still runs."""
        with self._lock:
            if self.enabled and not self.terminal:
                # A beat comes after a whole interval of silence (on the heartbeat's clock): the step
                # has run longer than any `delay` by then.
                self._write_line(False, delayed=False)

    def _line(self, final: bool = False) -> None:
        with self._lock:
            self._write_line(final)

    def _write_line(self, final: bool, *, delayed: bool = True) -> None:
        if delayed and not final and self.clock() - self._started < self.delay:
            return
        self._last_line, self._last_n = self.clock(), self.n
        count = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
        share = f" ({100 * self.n / self.total:.0f} %)" if self.total else ""
        tail = "" if final else self._tail()
        print(f"{self.desc}: {count} {self.unit if self.total else unit_for(self.unit, self.n)}{share}" + (f"; {tail}" if tail else "") + ("; done" if final and self.total and self.n >= self.total else ""),
              file=self.stream, flush=True)


def progress(iterable=None, *, total: int | None = None, desc: str = "", unit: str = "items", enabled: bool = True,
             **kwargs):
    """``Progress`` over an iterable (``for x in progress(items, desc=...)``), or a bare one."""
    if iterable is None:
        return Progress(total, desc, unit, enabled=enabled, **kwargs)
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)

    def items():
        with Progress(total, desc, unit, enabled=enabled, **kwargs) as bar:
            for item in iterable:
                yield item
                bar.update()

    return items()
