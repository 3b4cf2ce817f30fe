"""Text a command prints shows a stored name on one line: `recommend`, `compare`, `table`'s and
`report`'s lines escape a name's control and bidirectional characters (``\\n``, ``\\u202e``), so a
name in a results store cannot print a line of its own, such as a fake BERTopic block."""

from __future__ import annotations

import json

import pytest

from helpers import tfidf_rows

DATASET = "tenkgnad-clustering-s2s"
FAKE = "minilm\n  BERTopic:\n    import os; os.system('touch pwned')"
TURNED = "lsa\u202eevil"


@pytest.fixture(scope="module")
def hostile_store(demo_datasets, tmp_path_factory):
    """tfidf-lsa on two splits, copied under the hostile names: FAKE scores higher (the best
    pipeline), TURNED on the first split only (fewer cells: the like-with-like notes name it)."""
    root = tmp_path_factory.mktemp("one-line")
    rows = tfidf_rows(demo_datasets / DATASET, root, 2)
    first = min(r["split"] for r in rows)
    lines = [json.dumps(r) for r in rows]
    lines += [json.dumps({**r, "model": FAKE, "v_measure": min(1.0, r["v_measure"] + 0.2)}) for r in rows]
    lines += [json.dumps({**r, "model": TURNED, "v_measure": r["v_measure"] * 0.9}) for r in rows
              if r["split"] == first]
    hostile = root / "hostile.jsonl"
    hostile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return hostile


def _printed(capsys, argv) -> str:
    from tecb_eval.cli import main

    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out + captured.err


def _one_line_each(text: str) -> None:
    for line in text.splitlines():
        assert not line.lstrip().startswith("import os"), text
        if "touch pwned" in line:  # the whole name on the line that names it (Markdown escapes its backslash)
            assert "minilm\\" in line and "BERTopic:\\" in line, line
    assert "\u202e" not in text and "\n" + "  BERTopic:\n    import os" not in text


def test_recommend_text_shows_a_name_on_one_line(hostile_store, capsys):
    text = _printed(capsys, ["recommend", str(hostile_store), "--resamples", "99"])
    _one_line_each(text)
    # The one real BERTopic block per dataset, and the name, escaped, where the pipeline is named.
    assert [line for line in text.splitlines() if line.strip() == "BERTopic:"] == ["  BERTopic:"]
    assert "  best pipeline: minilm\\n  BERTopic:\\n    import os; os.system('touch pwned') (" in text
    assert "lsa\\u202eevil" in text


def test_compare_table_and_report_show_a_name_on_one_line(hostile_store, tmp_path, capsys):
    for argv in (["compare", str(hostile_store), "--model", FAKE, "--model", TURNED, "--resamples", "99"],
                 ["compare", str(hostile_store), "--model", TURNED, "--model", "tfidf-lsa", "--resamples", "99"],
                 ["table", str(hostile_store), "--table", "full"],
                 ["table", str(hostile_store), "--format", "latex"],
                 ["report", str(hostile_store), "--out", str(tmp_path / "site"), "--no-figures"]):
        text = _printed(capsys, argv)
        _one_line_each(text)
        assert "minilm\\n" in text or "lsa\\u202eevil" in text, (argv, text)


def test_one_line_escapes_every_control_and_bidi_character():
    from tecb_eval.files import one_line

    assert one_line("plain name / ok-1.0 ü ß 中") == "plain name / ok-1.0 ü ß 中"
    assert one_line("a\nb\rc\td\x1be\x7ff\u2028g\u202eh\u2066i") == "a\\nb\\rc\\td\\x1be\\x7ff\\u2028g\\u202eh\\u2066i"
