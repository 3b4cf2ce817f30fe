"""Every long step writes a plain line at least every 30 s of work off a terminal, also while it is
blocked in one call. A fake clock and a slow fake step: minutes of simulated work in
milliseconds, the time of every line written recorded on the fake clock."""

from __future__ import annotations

import contextlib
import io
import threading
import time

import pytest

from tecb_data import heartbeat
from tecb_data.progress import LINE_INTERVAL, Progress

SLOW_S = 200.0  # simulated seconds one slow call blocks
# The heartbeat looks every tenth of the interval: a gap is at most the interval and one look.
MAX_GAP = LINE_INTERVAL * 1.1 + 1e-6


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def wait(self, seconds: float) -> bool:
        """The heartbeat's wait: simulated seconds pass; a real instant for the other thread."""
        with self.lock:
            self.now += seconds
        time.sleep(0.0005)
        return False

    def block(self, seconds: float = SLOW_S) -> None:
        """A slow fake step: holds the calling thread until ``seconds`` of simulated time passed."""
        until = self() + seconds
        deadline = time.monotonic() + 60
        while self() < until:
            assert time.monotonic() < deadline, "the heartbeat's clock did not move"
            time.sleep(0.0005)


class Log(io.StringIO):
    """A log file (not a terminal) that notes the simulated time of every line."""

    def __init__(self, clock):
        super().__init__()
        self.clock, self.times = clock, []

    def write(self, text):
        if text.strip():
            self.times.append(self.clock())
        return super().write(text)

    def isatty(self):
        return False

    def __enter__(self):
        self._redirect = contextlib.redirect_stderr(self)
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc):
        return self._redirect.__exit__(*exc)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(heartbeat, "CLOCK", fake)
    monkeypatch.setattr(heartbeat, "WAIT", fake.wait)
    return fake


@pytest.fixture
def log(clock):
    """The log the test's steps write to: sys.stderr (where Progress writes when given no stream)
    inside ``with log:`` (pytest's capture sets its own sys.stderr between a fixture and the test)."""
    return Log(clock)


def assert_beats(log: Log, *, at_least: float, words: str):
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    times = log.times
    assert times and times[-1] >= at_least, (times, text)
    gaps = [b - a for a, b in zip([0.0, *times], times)]
    assert max(gaps) <= MAX_GAP, (gaps, text)
    assert words in text, text


def test_a_blocked_step_still_writes_a_line_every_30_s(clock, log):
    with log, Progress(total=3, desc="exporting minilm-l6 to ONNX", unit="steps") as bar, heartbeat.Heartbeat(bar):
        for _ in range(3):
            clock.block()
            bar.update()
    assert_beats(log, at_least=3 * SLOW_S, words="exporting minilm-l6 to ONNX: 2/3 steps")
    assert len(log.times) >= 3 * SLOW_S / MAX_GAP


def test_on_a_terminal_or_disabled_it_adds_nothing(clock):
    class Terminal(Log):
        def isatty(self):
            return True

    for bar in (Progress(total=2, stream=Log(clock), enabled=False), Progress(total=2, stream=Terminal(clock))):
        beat = heartbeat.Heartbeat(bar)
        assert not beat.active
        with beat:
            pass
        bar.close()


def test_build_reading_a_slow_source(clock, log, tmp_path, monkeypatch):
    from tecb_data import build as build_module
    from tecb_data.demo import demo_input

    import dataclasses

    real = build_module.READERS["blurbs"]

    def slow_reader(path, progress=None):
        clock.block()
        return real.read(path, progress=progress)

    monkeypatch.setitem(build_module.READERS, "blurbs", dataclasses.replace(real, read=slow_reader))
    with log:
        build_module.build("blurbs", demo_input("blurbs"), tmp_path / "out", views=("s2s",), progress=True)
    assert_beats(log, at_least=SLOW_S, words="reading blurbs records")


def _slow_encoder(clock):
    from tecb_eval.models.encoders import get_encoder

    inner = get_encoder("tfidf-lsa")

    class Slow:
        identity = "slow-fake-encoder"

        def encode(self, texts):
            clock.block()  # one batch of a large model on a small machine
            return inner.encode(texts)

    return Slow()


def test_grid_encoding_and_clustering_and_loading(clock, log, demo_datasets, tmp_path, monkeypatch):
    """A slow encoding call, then a slow clustering unit: the grid's lines keep coming and name the step."""
    from tecb_eval.grid import executors
    from tecb_eval.grid.run import run_grid

    real_unit = executors.run_unit

    def slow_unit(*args, **kwargs):
        clock.block()
        return real_unit(*args, **kwargs)

    monkeypatch.setattr(executors, "run_unit", slow_unit)
    with log:
        run_grid([demo_datasets / "blurbs-clustering-s2s"], [_slow_encoder(clock)], configurations=["minibatch_kmeans:none"],
                 limit_splits=1, cache_dir=tmp_path / "cache", jobs=1, progress=True)
    assert_beats(log, at_least=2 * SLOW_S, words="encoding with")
    text = log.getvalue()
    assert "grid cells: 0/1 cells (0 %); encoding with" in text and "reducing and clustering" in text, text


def test_layers_encoding_one_slow_forward_pass(clock, log, tmp_path):
    import numpy as np

    from tecb_eval.layers import encode_layers_once

    class SlowLayers:
        def layer_identity(self, k):
            return f"slow-fake-layer{k}"

        def encode_layers(self, texts, layers):
            clock.block()  # one chunk through a large model on a small machine
            return {k: np.full((len(texts), 4), float(k), dtype=np.float32) for k in layers}

    with log:
        assert encode_layers_once(SlowLayers(), [f"text {i}" for i in range(5)], [0, 1], tmp_path, progress=True) == 5
    assert_beats(log, at_least=SLOW_S, words="encoding 2 layers at once")


def test_grid_loading_a_model_that_exports_slowly(clock, log, demo_datasets, tmp_path, monkeypatch):
    """Loading a model is where backend=onnx exports it (70 s for MiniLM on this machine): one
    blocked call, before any encoding."""
    from tecb_eval.grid import run as grid_run

    real_open = grid_run.Grid._open_model

    def slow_open(self, spec):
        clock.block()  # torch's ONNX export of a large model
        return real_open(self, spec)

    monkeypatch.setattr(grid_run.Grid, "_open_model", slow_open)
    with log:
        grid_run.run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa"],
                          configurations=["minibatch_kmeans:none"], limit_splits=1, cache_dir=tmp_path / "cache",
                          jobs=1, progress=True)
    assert_beats(log, at_least=SLOW_S, words="loading tfidf-lsa")
    assert log.getvalue().count("grid cells: 0/1 cells (0 %); loading tfidf-lsa") >= SLOW_S // MAX_GAP


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`")  # the fake trains nothing
def test_finetune_training_steps_that_take_long(clock, log, tmp_path, monkeypatch):
    """One unit of fine-tuning whose steps each take minutes (a large model on the CPU): the loop's
    own lines keep coming. The model, objective and scores are fakes; the loop is the real one."""
    from types import SimpleNamespace

    import torch

    from tecb_eval.finetuning import loop
    from tecb_eval.finetuning.settings import settings_for

    epochs = [([object(), object(), object()], 0)]
    monkeypatch.setattr(loop, "plan", lambda *args, **kwargs: epochs)
    monkeypatch.setattr(loop, "check_trainable", lambda *args, **kwargs: epochs, raising=False)
    monkeypatch.setattr(loop, "tracking_scores", lambda *args: {"validation_ari": 0.1, "scored_v_measure": 0.2})
    monkeypatch.setattr(loop, "LiveSentenceTransformerEncoder", lambda *args, **kwargs: None)
    weight = torch.nn.Parameter(torch.zeros(1))
    monkeypatch.setattr(loop, "adamw", lambda model, **kwargs: torch.optim.SGD([weight], lr=0.1))

    class SlowObjective:
        def __init__(self, *args):
            pass

        def loss(self, instance, rng):
            clock.block()
            return None, 0

    monkeypatch.setattr(loop, "Objective", SlowObjective)
    model = SimpleNamespace(train=lambda: None)
    with log:
        loop.train_unit(model, "cob", SimpleNamespace(name="fold-x"), settings_for(save_best=False, eval_every=100), 42,
                        tmp_path, device="cpu", progress=True, info={})
    assert_beats(log, at_least=3 * SLOW_S, words="cob fold-x seed 42: 2/3 steps")


def test_rehydration_with_a_slow_reddit(clock, log, tmp_path, monkeypatch):
    """Each /api/info answer takes minutes (a throttled account): the rehydration's lines keep coming.
    Reddit is a fake; the rehydration, its cache and its progress are the real ones."""
    from types import SimpleNamespace

    from tecb_data.sources import reddit, reddit_api
    from tecb_data.sources.reddit_cache import RehydrationCache
    from tecb_data.sources.reddit_ids import IdList

    monkeypatch.setattr(reddit_api, "connect", lambda site, session=None: SimpleNamespace(
        config=SimpleNamespace(timeout=16)))
    monkeypatch.setattr(reddit_api, "with_retries", lambda call, what, **kwargs: call())

    def slow_batch(_reddit, batch):
        clock.block()
        return []  # every id removed: what Reddit says of them does not matter here

    monkeypatch.setattr(reddit_api, "fetch_batch", slow_batch)
    ids = IdList(ids=tuple(f"abc{i:03d}" for i in range(250)), subreddits={}, universe=None, input=None)
    with log:
        reddit.rehydrate(ids, RehydrationCache(tmp_path / "cache"), progress=True)
    assert_beats(log, at_least=3 * SLOW_S, words="rehydrating Reddit submissions: 100/250 ids")


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`")  # the fake trains nothing
def test_pretraining_steps_and_an_evaluation_that_take_long(clock, log):
    """Continued pre-training whose steps, and whose evaluation, each take minutes: the loop is the
    real one; the objective (no loss), the evaluation and the tracker are fakes."""
    from types import SimpleNamespace

    import torch

    from tecb_eval.pretraining.loop import Schedule, train_seed
    from tecb_eval.pretraining.settings import settings_for

    class SlowObjective:
        module = torch.nn.Linear(1, 1)

        def make_batch(self, texts):
            return {}

        def loss(self, batch):
            clock.block()  # a forward and backward pass of a large model on a small machine
            return None

    s = settings_for("wwm", max_steps=3, batch_size=1, grad_accumulation=1, eval_every=100, epochs=1)
    texts = ["ein Text", "noch ein Text", "der dritte Text"]
    tracker = SimpleNamespace(loss=lambda *args: None, best={})
    with log:
        outcome = train_seed(SlowObjective(), texts, s, 42, Schedule.of(len(texts), s), lambda step, epoch: clock.block(),
                             tracker, device="cpu", autocast=None, progress=True, label="blurbs")
    assert outcome.steps == 3
    # Three slow steps and a slow evaluation; the last beat falls within one interval of the end.
    assert_beats(log, at_least=4 * SLOW_S - MAX_GAP, words="blurbs seed 42: WWM epoch 1/1: 2/3 steps")
    assert "evaluating step 3" in log.getvalue()
