"""The published folder: what is written, how it is hashed, and how it is verified.

::

    OUT/<dataset>/
        README.md           dataset card (YAML metadata + body), rendered from cards/<source>.md.j2
        data/test.jsonl     MTEB's legacy clustering layout: one row per split, {"sentences", "labels"}
        data/samples.jsonl  provenance: one row per sample, {"id", "split", "text", "label", "path"}
        manifest.json       version, seed, inputs, splits, build report, file hashes, fingerprint
                            (over the file hashes and the fields that say what they mean)

Every file is written by this module's own serializer (sorted keys, UTF-8, "\\n" line ends), never
by a library whose output embeds its version, so the same content is the same bytes on any machine.
Each folder is assembled in a temporary sibling; all folders of one build are then renamed into
place together by :mod:`tecb_data.publication` (all or none, on Ctrl-C and SIGTERM too). A build
that dies leaves no new dataset folder behind, only ``.tecb-tmp-<pid>-*`` folders (and, if it died
while renaming, a journal) that the next build cleans up once that process is gone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tecb_data import inputs, publication
from tecb_data.errors import UserError, VerificationError
from tecb_data.outputs import created_folder, name_problem, write_failed

MANIFEST = "manifest.json"
CARD = "README.md"
DATA_FILE = "data/test.jsonl"
SAMPLES_FILE = "data/samples.jsonl"
TMP_PREFIX = ".tecb-tmp-"


# One encoder for every line: json.dumps with options builds a new encoder per call, which doubled
# the time a build spends writing its hundreds of thousands of sample rows.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def json_line(obj) -> str:
    return _LINE_ENCODER.encode(obj) + "\n"


def json_value(obj) -> str:
    """``obj`` encoded as :func:`json_line` encodes it, without the line's end: a part of a line
    that is put together from parts encoded once (a text repeated in many rows)."""
    return _LINE_ENCODER.encode(obj)


def json_document(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(files: dict[str, str]) -> str:
    """One hash over the published files (everything but the manifest): the card's data digest."""
    return hashlib.sha256(json_line(dict(sorted(files.items()))).encode("utf-8")).hexdigest()


# The manifest fields that say what the files mean: whose data and which view, the MTEB task the
# rows are reported under, the seed and recipe that drew the splits, the splits' names, and whether
# the texts may be published. Editing any of them changes what a score computed on the folder means,
# so the fingerprint covers them; the rest (inputs, build report, statistics, package version) is
# provenance or derived from the files.
MEANING_FIELDS = ("dataset", "source", "view", "mteb_name", "publishable", "seed", "recipe", "splits")


def manifest_fingerprint(manifest: dict) -> str:
    """The dataset's fingerprint: one hash over its file hashes and its :data:`MEANING_FIELDS`, so
    equal data and equal meaning give an equal fingerprint, and an edited manifest does not verify."""
    payload = {"files": dict(sorted(manifest["files"].items())),
               "meaning": {name: manifest.get(name) for name in MEANING_FIELDS}}
    return hashlib.sha256(json_line(payload).encode("utf-8")).hexdigest()


def check_fingerprint(manifest: dict, *, where: str, fix: str) -> None:
    """The manifest's fingerprint covers its files and meaning; one line naming what is wrong if not."""
    if manifest.get("fingerprint") == manifest_fingerprint(manifest):
        return
    if manifest.get("fingerprint") == fingerprint(manifest["files"]):
        raise VerificationError(f"{where}: built by an earlier tecb whose fingerprint did not cover the manifest's "
                                f"fields ({', '.join(MEANING_FIELDS)}), so an edit to them cannot be told; {fix}")
    raise VerificationError(f"{where}: fingerprint does not match its file hashes and fields "
                            f"({', '.join(MEANING_FIELDS)}): the manifest was edited or damaged; {fix}")


def _write_text(path: Path, chunks: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for chunk in chunks:
            fh.write(chunk)


def _temporary_prefix(kind: str) -> str:
    # The writer's pid is part of the name, so a build never removes the folder of another build
    # that is writing into the same OUT at the same time.
    return f"{TMP_PREFIX}{os.getpid()}-{kind}-"


def _writer_alive(folder: Path) -> bool:
    pid = folder.name[len(TMP_PREFIX):].split("-", 1)[0]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(out: Path) -> None:
    """Remove what killed builds left behind (their writer process is gone). A publication they
    left unfinished is finished or rolled back first: its old folders are among the temporaries."""
    out = Path(out)
    publication.recover(out)
    if out.is_dir():
        for stale in out.glob(TMP_PREFIX + "*"):
            if not _writer_alive(stale):
                shutil.rmtree(stale, ignore_errors=True)


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows (another thread may be
    creating files right now)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _as_mkdir_would(folder: Path) -> None:
    # mkdtemp makes a folder only its owner can read, and rename keeps that mode: published folders
    # get the mode a plain mkdir would have given them, so others on a shared machine can read them.
    os.chmod(folder, 0o777 & ~current_umask())


def _filesystem_error(where: Path, exc: OSError) -> UserError:
    # A file in a temporary folder that is removed on the way out is no help to name: name --out.
    named = exc.filename if exc.filename and TMP_PREFIX not in str(exc.filename) else None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) or named is None:
        return write_failed(f"--out {where}", exc, "cannot write the dataset")
    what = exc.strerror or str(exc) or type(exc).__name__
    return UserError(f"{named}: cannot write the dataset ({what}); choose a writable --out")


@dataclass(frozen=True)
class Dataset:
    """One folder to publish: its name under OUT, its files (relative path -> text chunks, or a function
    of the other files' SHA-256 that returns them), its manifest."""

    name: str
    files: dict[str, Iterable[str]]
    manifest: dict


def write_dataset(out: Path, name: str, files: dict[str, Iterable[str]], manifest: dict) -> Path:
    """Write ``files`` (relative path -> text chunks) and the manifest into ``out/name`` atomically.

    The manifest gets ``files`` (SHA-256 per file) and ``fingerprint`` added. Returns the folder.
    """
    return write_datasets(out, [Dataset(name, files, manifest)])[0]


def write_datasets(out: Path, datasets: list[Dataset]) -> list[Path]:
    """Write every dataset into a temporary sibling, then publish them all together (see
    :mod:`tecb_data.publication`): afterwards OUT holds all of them or, if anything failed or
    interrupted the build before the publication step, none of the new ones."""
    out = Path(out)
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise ValueError(f"dataset names repeat: {names}")
    with contextlib.ExitStack() as made:
        try:
            # A build that publishes nothing (a full disk, Ctrl-C) leaves no empty OUT it created.
            made.enter_context(created_folder(out))
        except FileExistsError:
            raise UserError(f"--out {out}: a file, not a folder; choose another --out") from None
        except OSError as exc:
            raise UserError(f"--out {out}: cannot create the output folder ({exc.strerror})") from None
        return _write_into(out, datasets, names)


def _write_into(out: Path, datasets: list[Dataset], names: list[str]) -> list[Path]:
    remove_stale_temporaries(out)
    for name in names:
        check_replaceable(out / name)
    staged: dict[str, Path] = {}
    try:
        for dataset in datasets:
            tmp = Path(tempfile.mkdtemp(prefix=_temporary_prefix(dataset.name), dir=out))
            staged[dataset.name] = tmp
            _as_mkdir_would(tmp)
            # A file given as a function (the card) is written last, from the other files' hashes.
            derived = {relative: make for relative, make in dataset.files.items() if callable(make)}
            for relative, chunks in dataset.files.items():
                if relative not in derived:
                    _write_text(tmp / relative, chunks)
            data_hashes = {relative: sha256_file(tmp / relative) for relative in sorted(dataset.files) if relative not in derived}
            for relative, make in derived.items():
                _write_text(tmp / relative, make(data_hashes))
            hashes = {relative: sha256_file(tmp / relative) for relative in sorted(dataset.files)}
            manifest = {**dataset.manifest, "files": hashes}
            manifest["fingerprint"] = manifest_fingerprint(manifest)
            _write_text(tmp / MANIFEST, [json_document(manifest)])
        publication.publish(out, [(staged[name], out / name) for name in names])
    except OSError as exc:
        raise _filesystem_error(out, exc) from None
    finally:
        for tmp in staged.values():  # after a publication they are gone; after a failure they go now
            shutil.rmtree(tmp, ignore_errors=True)
    return [out / name for name in names]


def check_out(out: Path) -> None:
    """Fail before any work if ``out`` cannot hold datasets: a file, or a folder we may not write."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: a file, not a folder; choose another --out")
    existing = next((p for p in [out, *out.parents] if p.exists()), None)
    if existing is not None and existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"--out {out}: {existing} is not writable; choose a writable --out")


def check_replaceable(target: Path) -> None:
    """A build replaces only a dataset folder it wrote: refuse a file or a foreign folder in the way."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise UserError(f"{target}: a file, not a dataset folder, is in the way; move it away or choose another --out")
    if target.is_dir() and not (target / MANIFEST).is_file():
        raise UserError(
            f"{target}: a folder without {MANIFEST} (not written by `tecb-data build`) is in the way; "
            "move it away or choose another --out"
        )


def read_manifest(folder: Path) -> dict:
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir():
        raise UserError(f"{folder}: no such dataset folder")
    if not path.is_file():
        raise UserError(f"{folder}: no {MANIFEST}; is this a folder written by `tecb-data build`?")
    try:
        manifest = json.loads(inputs.read_text(path, what=str(path)))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VerificationError(f"{path}: damaged manifest ({exc}); rebuild the dataset") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise VerificationError(f"{path}: manifest without a files table; rebuild the dataset")
    problem = manifest_problem(manifest)
    if problem:
        raise VerificationError(f"{path}: {problem}; rebuild the dataset")
    return manifest


def _is_name(value) -> bool:
    return isinstance(value, str) and value.strip() != ""


# The manifest's names that commands build file and folder names from: the dataset's (a
# pre-training run's folder), the MTEB task's (MTEB's results layout, the report's figures), the
# source's and the view's. A published folder is data someone else wrote: its names must be plain.
PATH_NAMES = ("dataset", "mteb_name", "source", "view")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def manifest_problem(manifest: dict) -> str | None:
    """What makes a manifest unusable by the evaluation (a field missing or of the wrong type, a
    name that is not a plain name, or one that contradicts the dataset registry), or None."""
    if "dataset" not in manifest:
        return "'dataset' is missing"
    # Without an MTEB name a dataset is reported under its own name (tecb_data.Benchmark.mteb_name).
    for name in PATH_NAMES:
        if name in manifest:
            problem = name_problem(manifest[name])
            if problem is not None:
                return (f"{name!r} {_shown(manifest[name])} {problem}, but a file or folder is named by it, "
                        "so it must be a plain name")
    seed = manifest.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        return f"'seed' must be a non-negative integer, got {seed!r}"
    splits = manifest.get("splits", [])
    if not isinstance(splits, list) or not all(isinstance(s, dict) and _is_name(s.get("name")) for s in splits):
        return "'splits' must be a list of splits, each with a name"
    from tecb_data.recipes import DATASETS

    spec = DATASETS.get(manifest["dataset"])
    if spec is not None:
        for name in ("mteb_name", "source", "view"):
            if name in manifest and manifest[name] != getattr(spec, name):
                return (f"{name!r} is {manifest[name]!r}, but {manifest['dataset']} is {getattr(spec, name)!r} "
                        "(tecb_data.recipes.DATASETS)")
    return None


def verify(folder: Path) -> dict:
    """Recompute every hash; raise VerificationError naming the first file that differs."""
    folder = Path(folder)
    if publication.pending(folder.parent):
        # A build killed while publishing may have left this folder in between; settle that first.
        try:
            publication.recover(folder.parent)
        except OSError as exc:
            raise UserError(
                f"{folder.parent}: a build was killed while publishing here and it cannot be rolled back "
                f"({exc.strerror}); run `tecb-data build` into {folder.parent} again with write access"
            ) from None
    manifest = read_manifest(folder)
    files = manifest["files"]
    for relative in sorted(files):
        path = folder / relative
        if not path.is_file():
            raise VerificationError(f"{path}: missing (listed in {MANIFEST}); rebuild or re-download the dataset")
        if sha256_file(path) != files[relative]:
            raise VerificationError(f"{path}: content differs from {MANIFEST}; rebuild or re-download the dataset")
    on_disk = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and ".cache" not in p.relative_to(folder).parts
    }
    extra = sorted(on_disk - set(files) - {MANIFEST})
    if extra:
        raise VerificationError(f"{folder / extra[0]}: not listed in {MANIFEST}; remove it or rebuild the dataset")
    check_fingerprint(manifest, where=str(folder / MANIFEST), fix="rebuild the dataset")
    return manifest


def read_split_rows(folder: Path) -> list[tuple[list[str], list[str] | None]]:
    """(sentences, labels) per split row of the clustering file, in published order; labels None
    for a row without them (a corpus built without labels)."""
    path = Path(folder) / DATA_FILE
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                row = json.loads(line)
                labels = row.get("labels")
                if labels is not None and len(row["sentences"]) != len(labels):
                    raise UserError(f"{path}:{number}: sentences and labels differ in length")
                if not isinstance(row["sentences"], list):
                    raise TypeError("sentences is not a list")
                rows.append((row["sentences"], labels))
    except FileNotFoundError:
        raise UserError(f"{path}: missing; is {folder} a dataset folder written by `tecb-data build`?") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{path}:{number}: not a clustering row ({exc}); rebuild the dataset") from None
    return rows


def read_label_paths(folder: Path) -> list[list[tuple[str, ...]] | None]:
    """Per split row of the clustering file, every text's label path (``label_paths``: the levels of
    a label hierarchy, top first; Blurbs recipe version 3 on), or None for a row without them (a
    dataset built before them, or one without a hierarchy)."""
    path = Path(folder) / DATA_FILE
    out = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            row = json.loads(line)
            paths = row.get("label_paths")
            if paths is None:
                out.append(None)
                continue
            if (not isinstance(paths, list) or len(paths) != len(row["sentences"])
                    or not all(isinstance(p, list) and all(isinstance(x, str) and x for x in p) for p in paths)):
                raise UserError(f"{path}:{number}: label_paths is not one list of labels per sentence; rebuild the dataset")
            out.append([tuple(p) for p in paths])
    return out
