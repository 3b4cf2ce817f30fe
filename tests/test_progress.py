"""Progress of a long step (``tecb_data.progress.Progress``): an ETA only once it means something,
pauses left out of it; off a terminal a plain line at least every interval of work; on a terminal a
bar; a delayed progress silent for a short step. A fake clock the test moves by hand."""

from __future__ import annotations

import io

import pytest

from tecb_data.progress import Progress


class FakeClock:
    """A monotonic clock the test moves by hand: the ETA is then a figure, not a race."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_gives_an_eta_only_once_it_means_something_and_leaves_pauses_out():
    clock = FakeClock()
    stream = io.StringIO()  # not a terminal
    bar = Progress(total=100, desc="cells", unit="cells", stream=stream, interval=0, clock=clock)
    bar.status("encoding", working=False)
    clock.now += 600  # encoding: ten minutes in which no cell moves, and this time is no cell's
    bar.status("clustering")
    bar.update(50, timed=False)  # from the store: took no time, tells nothing about the rest
    assert bar.eta() is None
    for _ in range(4):
        clock.now += 2
        bar.update(1)
    assert bar.eta() is None  # 4 timed cells: too few
    clock.now += 2
    bar.update(1)
    # 5 timed cells in 10 s: 2 s a cell, 45 cells left. Were the 600 s of encoding counted, or the
    # 50 cells from the store, this would be 5,490 s or 8 s.
    assert bar.eta() == pytest.approx(90.0)
    bar.status("evaluating", working=False)
    clock.now += 300
    bar.status("clustering")
    assert bar.eta() == pytest.approx(90.0)  # a pause in the middle is left out too
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0].startswith("cells: 0/100 cells (0 %); encoding") and lines[-1].startswith("cells: 55/100")
    assert any(line.endswith("about 1:30 left") for line in lines), lines


def test_off_a_terminal_a_line_comes_at_least_every_interval_of_work():
    clock = FakeClock()
    stream = io.StringIO()
    with Progress(total=1000, desc="encoding", unit="texts", stream=stream, interval=30, clock=clock) as bar:
        for _ in range(1000):
            clock.now += 0.7  # a slow item: 700 s of work in all
            bar.update(1)
    lines = stream.getvalue().splitlines()
    # the first line, one each 30 s of the 700 s (23), the last: never 30 s without a word
    assert len(lines) == 1 + 700 // 30 + 1, lines
    assert lines[-1] == "encoding: 1,000/1,000 texts (100 %); done"


def test_on_a_terminal_progress_is_a_bar():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    with Progress(total=10, desc="cells", unit="cells", stream=stream) as bar:
        bar.status("encoding", working=False)
        bar.update(10)
    assert "\r" in stream.getvalue() and "cells" in stream.getvalue()


def test_a_delayed_progress_says_nothing_for_a_short_step_and_reports_a_long_one():
    clock = FakeClock()
    quick, slow = io.StringIO(), io.StringIO()
    with Progress(desc="reading", unit="records", stream=quick, delay=30, clock=clock) as bar:
        clock.now += 2
        bar.update(27)
    assert quick.getvalue() == ""  # a step that ends (or fails) within the delay leaves no line
    with Progress(desc="reading", unit="records", stream=slow, delay=30, interval=30, clock=clock) as bar:
        for _ in range(100):
            clock.now += 1
            bar.update(1)
    lines = slow.getvalue().splitlines()
    assert lines[0].startswith("reading: 30 records") and lines[-1] == "reading: 100 records", lines


def test_a_count_of_one_is_singular_off_a_terminal():
    out = io.StringIO()
    with Progress(desc="reading table rows", unit="rows", stream=out) as bar:
        bar.update(1)
    assert "reading table rows: 1 row" in out.getvalue() and "1 rows" not in out.getvalue(), out.getvalue()
    out = io.StringIO()
    with Progress(total=3, desc="grid cells", unit="cells", stream=out) as bar:
        bar.update(1)
    assert "grid cells: 1/3 cells" in out.getvalue()
