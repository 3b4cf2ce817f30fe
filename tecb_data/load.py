"""A published dataset folder -> the benchmark in memory (the one loader tecb_eval uses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tecb_data import layout
from tecb_data.errors import UserError


@dataclass(frozen=True)
class BenchmarkSplit:
    name: str
    texts: tuple[str, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Benchmark:
    name: str  # dataset name, e.g. "blurbs-clustering-s2s"
    splits: tuple[BenchmarkSplit, ...]
    fingerprint: str
    manifest: dict
    location: str  # folder or repo id@revision it came from

    @property
    def mteb_name(self) -> str:
        return self.manifest.get("mteb_name", self.name)


def load_folder(folder: Path, *, verify: bool = True) -> Benchmark:
    folder = Path(folder)
    manifest = layout.verify(folder) if verify else layout.read_manifest(folder)
    rows = layout.read_split_rows(folder)
    names = [s["name"] for s in manifest.get("splits", [])]
    if len(names) != len(rows):
        raise UserError(f"{folder}: {layout.DATA_FILE} has {len(rows)} rows but the manifest lists {len(names)} splits")
    splits = tuple(
        BenchmarkSplit(name, tuple(texts), tuple(labels)) for name, (texts, labels) in zip(names, rows)
    )
    return Benchmark(manifest["dataset"], splits, manifest["fingerprint"], manifest, str(folder))


def load(folder_or_repo_id: str | Path, revision: str | None = None) -> Benchmark:
    """Load a benchmark dataset from a folder written by ``tecb-data build`` (verified first)."""
    path = Path(folder_or_repo_id)
    if path.is_dir():
        if revision is not None:
            raise UserError(f"{path}: a local folder has no revisions; drop revision={revision!r}")
        return load_folder(path)
    raise UserError(f"{folder_or_repo_id}: no such dataset folder")
