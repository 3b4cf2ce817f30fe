"""The published folder: what is written, how it is hashed, and how it is verified.

::

    OUT/<dataset>/
        README.md           dataset card (YAML metadata + body), rendered from cards/<source>.md.j2
        data/test.jsonl     MTEB's legacy clustering layout: one row per split, {"sentences", "labels"}
        data/samples.jsonl  provenance: one row per sample, {"id", "split", "text", "label", "path"}
        manifest.json       version, seed, inputs, splits, build report, file hashes, fingerprint

Every file is written by this module's own serializer (sorted keys, UTF-8, "\\n" line ends), never
by a library whose output embeds its version, so the same content is the same bytes on any machine.
The folder is assembled in a temporary sibling and renamed into place: a build that dies leaves no
dataset folder behind, only a ``.tecb-tmp-<pid>-*`` folder that the next build removes once that
process is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from tecb_data.errors import UserError, VerificationError

MANIFEST = "manifest.json"
CARD = "README.md"
DATA_FILE = "data/test.jsonl"
SAMPLES_FILE = "data/samples.jsonl"
TMP_PREFIX = ".tecb-tmp-"


def json_line(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def json_document(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(files: dict[str, str]) -> str:
    """One hash over the published files (everything but the manifest): equal data, equal fingerprint."""
    return hashlib.sha256(json_line(dict(sorted(files.items()))).encode("utf-8")).hexdigest()


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
    """Remove what killed builds left behind (their writer process is gone)."""
    if out.is_dir():
        for stale in out.glob(TMP_PREFIX + "*"):
            if not _writer_alive(stale):
                shutil.rmtree(stale, ignore_errors=True)


def write_dataset(out: Path, name: str, files: dict[str, Iterable[str]], manifest: dict) -> Path:
    """Write ``files`` (relative path -> text chunks) and the manifest into ``out/name`` atomically.

    The manifest gets ``files`` (SHA-256 per file) and ``fingerprint`` added. Returns the folder.
    """
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out}: cannot create the output folder ({exc.strerror})") from None
    target = out / name
    tmp = Path(tempfile.mkdtemp(prefix=_temporary_prefix(name), dir=out))
    try:
        for relative, chunks in files.items():
            _write_text(tmp / relative, chunks)
        hashes = {relative: sha256_file(tmp / relative) for relative in sorted(files)}
        manifest = {**manifest, "files": hashes, "fingerprint": fingerprint(hashes)}
        _write_text(tmp / MANIFEST, [json_document(manifest)])
        _replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _replace_dir(new: Path, target: Path) -> None:
    """Put ``new`` at ``target``. An existing dataset is moved aside first and removed only after
    the new one is in place, so at no moment is a half-written folder at ``target``."""
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=_temporary_prefix("old"), dir=target.parent))
        os.replace(target, aside / "old")
        try:
            os.replace(new, target)
        except BaseException:
            os.replace(aside / "old", target)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(new, target)


def read_manifest(folder: Path) -> dict:
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir():
        raise UserError(f"{folder}: no such dataset folder")
    if not path.is_file():
        raise UserError(f"{folder}: no {MANIFEST}; is this a folder written by `tecb-data build`?")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VerificationError(f"{path}: damaged manifest ({exc}); rebuild the dataset") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise VerificationError(f"{path}: manifest without a files table; rebuild the dataset")
    return manifest


def verify(folder: Path) -> dict:
    """Recompute every hash; raise VerificationError naming the first file that differs."""
    folder = Path(folder)
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
    if manifest.get("fingerprint") != fingerprint(files):
        raise VerificationError(f"{folder / MANIFEST}: fingerprint does not match its file hashes; rebuild the dataset")
    return manifest


def read_split_rows(folder: Path) -> list[tuple[list[str], list[str]]]:
    """(sentences, labels) per split row of the clustering file, in published order."""
    path = Path(folder) / DATA_FILE
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                row = json.loads(line)
                if len(row["sentences"]) != len(row["labels"]):
                    raise UserError(f"{path}:{number}: sentences and labels differ in length")
                rows.append((row["sentences"], row["labels"]))
    except FileNotFoundError:
        raise UserError(f"{path}: missing; is {folder} a dataset folder written by `tecb-data build`?") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{path}:{number}: not a clustering row ({exc}); rebuild the dataset") from None
    return rows
