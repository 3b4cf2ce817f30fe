"""What a grid run spent and what it found done: per dataset the cells from the store, the texts
encoded and cached, the reductions computed and cached; the encoding time per model, the wall clock
per phase, and each worker's peak memory and CPU time. The summary lines a run ends with."""

from __future__ import annotations

import pandas as pd


class Ledger:
    def __init__(self, task_names: dict[str, str] | None = None):
        self.encode_seconds: dict[str, float] = {}  # model name -> seconds encoding
        self.encoded_texts: dict[str, int] = {}  # model name -> texts encoded
        self.new_rows: list[dict] = []  # the cells this run computed (the rest came from the store)
        self.wall_seconds: dict[str, float] = {}  # phase -> wall-clock seconds of this run
        self.worker_rss: dict[int, int] = {}  # worker pid -> its peak RSS in bytes
        self.worker_cpu: dict[int, float] = {}  # worker pid -> CPU seconds its units took
        self.units_on: dict[str, int] = {}  # where units ran (a Dask worker's address, a process) -> units
        self.shards_on: dict[str, dict[str, int]] = {}  # model -> {Dask worker address: shards it encoded}
        self.scheduler = ""  # the Dask scheduler's address, on a cluster
        self.spent: dict[str, dict] = {}  # dataset -> what this run spent and found done there
        # dataset folder name -> its MTEB task name: the summary names a dataset as the tables
        # printed beside it do (docs/datasets.md, "Two names for one dataset")
        self.task_names: dict[str, str] = dict(task_names or {})

    def of(self, dataset: str) -> dict:
        return self.spent.setdefault(dataset, {"stored": 0, "texts": 0, "encoded": 0,
                                               "reduced": 0, "reduce_cached": 0})

    def add_wall(self, phase: str, seconds: float) -> None:
        self.wall_seconds[phase] = self.wall_seconds.get(phase, 0.0) + seconds

    def add_encoding(self, model: str, seconds: float, texts: int) -> None:
        self.encode_seconds[model] = self.encode_seconds.get(model, 0.0) + seconds
        self.encoded_texts[model] = self.encoded_texts.get(model, 0) + texts

    def _encoded_where(self, model: str) -> str:
        shards = self.shards_on.get(model)
        if not shards:
            return " in this process"
        return (f" on the Dask cluster at {self.scheduler}: {sum(shards.values())} shards on {len(shards)} "
                f"worker{'s' if len(shards) != 1 else ''} ({', '.join(f'{w} {n}' for w, n in sorted(shards.items()))})")

    def _clustered_where(self) -> str:
        units = sum(self.units_on.values())
        workers = [w for w in self.units_on if "://" in w]
        if workers:
            return (f"reduced and clustered {units} units on the Dask cluster at {self.scheduler or 'the scheduler'}, "
                    f"{len(workers)} worker{'s' if len(workers) != 1 else ''}: "
                    + ", ".join(f"{w} {self.units_on[w]}" for w in sorted(workers)))
        if list(self.units_on) == ["this process"]:
            return f"reduced and clustered {units} units in this process"
        return f"reduced and clustered {units} units in {len(self.units_on)} local worker processes"

    def seconds_per_text(self, model: str) -> float:
        return self.encode_seconds.get(model, 0.0) / self.encoded_texts[model] if self.encoded_texts.get(model) else 0.0

    def add_worker(self, pid: int, max_rss: int, cpu_s: float, worker: str = "") -> None:
        import os

        where = worker or ("this process" if pid == os.getpid() else f"local worker process {pid}")
        self.units_on[where] = self.units_on.get(where, 0) + 1
        self.worker_rss[pid] = max(self.worker_rss.get(pid, 0), max_rss)
        self.worker_cpu[pid] = self.worker_cpu.get(pid, 0.0) + cpu_s

    def summary(self) -> list[str]:
        """Where this run's time went, per dataset (encoding, reductions, clustering), and its wall clock."""
        lines = [f"{name}: encoded {self.encoded_texts[name]:,} new unique texts in {seconds:.1f} s"
                 + self._encoded_where(name) for name, seconds in self.encode_seconds.items()]
        if self.units_on:
            lines.append(self._clustered_where())
        if not self.spent:
            return lines
        frame = pd.DataFrame(self.new_rows, columns=["dataset", "reduce_s", "cluster_s", "levels_s", "dbcv_s"])
        # Each figure is what this run spent; what it found done (results store, caches) is counted
        # beside it, so a resumed or cached run does not look slow or free.
        for dataset, spent in sorted(self.spent.items(), key=lambda item: self.task_names.get(item[0], item[0])):
            part = frame[frame.dataset == dataset]
            shown = self.task_names.get(dataset, dataset)
            if part.empty:
                lines.append(f"{shown}: all {spent['stored']:,} cells from the results store; nothing computed")
                continue
            lines.append(_dataset_line(shown, spent, part))
        if self.wall_seconds:
            lines.append("wall clock of this run: " + ", ".join(f"{phase} {s:.1f} s"
                                                                for phase, s in self.wall_seconds.items()))
        if self.worker_rss:
            peaks = ", ".join(f"{rss / 2**20:,.0f}" for _, rss in sorted(self.worker_rss.items()))
            lines.append(f"peak RSS per worker process (MiB): {peaks}")
            # Summed over workers and set beside the wall clock: work a worker redid (numba code that
            # cannot be cached compiles again in each process) shows here, not in the scores.
            cpu = ", ".join(f"{s:,.1f}" for _, s in sorted(self.worker_cpu.items()))
            lines.append(f"CPU seconds in units per worker process: {cpu}")
        return lines


def _dataset_line(dataset: str, spent: dict, part: pd.DataFrame) -> str:
    # The encoding time is the model's pass over every dataset's texts together (the line per
    # model above); split by dataset it would be a guess, so the count stands here.
    cached = spent["texts"] - spent["encoded"]
    encode = (f"encoded {spent['encoded']:,} texts" + (f" ({cached:,} from the embedding cache)" if cached else "")
              if spent["encoded"] else f"all {spent['texts']:,} texts from the embedding cache")
    reductions = spent["reduced"] + spent["reduce_cached"]
    reduce = (f"{spent['reduced']:,} of {reductions:,} reductions computed in {part.reduce_s.sum():.1f} s"
              + (f" ({spent['reduce_cached']:,} from the cache)" if spent["reduce_cached"] else "")
              if reductions else "no reductions")
    # Whether the clause is said follows from what was computed, never from how long it took.
    scored = part.levels_s.notna().any() or part.dbcv_s.notna().any()
    scoring = float(part.levels_s.fillna(0).sum() + part.dbcv_s.fillna(0).sum())
    return (f"{dataset}: {len(part):,} cell{'s' if len(part) != 1 else ''} computed"
            + (f", {spent['stored']:,} from the results store" if spent["stored"] else "")
            + (f", {spent['stability_reruns']:,} of them run again for their stability"
               if spent.get("stability_reruns") else "")
            + f"; {encode}; {reduce}; clustering {part.cluster_s.sum():.1f} s"
            # Per-level scores cluster again per level (as MTEB does); DBCV takes distances.
            + (f", per-level scores and DBCV {scoring:.1f} s" if scored else "")
            + " (summed over workers)")
