"""Issue 32, round 3 of the adversarial trial, through the real commands: a --results that cannot
hold a store ends at once in one line; no output overwrites an input or lands inside a dataset;
a TSV's stray quote joins no rows; labels one reader spells two ways are one; an overlong prompt is
refused and cut text is counted; a failed export leaves no work folder; card text cannot add a
YAML key or end the BibTeX block; user errors keep exit code 2 under --debug; an interrupt never
names a removed store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import one_line_error, run_args, run_cli, run_cli_here
from test_outputs_owned import _fill, small_fs  # noqa: F401 (a fixture: a small tmpfs, or a skip)
from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_eval.cli import main

DATASET = "tenkgnad-clustering-s2s"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TECB_JOBS": "1"}
WORDS = {"Sport": "Tor Spiel Trainer Liga Sieg", "Kultur": "Oper Roman Theater Bühne Konzert",
         "Politik": "Wahl Partei Minister Gesetz Rat", "Wetter": "Regen Sonne Wind Sturm Schnee"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("round3-data")
    build("tenkgnad", demo_input("tenkgnad"), out, views=("s2s",))
    return out / DATASET


def table_rows(n: int = 200) -> list[tuple[str, str]]:
    """(text, label) rows, every text unique, four labels."""
    labels = sorted(WORDS)
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = WORDS[label].split()
        rows.append((f"{words[i % 5]} {words[(i // 5) % 5]} Meldung {i}", label))
    return rows


def write_tsv(path: Path, rows) -> Path:
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows), encoding="utf-8")
    return path


def table_build(input_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    # In this process: what the build writes and refuses is the same, without an interpreter's start
    # per build (these tests build a dozen times).
    return run_cli_here("build", "--source", "table", "--input", str(input_path), "--name", "round3", "--text",
                        "text", "--label", "label", "--out", str(out), "--quiet", *extra)


def one_error_line(done: subprocess.CompletedProcess, prog: str = "tecb-data") -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), done.stderr
    return lines[0]


def eval_error(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` fails as a user error: exit 2 and one line (transformers' own "Loading
    weights" bar aside), whatever earlier commands of the test printed."""
    capsys.readouterr()
    code = main(argv)
    error = capsys.readouterr().err
    lines = [line for line in error.splitlines() if line.strip() and "Loading weights" not in line]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("tecb-eval: error: "), error
    return lines[0]


def samples(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "data" / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def built_texts(out: Path) -> set[str]:
    return {row["text"] for row in samples(out / "round3-s2s")}


def built_labels(out: Path) -> set[str]:
    return {row["label"] for row in samples(out / "round3-s2s")}


# -- hang: a --results that names a link to nothing ---------------------------------------------

@pytest.mark.slow
def test_a_dangling_link_as_results_ends_within_ten_seconds_in_one_line(data, tmp_path):
    link = tmp_path / "results.jsonl"
    link.symlink_to(tmp_path / "gone" / "results.jsonl")
    def timed(results) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tecb_eval.cli", *run_args(data, results, tmp_path / "cache")],
                              capture_output=True, text=True, env=ENV, timeout=120)
        return done, time.monotonic() - started

    # The same command failing at once on another --results: what starting Python and importing
    # costs on this machine now (a loaded 2-core box takes seconds); the link must add under 10 s.
    baseline, startup = timed("/dev/null")
    assert baseline.returncode == 2
    done, seconds = timed(link)
    assert seconds < startup + 10, (seconds, startup)
    error = one_error_line(done, "tecb-eval")
    assert str(link) in error and "does not exist" in error
    # The library's store opener (no command-line check before it) ends the same way, never spinning.
    from tecb_data.errors import UserError
    from tecb_eval.grid.store import ResultsStore

    with pytest.raises(UserError, match="does not exist"):
        ResultsStore(link, lock=True)


def test_results_that_cannot_hold_a_store_is_refused_before_the_first_encode(data, tmp_path, capsys):
    cache = tmp_path / "cache"
    error = one_line_error(capsys, run_args(data, "/dev/null", cache))
    assert "not a regular file" in error and not cache.exists()
    error = one_line_error(capsys, run_args(data, data / "results.jsonl", cache))
    assert "lies inside the input" in error and not (data / "results.jsonl").exists() and not cache.exists()


# -- data loss: an output onto an input, into a dataset -------------------------------------------

@pytest.mark.slow
def test_report_onto_the_input_or_the_new_manifest_is_refused_before_work(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    before = source.read_bytes()
    error = one_error_line(table_build(source, tmp_path / "out", "--report", str(source)))
    assert "--report" in error and "is the input" in error and source.read_bytes() == before
    assert not (tmp_path / "out").exists()
    assert table_build(source, tmp_path / "out").returncode == 0
    manifest = tmp_path / "out" / "round3-s2s" / "manifest.json"
    kept = manifest.read_bytes()
    error = one_error_line(table_build(source, tmp_path / "out", "--seed", "5", "--report", str(manifest)))
    assert "--report" in error and manifest.read_bytes() == kept
    assert run_cli("verify", str(tmp_path / "out" / "round3-s2s")).returncode == 0
    # A file the build did not write is never replaced; its own earlier report is.
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}\n', encoding="utf-8")
    error = one_error_line(table_build(source, tmp_path / "out", "--report", str(notes)))
    assert "was not written by this command" in error and notes.read_text(encoding="utf-8") == '{"mine": 1}\n'
    report = tmp_path / "report.json"
    assert table_build(source, tmp_path / "out", "--report", str(report)).returncode == 0
    assert table_build(source, tmp_path / "out", "--report", str(report), "--seed", "3").returncode == 0


@pytest.mark.slow
def test_build_out_holding_its_input_or_inside_a_dataset_is_refused(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    assert table_build(source, tmp_path / "out").returncode == 0
    published = tmp_path / "out" / "round3-s2s" / "data" / "samples.jsonl"
    kept = published.read_bytes()
    error = one_error_line(run_cli("build", "--source", "table", "--input", str(published), "--name", "round3",
                                   "--text", "text", "--label", "label", "--out", str(tmp_path / "out"), "--quiet"))
    assert "holds the input" in error and published.read_bytes() == kept
    error = one_error_line(table_build(source, tmp_path / "out" / "round3-s2s"))
    assert "inside the dataset folder" in error


# -- silent-wrong: TSV quotes, label spellings ---------------------------------------------------

@pytest.mark.slow
def test_a_stray_quote_in_a_tsv_joins_no_rows(tmp_path):
    # Long texts: the quotes lie past the part of the file a dialect sniffer reads.
    rows = [(f"{text} " + "Wort " * 80, label) for text, label in table_rows()]
    rows[180] = ('"Zitat ohne Ende ' + rows[180][0], rows[180][1])
    rows[184] = (rows[184][0] + ' Ende"', rows[184][1])
    out = tmp_path / "out"
    done = table_build(write_tsv(tmp_path / "stray.tsv", rows), out)
    assert done.returncode == 0, done.stderr
    texts = built_texts(out)
    assert len(texts) == 200 and any(t.startswith('"Zitat ohne Ende') for t in texts)


@pytest.mark.slow
def test_a_csv_record_over_several_lines_is_said_with_its_line(tmp_path):
    rows = table_rows(40)
    lines = ["text,label"] + [f"{t},{l}" for t, l in rows]
    lines[11] = '"Er sagte hallo'  # a quote opens a field that runs on to the quote two lines down
    lines[13] = 'und ging",Sport'
    path = tmp_path / "stray.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    said = done.stderr + done.stdout
    assert done.returncode == 0 and "line 12" in said and "span several lines" in said, said


@pytest.mark.slow
def test_numeric_labels_spelled_1_1dot0_and_quoted_are_one_label(tmp_path):
    rows = []
    for i, (text, label) in enumerate(table_rows(60)):
        rows.append({"text": text, "label": [1, 1.0, "1"][i % 3] if label in ("Sport", "Kultur") else 2})
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert built_labels(tmp_path / "out") == {"1", "2"}


# -- unclear messages of the table source ----------------------------------------------------------

@pytest.mark.slow
def test_a_line_separator_inside_a_json_string_is_valid_json_lines(tmp_path):
    rows = [{"text": t, "label": l} for t, l in table_rows(40)]
    rows[3]["text"] = "Zeile mit\u2028Trenner und\u2029Absatz"
    path = tmp_path / "sep.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert len(built_texts(tmp_path / "out")) == 40


@pytest.mark.slow
def test_a_csv_field_longer_than_the_csv_modules_default_limit_is_read(tmp_path):
    rows = table_rows(40)
    rows[7] = ("Langer Text " + "x" * 200_000, rows[7][1])
    path = tmp_path / "long.csv"
    path.write_text("text,label\n" + "".join(f'"{t}",{l}\n' for t, l in rows), encoding="utf-8")
    done = table_build(path, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert max(len(t) for t in built_texts(tmp_path / "out")) > 200_000


@pytest.mark.slow
def test_a_datasetdict_error_names_input_split(tmp_path):
    import datasets

    rows = table_rows(40)
    part = datasets.Dataset.from_dict({"text": [t for t, _ in rows], "label": [l for _, l in rows]})
    datasets.DatasetDict({"train": part, "test": part}).save_to_disk(str(tmp_path / "dd"))
    error = one_error_line(table_build(tmp_path / "dd", tmp_path / "out"))
    assert "--input-split" in error and "--split " not in error


@pytest.mark.slow
def test_a_truncated_parquet_file_is_called_truncated(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = table_rows(200)
    pq.write_table(pa.Table.from_pylist([{"text": t, "label": l} for t, l in rows]), tmp_path / "whole.parquet")
    raw = (tmp_path / "whole.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(raw[: len(raw) // 2])
    error = one_error_line(table_build(tmp_path / "cut.parquet", tmp_path / "out"))
    assert "truncated" in error and "looks like a Parquet file" not in error and "name it .parquet" not in error


@pytest.mark.slow
def test_a_language_mteb_does_not_know_is_refused_at_build_time(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    error = one_error_line(table_build(source, tmp_path / "out", "--language", "zz"))
    assert "--language 'zz'" in error and not (tmp_path / "out").exists()


# -- security: the card ----------------------------------------------------------------------------

def front_matter(card: Path) -> dict:
    text = card.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


@pytest.mark.slow
def test_user_text_cannot_add_a_key_to_the_cards_front_matter(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    assert table_build(source, tmp_path / "plain").returncode == 0
    keys = set(front_matter(tmp_path / "plain" / "round3-s2s" / "README.md"))
    error = one_error_line(table_build(source, tmp_path / "out", "--pretty-name", "News\nviewer: false"))
    assert "--pretty-name" in error and not (tmp_path / "out").exists()
    hostile = 'News": x\' # viewer: false {a: b} [c] &d *e !f %g @h `i` | >'
    done = table_build(source, tmp_path / "out", "--pretty-name", hostile)
    assert done.returncode == 0, done.stderr
    meta = front_matter(tmp_path / "out" / "round3-s2s" / "README.md")
    assert set(meta) == keys and meta["pretty_name"] == hostile + " S2S"


@pytest.mark.slow
def test_a_code_fence_in_the_citation_stays_inside_the_bibtex_block(tmp_path):
    from markdown_it import MarkdownIt

    source = write_tsv(tmp_path / "in.tsv", table_rows())
    citation = tmp_path / "cite.bib"
    citation.write_text("@misc{x,\n  note = {see\n```\n# Injected heading\n```\n},\n}\n", encoding="utf-8")
    done = table_build(source, tmp_path / "out", "--citation", str(citation))
    assert done.returncode == 0, done.stderr
    body = (tmp_path / "out" / "round3-s2s" / "README.md").read_text(encoding="utf-8").split("---\n", 2)[2]
    tokens = MarkdownIt("commonmark").parse(body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "Injected heading" not in headings
    fences = [t.content for t in tokens if t.type == "fence"]
    assert any("# Injected heading" in f and "@misc{x," in f for f in fences)


# -- unclear messages and exit codes of tecb-eval -------------------------------------------------

def test_an_unknown_model_option_is_named(data, tmp_path, capsys):
    argv = run_args(data, tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("tfidf-lsa")] = "minilm-l6,foo=bar"
    error = one_line_error(capsys, argv)
    assert "'foo'" in error


@pytest.mark.slow
def test_debug_keeps_the_exit_code_of_a_user_error(data, tmp_path):
    argv = run_args(data, "/dev/null", tmp_path / "cache")
    done = subprocess.run([sys.executable, "-m", "tecb_eval.cli", "--debug", *argv], capture_output=True, text=True,
                          env=ENV, timeout=120)
    assert done.returncode == 2 and "Traceback" in done.stderr and "tecb-eval: error: " in done.stderr
    done = run_cli("--debug", "build", "--source", "table", "--input", str(tmp_path / "absent.csv"), "--name", "x",
                   "--text", "text", "--label", "label", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" in done.stderr


def test_an_interrupt_before_any_cell_does_not_name_the_removed_store(data, tmp_path, capsys, monkeypatch):
    from tecb_eval.models.encoders import TfidfLsaEncoder

    def interrupted(self, texts):
        raise KeyboardInterrupt

    monkeypatch.setattr(TfidfLsaEncoder, "encode", interrupted)
    results = tmp_path / "results.jsonl"
    capsys.readouterr()
    assert main(run_args(data, results, tmp_path / "cache")) == 130
    error = capsys.readouterr().err
    assert not results.exists() and str(results) not in error and "no cell had finished" in error, error


# -- the bootstrap interval depends on the scores, not on who scored them -------------------------

def test_identical_scores_get_identical_intervals_whatever_their_names():
    import numpy as np
    import pandas as pd

    from tecb_eval.reports import compare

    index = pd.MultiIndex.from_product([[f"split{i}" for i in range(10)], [42]], names=["split", "seed"])
    scores = pd.Series(np.random.default_rng(3).uniform(0.3, 0.6, len(index)), index=index)
    assert compare.mean_interval(scores, name="D/none/v") == compare.mean_interval(scores.copy(), name="D/cob/v")
    other = scores + np.random.default_rng(4).normal(0, 0.02, len(index))
    one = compare.paired_difference(other, scores, dataset="D", model_a="cob", model_b="none")
    two = compare.paired_difference(other.copy(), scores.copy(), dataset="D", model_a="triplet", model_b="none")
    assert (one.low, one.high, one.p_value) == (two.low, two.high, two.p_value)


# -- prompts that leave no room, text cut away, and the ONNX export of a cached model ------------

@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory, data):
    """A sentence-transformers model around a tiny random BERT (max_seq_length 32, mean pooling)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from conftest import SPECIAL_TOKENS, save_tiny_bert, text_vocabulary
    import tecb_data

    texts = [t for split in tecb_data.load(data).splits for t in split.texts]
    root = tmp_path_factory.mktemp("round3-st")
    save_tiny_bert(root / "bert", text_vocabulary(texts + ["Ordne den Text ein"] * 2))
    model = SentenceTransformer(modules=[Transformer(str(root / "bert"), max_seq_length=32), Pooling(32, "mean"),
                                         Normalize()], device="cpu")
    model.save(str(root / "st"), create_model_card=False)
    return root / "st"


def test_a_prompt_that_leaves_no_room_is_refused_and_cut_text_is_counted(tiny_st, data, tmp_path, capsys):
    from tecb_eval.grid.run import run_grid

    long_prompt = "Ordne den Text ein " * 20
    argv = run_args(data, tmp_path / "r.jsonl", tmp_path / "cache", "--limit-splits", "1")
    argv[argv.index("tfidf-lsa")] = f"{tiny_st},prompt={long_prompt}"
    error = eval_error(capsys, argv)
    assert "leaves no room for the text" in error and not (tmp_path / "r.jsonl").exists()
    said = []
    run_grid([data], [{"spec": str(tiny_st), "prompt": "Ordne den Text ein " * 5}],
             configurations=["minibatch_kmeans:none"], limit_splits=1, progress=False, log=said.append,
             cache_dir=tmp_path / "cache2")
    notes = [line for line in said if "were cut" in line]
    assert len(notes) == 1 and "tokens not encoded" in notes[0], said


@pytest.mark.slow
def test_onnx_does_not_export_again_when_every_text_is_cached(tiny_st, data, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from tecb_eval.grid.run import run_grid
    from tecb_eval.models import backends

    exports = []
    real = backends.to_onnx_runtime
    monkeypatch.setattr(backends, "to_onnx_runtime", lambda *a, **k: (exports.append(1), real(*a, **k))[1])
    model = {"spec": str(tiny_st), "backend": "onnx"}
    for _ in range(2):
        run_grid([data], [model], configurations=["minibatch_kmeans:none"], limit_splits=1, progress=False,
                 log=lambda m: None, cache_dir=tmp_path / "cache")
    assert len(exports) == 1


# -- half-written: an export onto a full disk ------------------------------------------------------

def test_an_export_onto_a_full_disk_leaves_no_work_folder_and_says_the_disk_is_full(data, tmp_path, small_fs, capsys):
    results = tmp_path / "results.jsonl"
    assert main(run_args(data, results, tmp_path / "cache", "--limit-splits", "2")) == 0
    fs = small_fs("256k")
    _fill(fs)  # not a byte left: not even the work folder's marker fits
    capsys.readouterr()
    assert main(["export", str(results), "--out", str(fs / "ex")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tecb-eval: error: ")]
    assert len(errors) == 1, errors
    error = errors[0]
    assert "disk is full" in error and f"--out {fs / 'ex'}" in error, error
    assert sorted(p.name for p in fs.iterdir()) == ["filler"]
    (fs / "filler").unlink()
    capsys.readouterr()
    assert main(["export", str(results), "--out", str(fs / "ex")]) == 0, capsys.readouterr().err


def test_collect_never_writes_its_id_list_over_its_input_or_a_foreign_file(tmp_path):
    subreddits = tmp_path / "subreddits.txt"
    subreddits.write_text("de\nfinanzen\n", encoding="utf-8")
    for out in (subreddits, tmp_path / "notes.csv"):
        if out != subreddits:
            out.write_text("my,own\n", encoding="utf-8")
        before = out.read_bytes()
        done = run_cli("collect", "--source", "reddit", "--subreddits", str(subreddits), "--out", str(out),
                       env={"praw_client_id": "x", "praw_client_secret": "y"})
        assert "--out" in one_error_line(done) and out.read_bytes() == before


# -- Ctrl-C while the interpreter exits ------------------------------------------------------------

LATE_CTRL_C = """
import atexit, os, signal, sys, time

def a_librarys_exit_handler():  # as torch's or tqdm's: registered when the library is imported
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    print("the library's handler finished", file=sys.stderr)

atexit.register(a_librarys_exit_handler)
from tecb_data.cli import main
sys.argv = ["tecb-data", *sys.argv[1:]]
sys.exit(main())
"""


def test_ctrl_c_while_exit_handlers_run_exits_130_without_a_traceback(data):
    done = subprocess.run([sys.executable, "-c", LATE_CTRL_C, "verify", str(data)], capture_output=True, text=True,
                          env=ENV, timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert "the library's handler finished" in done.stderr and "tecb-data: interrupted; " in done.stderr


EXIT_AFTER_HANDLERS = """
import atexit, sys

def a_librarys_exit_handler():  # as logging's or a worker pool's: flushes what it holds
    print("the library's handler ran", file=sys.stderr)
    print("unterminated last words", end="")  # buffered: it reaches the reader only if flushed

atexit.register(a_librarys_exit_handler)
from tecb_data.cli import main
sys.argv = ["tecb-data", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.parametrize(("argv", "code"), [(("verify",), 0), (("verify", "/no/such/folder"), 2)])
def test_the_command_exits_with_its_code_after_every_exit_handler_and_flush(data, argv, code):
    # The command ends the process itself once the exit handlers ran (skipping the interpreter's
    # teardown of torch and the like): its exit code, every handler and every buffered byte stay.
    args = [*argv, str(data)] if len(argv) == 1 else list(argv)
    done = subprocess.run([sys.executable, "-c", EXIT_AFTER_HANDLERS, *args], capture_output=True, text=True,
                          env=ENV, timeout=120)
    assert done.returncode == code, done.stderr
    assert "the library's handler ran" in done.stderr and done.stdout.endswith("unterminated last words")
    assert "Traceback" not in done.stderr


# -- fine-tuning ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def blurbs_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("round3-blurbs")
    return build("blurbs", demo_input("blurbs"), out, views=("s2s",))[0][0]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, blurbs_folder):
    import tecb_data
    from conftest import save_tiny_bert, text_vocabulary

    texts = sorted({t for split in tecb_data.load(blurbs_folder).splits for t in split.texts})
    return save_tiny_bert(tmp_path_factory.mktemp("round3-bert"), text_vocabulary(texts),
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def finetune_args(model, data, out, *extra) -> list[str]:
    return ["finetune", "--model", str(model), "--data", str(data), "--method", "cob", "--folds", "1",
            "--max-steps", "1", "--instance-size", "20", "--score-seeds", "42", "--out", str(out), "--quiet", *extra]


def test_a_kmeans_seed_out_of_range_is_one_line(tiny_bert, blurbs_folder, tmp_path, capsys):
    for bad in ("-1", str(2**32)):
        error = eval_error(capsys, finetune_args(tiny_bert, blurbs_folder, tmp_path / "out", "--kmeans-seed", bad))
        assert "--kmeans-seed" in error and bad in error
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


@pytest.mark.slow
def test_finetune_overwrite_removes_only_the_files_it_wrote(tiny_bert, blurbs_folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(finetune_args(tiny_bert, blurbs_folder, out)) == 0
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    error = eval_error(capsys, finetune_args(tiny_bert, blurbs_folder, out, "--overwrite"))
    assert "notes.txt" in error and (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    (out / "notes.txt").unlink()
    assert main(finetune_args(tiny_bert, blurbs_folder, out, "--overwrite")) == 0
    assert (out / "summary.md").is_file()


def test_pretrain_overwrite_removes_only_the_files_it_wrote(tiny_bert, blurbs_folder, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["pretrain", "--model", str(tiny_bert), "--data", str(blurbs_folder), "--method", "tsdae", "--seeds", "7",
            "--max-steps", "1", "--eval-every", "1", "--batch-size", "8", "--quiet", "--out", str(out)]
    assert main(args) == 0
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    error = eval_error(capsys, args + ["--overwrite"])
    assert "notes.txt" in error and (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "out.partial").exists()  # refused before any work
    (out / "notes.txt").unlink()
    assert main(args + ["--overwrite"]) == 0
    assert (out / "summary.md").is_file()


def test_finetuning_onto_a_full_disk_is_one_line(tiny_bert, blurbs_folder, small_fs, capsys):
    fs = small_fs("1m")
    _fill(fs, leave=96 * 1024)  # room for the work folder and logs, not for a checkpoint
    capsys.readouterr()
    code = main(finetune_args(tiny_bert, blurbs_folder, fs / "out"))
    errors = [line for line in capsys.readouterr().err.splitlines() if "Loading weights" not in line and line.strip()]
    assert code == 2 and len(errors) == 1 and "disk is full" in errors[0], errors


@pytest.mark.slow
def test_steps_without_triples_are_not_trained_steps(tiny_bert, blurbs_folder, tmp_path):
    import warnings

    from tecb_data.errors import UserError
    from tecb_eval.finetuning import finetune

    common = dict(method="triplet", folds=1, seeds=(42,), score_seeds=(42,), progress=False, resamples=99,
                  eval_every=2, learning_rate=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Five texts of some fifteen labels: an instance where no label comes twice has no triple.
        done = finetune(str(tiny_bert), blurbs_folder, output_dir=tmp_path / "some", instance_size=5,
                        triples_per_instance=4, **common)
    assert not [w for w in caught if "lr_scheduler" in str(w.message)]
    unit = tmp_path / "some" / "triplet" / "fold-01" / "seed-42"
    losses = __import__("pandas").read_csv(unit / "losses.csv")
    assert len(losses) > 0 and losses.loss.notna().all()
    assert json.loads((unit / "unit.json").read_text())["dropped_instances"] > 0 and done.best
    # With no instance that gives a triple, nothing is trained: one line, not steps of nan.
    with pytest.raises(UserError, match="triple"):
        finetune(str(tiny_bert), blurbs_folder, output_dir=tmp_path / "none", instance_size=4, max_steps=4, **common)


@pytest.mark.slow
def test_a_transfer_fold_does_not_say_held_out_none(tiny_bert, blurbs_folder, tmp_path):
    from tecb_eval.finetuning import finetune

    tenkgnad = build("tenkgnad", demo_input("tenkgnad"), tmp_path / "tk", views=("s2s",))[0][0]
    done = finetune(str(tiny_bert), [blurbs_folder, tenkgnad], method="cob", protocol="transfer", seeds=(42,),
                    score_seeds=(42,), output_dir=tmp_path / "out", progress=False, resamples=99, max_steps=1,
                    instance_size=20)
    summary = (done.output_dir / "summary.md").read_text(encoding="utf-8")
    assert "None" not in summary and "held out" not in summary.split("Folds: ")[1].split("\n")[0]


@pytest.mark.slow
def test_a_genre_whose_name_holds_the_path_separator_is_one_genre(tmp_path):
    import tecb_data
    from tecb_eval.finetuning import protocols

    rows = []
    for genre in ("Kinder > Jugend", "Krimi", "Sachbuch"):
        for child in range(3):
            for i in range(12):
                rows.append({"text": f"{genre} Buch {child} Nummer {i} " + " ".join(WORDS["Kultur"].split()[: child + 1]),
                             "parent": genre, "label": f"{genre[:4]}-{child}"})
    path = tmp_path / "books.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = run_cli("build", "--source", "table", "--input", str(path), "--name", "books", "--text", "text",
                   "--label", "label", "--label-parent", "parent", "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stderr
    folds = protocols.leave_one_genre_out(tecb_data.load(tmp_path / "out" / "books-s2s"))
    assert sorted(f.held_out for f in folds) == ["Kinder > Jugend", "Krimi", "Sachbuch"]
