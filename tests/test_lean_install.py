"""`make demo` installs what the demo runs and nothing more: the package and its offline models.
`make test` adds the test extra. The demo's commands, each in a fresh interpreter (imports are the
point), import only modules that the demo's install brings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import SHARED_DATA
from leanenv import closure, distributions_of, installed_extras, make_dry_run

REPO = Path(__file__).resolve().parents[1]
# Imported when present, and each importer runs without it (the demo runs in `make demo`'s own
# environment, which lacks them): loky's memory checks (psutil), a terminal colour shim (colorama),
# httpx's async back-end probe (sniffio).
OPTIONAL = {"psutil", "colorama", "sniffio"}


def test_make_demo_installs_the_package_and_the_offline_models_and_make_test_adds_the_test_extra(tmp_path):
    assert installed_extras(make_dry_run("demo", tmp_path / ".venv")) == {"offline-models"}
    assert installed_extras(make_dry_run("test", tmp_path / ".venv")) == {"offline-models", "test"}


def _imported(stderr: str) -> set[str]:
    """Top-level modules a run under ``PYTHONPROFILEIMPORTTIME`` imported, in its process or its children."""
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)\s*$",
                                                           stderr, re.MULTILINE)}


@pytest.mark.slow
def test_the_demos_commands_import_nothing_the_demo_install_leaves_out(tmp_path):
    lean = closure(installed_extras(make_dry_run("demo", tmp_path / ".venv")))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPROFILEIMPORTTIME": "1", "TECB_JOBS": ""}
    out = tmp_path / "demo-out"
    # The authors' results file, which `make demo` passes when ../shared holds it.
    authors = SHARED_DATA.parent / "reference" / "tecb-de-full-results.csv"
    reference = ["--reference", str(authors)] if authors.is_file() else []
    # The Makefile's demo on the smallest demo dataset, its first split: every kind of step it takes
    # (build, stats, encode with both offline models, every reduction and algorithm, tables, plots).
    commands = [["tecb_data.cli", "build", "--source", "tenkgnad", "--demo", "--out", str(out)],
                ["tecb_data.cli", "stats", str(out / "tenkgnad-clustering-s2s")],
                ["tecb_eval.cli", "demo", "--data", str(out / "tenkgnad-clustering-s2s"), "--out", str(out / "eval"),
                 "--cache-dir", str(tmp_path / "cache"), "--limit-splits", "1", "--quiet", *reference]]
    imported: set[str] = set()
    for argv in commands:
        done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=REPO,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        imported |= _imported(done.stderr)
    outside = {module: sorted(owners) for module, owners in distributions_of(imported).items()
               if owners and not owners & lean and module not in OPTIONAL}
    assert not outside, f"the demo imports modules that `make demo` does not install: {outside}"
