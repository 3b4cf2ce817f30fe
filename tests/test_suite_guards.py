"""The suite's own guards. No test can hang the suite: pytest-timeout is on, with pyproject.toml's
default per test and a longer limit for the ``slow`` ones (tests/conftest.py), and a hanging test
fails alone. The repository holds source only; the tests keep their own datasets cache; no test
module imports another."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import SLOW_TIMEOUT_S
from helpers import REPO


def test_every_test_has_a_time_limit(request):
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not installed ([test] extra)"
    assert int(request.config.getini("timeout")) == 900
    assert request.node.get_closest_marker("timeout") is None  # an ordinary test: the default applies


@pytest.mark.slow
def test_slow_tests_get_the_longer_limit(request):
    assert request.node.get_closest_marker("timeout").args == (SLOW_TIMEOUT_S,)


def test_a_hanging_test_fails_alone_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_hang.py").write_text(
        "import time\nimport pytest\n\n"
        "@pytest.mark.timeout(2)\ndef test_hangs():\n    time.sleep(120)\n\n"
        "def test_after():\n    assert True\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "Timeout" in result.stdout and "1 failed, 1 passed" in result.stdout, result.stdout


MAX_TRACKED_BYTES = 2 * 1024 * 1024


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, timeout=60)


def test_the_repository_holds_source_only():
    """No tracked file over 2 MB (generated weights, exports and data belong in caches, not in git)."""
    if shutil.which("git") is None or _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout: nothing tracked to check")
    tracked = [name for name in _git("ls-files", "-z").stdout.decode().split("\0") if name]
    assert tracked, "git ls-files listed nothing"
    sizes = {name: (REPO / name).stat().st_size for name in tracked if (REPO / name).is_file()}
    too_big = {name: size for name, size in sizes.items() if size > MAX_TRACKED_BYTES}
    assert not too_big, f"tracked files over 2 MB (remove them with git rm --cached and ignore their pattern): {too_big}"


# What a profiler writes (cProfile/pstats, line_profiler, py-spy and Austin, speedscope, Scalene):
# a measurement of one machine at one time, which docs/benchmarks.md reports in words and figures.
PROFILER_OUTPUT = re.compile(r"\.(prof|pstats|lprof|cprof|austin|speedscope\.json)$|(^|/)(profile|scalene)[^/]*\.json$")


def test_the_repository_tracks_no_profiler_output():
    if shutil.which("git") is None or _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout: nothing tracked to check")
    tracked = [name for name in _git("ls-files", "-z").stdout.decode().split("\0") if name]
    profiles = [name for name in tracked if PROFILER_OUTPUT.search(name)]
    assert not profiles, f"profiler output is tracked (git rm it; bench/ prints figures): {profiles}"
    assert [bool(PROFILER_OUTPUT.search(name)) for name in ("g.prof", "bench/run.pstats", "speed.speedscope.json",
                                                           "tecb_eval/clustering/profiles.py")] == [True, True, True, False]


def test_the_tests_keep_their_own_datasets_cache():
    import datasets

    cache = Path(datasets.config.HF_DATASETS_CACHE).resolve()
    assert cache == Path(os.environ["HF_DATASETS_CACHE"]).resolve()
    assert not cache.is_relative_to(Path.home() / ".cache")


def _test_modules_imported(source: str, module: str) -> list[str]:
    """The test modules (``test_*``, also as ``tests.test_*``) other than ``module`` that ``source``
    imports, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            last = name.removeprefix("tests.").split(".")[0]
            if last.startswith("test_") and last != module:
                found.append(f"line {node.lineno}: {name}")
    return found


def test_no_test_module_imports_another():
    """Shared fixtures live in conftest.py and shared code in helper modules (hubserver.py,
    tablefiles.py, ...): a test module imported by another would run its tests' module-level code
    twice and tie the two files together."""
    # The check itself finds both forms, at module level and inside a function.
    assert len(_test_modules_imported("from test_a import x\ndef f():\n    import tests.test_b\n", "test_c")) == 2
    assert _test_modules_imported("from helpers import x\nimport tablefiles\n", "test_c") == []
    tests = Path(__file__).resolve().parent
    found = {path.name: imported for path in sorted(tests.glob("*.py"))
             if (imported := _test_modules_imported(path.read_text(encoding="utf-8"), path.stem))}
    assert found == {}, f"move what they share into conftest.py or a helper module: {found}"


def _conftest_imports(source: str) -> list[int]:
    """The lines of ``source`` that import conftest.py, at module level or inside a function."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if (isinstance(node, ast.ImportFrom) and not node.level and node.module == "conftest")
            or (isinstance(node, ast.Import) and any(alias.name == "conftest" for alias in node.names))]


def test_no_test_module_imports_conftest():
    """pytest gives a test its fixtures from conftest.py by name; what a test calls (a helper, a
    constant) is imported from an importable module such as tests/helpers.py, never from conftest."""
    assert _conftest_imports("from conftest import x\ndef f():\n    import conftest\nfrom helpers import y\n") == [1, 3]
    tests = Path(__file__).resolve().parent
    found = {path.name: lines for path in sorted(tests.glob("*.py"))
             if path.name != "conftest.py" and (lines := _conftest_imports(path.read_text(encoding="utf-8")))}
    assert found == {}, f"import these from tests/helpers.py (fixtures need no import): {found}"
