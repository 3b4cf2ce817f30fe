import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
# Grids in tests run in the test's process unless a test asks for workers (tests/test_parallel.py):
# a pool of worker processes per tiny grid would only add start-up time. Users get every core.
os.environ.setdefault("TECB_JOBS", "1")


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: the integration tests need ../shared beside the repository")
    return path


class CountingEncoder:
    """An encoder object that records every text it is asked to encode."""

    def __init__(self, inner, identity):
        self.inner, self.identity, self.calls = inner, identity, []

    def encode(self, texts):
        self.calls.extend(texts)
        return self.inner.encode(texts)


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `tecb-data` in a fresh interpreter, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tecb_data.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=300,
    )


BOOK = """<book date="2019-01-04" xml:lang="de">
<title>{title}</title>
<body>{blurb}</body>
{categories}<isbn>{isbn}</isbn>
</book>
"""


def book(isbn: str, title: str, paths, blurb: str = "Ein Klappentext.") -> str:
    """One record in the GermEval 2019 format; ``paths`` are genre paths, top-level first."""
    if paths:
        categories = "<categories>\n" + "".join(
            "<category>\n" + "".join(f'<topic d="{d}">{name}</topic>\n' for d, name in enumerate(path)) + "</category>\n"
            for path in paths
        ) + "</categories>\n"
    else:
        categories = ""
    return BOOK.format(isbn=isbn, title=title, blurb=blurb, categories=categories)


@pytest.fixture(scope="session")
def demo_datasets(tmp_path_factory):
    """The four demo datasets, built once per test session."""
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    out = tmp_path_factory.mktemp("demo")
    for source in ("blurbs", "tenkgnad"):
        build(source, demo_input(source), out)
    return out


def run_args(data, results, cache, *extra) -> list[str]:
    """`tecb-eval run` of tfidf-lsa / k-means on one dataset: the grid the CLI tests poke at."""
    return ["run", "--data", str(data), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--results", str(results), "--cache-dir", str(cache), "--quiet", *extra]


def one_line_error(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` fails as a user error: exit 2 and exactly one line on stderr."""
    from tecb_eval.cli import main

    code = main(argv)
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and error.startswith("tecb-eval: error: "), error
    return error
