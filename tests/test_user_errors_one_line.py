"""Errors a user can cause end in one line and an exit code other than 0, never a traceback or a
success that lost its output (and what is no error is done, not a traceback): a view given twice
(built once, as a dataset given twice is evaluated once), a memory limit that
is empty, infinite or negative, a JSON Lines table holding a lone surrogate escape, a CSV with old
Mac line ends (read, not refused), a command whose standard output is closed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import run_cli_here
from tablefiles import built_texts, table_build, table_rows
from tecb_data.errors import UserError
from helpers import REPO



def parsed(*args: str, main=None) -> subprocess.CompletedProcess:
    """:func:`run_cli_here`, with argparse's exit on a usage error taken as the exit code it gives."""
    import contextlib
    import io

    try:
        return run_cli_here(*args, main=main)
    except SystemExit as exc:  # argparse has printed its line to the real stderr: run it again to catch it
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            from tecb_data import cli

            (main or cli.main)(list(args))
        return subprocess.CompletedProcess(list(args), exc.code, "", err.getvalue())


def one_line(done, *needles: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_a_view_given_twice_is_built_once_with_a_note(tmp_path):
    table = tmp_path / "t.tsv"
    table.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in table_rows(40)), encoding="utf-8")
    done = table_build(table, tmp_path / "out", "--view", "s2s", "--view", "s2s")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "note: --view s2s given 2 times; it is built once" in done.stderr
    assert built_texts(tmp_path / "out") == {text for text, _ in table_rows(40)}


@pytest.mark.parametrize("value, needle", [("", "empty"), ("inf", "not a"), ("-5GB", "--memory-limit=VALUE")])
def test_a_memory_limit_that_is_no_size_is_one_line(tmp_path, value, needle):
    from tecb_eval.cli import main

    done = parsed("workers", "--memory-limit", value, main=main)
    one_line(done, needle)
    done = parsed("run", "--data", str(tmp_path), "--model", "tfidf-lsa", "--results",
                        str(tmp_path / "r.jsonl"), "--memory-limit", value, main=main)
    one_line(done, needle)
    assert not (tmp_path / "r.jsonl").exists()


def test_a_lone_surrogate_in_a_json_lines_table_is_named_with_its_line(tmp_path):
    rows = [{"text": text, "label": label} for text, label in table_rows(40)]
    lines = [json.dumps(r) for r in rows]
    lines[6] = '{"text": "Tor \\ud800 Spiel", "label": "Sport"}'
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    one_line(done, "line 7", "'text'", "surrogate")


def test_a_csv_with_carriage_return_line_ends_is_read(tmp_path):
    path = tmp_path / "mac.csv"
    path.write_bytes(("text,label\r" + "".join(f"{t},{l}\r" for t, l in table_rows(40))).encode("utf-8"))
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert built_texts(tmp_path / "out") == {text for text, _ in table_rows(40)}


def test_a_command_whose_standard_output_is_closed_fails_in_one_line(blurbs_folder):
    # The fresh interpreter is the point: Python starts without sys.stdout when descriptor 1 is closed.
    done = subprocess.run(
        ["sh", "-c", f'exec "$0" -m tecb_data.cli verify "$1" >&-', sys.executable, str(blurbs_folder)],
        capture_output=False, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
        env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0 and len(lines) == 1 and "standard output is closed" in lines[0], done.stderr
    assert "atexit" not in done.stderr and "Traceback" not in done.stderr


def test_a_layer_out_of_range_names_the_whole_range_negative_ones_included(tiny_bert):
    from tecb_eval.models.kinds.mean_pooling import MeanPoolingEncoder

    last = MeanPoolingEncoder(tiny_bert, "tiny", layer=-1)
    n = last.n_layers
    assert last.identity == MeanPoolingEncoder(tiny_bert, "tiny").identity  # -1 is the last layer
    with pytest.raises(UserError) as error:
        MeanPoolingEncoder(tiny_bert, "tiny", layer=n + 1)
    assert f"0..{n}" in str(error.value) and f"-{n + 1}..-1" in str(error.value)
