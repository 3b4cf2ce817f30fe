"""Dataset cards: the metadata the Hub validates, read back through huggingface_hub's card classes,
and the body a reader needs (what, how, statistics, licence, citations). Text a user gives (a
pretty name, a citation, a column name) cannot add a key to the front matter, end the BibTeX block
or break the build command the card shows."""

from __future__ import annotations

import csv
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from huggingface_hub import DatasetCard, DatasetCardData

from helpers import one_error_line
from tablefiles import NAME, table_build, table_rows, write_tsv
from tecb_data.card import card_problems, check_card
from tecb_data.errors import UserError
from tecb_data.recipes import DATASETS
from tecb_data.stats import size_category

DEMO = ("blurbs-clustering-s2s", "blurbs-clustering-p2p", "tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p")


def card_and_manifest(folder):
    return (folder / "README.md").read_text(encoding="utf-8"), json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", DEMO)
def test_every_demo_card_has_the_metadata_the_hub_validates(demo_datasets, name):
    text, manifest = card_and_manifest(demo_datasets / name)
    assert card_problems(text, manifest) == []
    data = check_card(text, manifest, where=name)
    assert isinstance(data, DatasetCardData)
    spec = DATASETS[name]
    assert data.license == spec.license and data.language == ["de"] and data.pretty_name == spec.pretty_name
    assert data.size_categories == [size_category(manifest["statistics"]["samples"])]
    assert data.task_categories == ["text-classification"]
    configs = {c["config_name"]: c["data_files"] for c in data.get("configs")}
    assert configs["default"] == [{"split": "test", "path": "data/test.jsonl"}]
    # What huggingface_hub writes back is what it read: no field is lost or reshaped.
    assert DatasetCard(DatasetCard(text).content).data.to_dict() == data.to_dict()


@pytest.mark.parametrize("name", DEMO)
def test_every_demo_card_body_says_what_how_and_whose(demo_datasets, name):
    text, manifest = card_and_manifest(demo_datasets / name)
    body = DatasetCard(text).text
    spec = DATASETS[name]
    assert f"# {spec.pretty_name}" in body and spec.mteb_name in body
    assert f"seed {manifest['seed']}" in body and f"`tecb` {manifest['package_version']}" in body
    assert f"recipe `{manifest['recipe']['name']}` version {manifest['recipe']['version']}" in body
    assert f"| samples (all splits) | {manifest['statistics']['samples']:,} |" in body
    assert spec.license_note in body and spec.source_url in body
    assert "@inproceedings{wehrli-etal-2023-german" in body
    for citation in spec.source_citations:
        assert citation.splitlines()[0] in body
    for split in manifest["splits"]:
        assert f"| {split['name']} | {split['size']:,} |" in body


def _replace(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("license: cc-by-nc-4.0", "license: cc-by-nc-4", "not one Hub licence id"),
        ("license: cc-by-nc-4.0", "license: mit", "differs from the source's licence"),
        ("language:\n- de", "language:\n- en", "language"),
        ("- text-classification", "- clustering", "task_categories"),
        ("- 1K<n<10K", "- n<1K", "size_categories"),
        ('pretty_name: "Blurbs Clustering S2S"', "pretty_name: ''", "pretty_name is missing"),
        ("path: data/test.jsonl", "path: data/train.jsonl", "not a file of this dataset"),
        ("config_name: default", "config_name: main", "no 'default' config"),
        ("language:\n- de", "language: [de", "does not parse"),
    ],
)
def test_a_card_with_wrong_metadata_is_refused_naming_the_problem(demo_datasets, old, new, problem):
    text, manifest = card_and_manifest(demo_datasets / "blurbs-clustering-s2s")
    broken = _replace(text, old, new)
    problems = card_problems(broken, manifest)
    assert any(problem in p for p in problems), problems
    with pytest.raises(UserError, match="README.md: dataset card metadata"):
        check_card(broken, manifest, where="out/blurbs-clustering-s2s/README.md")


def test_license_other_needs_a_name_and_a_link(demo_datasets):
    text, manifest = card_and_manifest(demo_datasets / "blurbs-clustering-s2s")
    manifest = {**manifest, "dataset": "not-in-the-registry"}
    other = _replace(text, "license: cc-by-nc-4.0", "license: other")
    assert any("license_name and license_link" in p for p in card_problems(other, manifest))
    named = _replace(other, "license: other", "license: other\nlicense_name: ids-only\nlicense_link: LICENSE")
    assert card_problems(named, manifest) == []


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_registry_template_renders_metadata_the_hub_accepts(name):
    """Also the datasets the demo cannot build (Reddit): their templates pass the same check."""
    from tecb_data.card import render_card
    from tecb_data.recipes import RECIPES
    from tecb_data.stats import table1

    spec = DATASETS[name]
    stats = table1([(["a", "b", "c"], ["x", "y", "x"])])
    splits = [{"name": "s0", "level": "label", "size": 3, "labels": {"x": 2, "y": 1}}]
    text = render_card(spec, RECIPES[spec.recipe], version="0.1.0", seed=42, stats=stats, splits=splits)
    files = ["README.md", "data/test.jsonl", "data/samples.jsonl"] + (["data/submissions.jsonl"] if spec.view == "ids" else [])
    manifest = {"dataset": name, "statistics": stats, "files": {path: "" for path in files}}
    assert card_problems(text, manifest) == []


# -- what a user writes cannot change the card's structure -----------------------------------------

def front_matter(card: Path) -> dict:
    text = card.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


@pytest.mark.slow
def test_user_text_cannot_add_a_key_to_the_cards_front_matter(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    assert table_build(source, tmp_path / "plain").returncode == 0
    keys = set(front_matter(tmp_path / "plain" / f"{NAME}-s2s" / "README.md"))
    error = one_error_line(table_build(source, tmp_path / "out", "--pretty-name", "News\nviewer: false"))
    assert "--pretty-name" in error and not (tmp_path / "out").exists()
    hostile = 'News": x\' # viewer: false {a: b} [c] &d *e !f %g @h `i` | >'
    done = table_build(source, tmp_path / "out", "--pretty-name", hostile)
    assert done.returncode == 0, done.stderr
    meta = front_matter(tmp_path / "out" / f"{NAME}-s2s" / "README.md")
    assert set(meta) == keys and meta["pretty_name"] == hostile + " S2S"


@pytest.mark.slow
def test_a_code_fence_in_the_citation_stays_inside_the_bibtex_block(tmp_path):
    from markdown_it import MarkdownIt

    source = write_tsv(tmp_path / "in.tsv", table_rows())
    citation = tmp_path / "cite.bib"
    citation.write_text("@misc{x,\n  note = {see\n```\n# Injected heading\n```\n},\n}\n", encoding="utf-8")
    done = table_build(source, tmp_path / "out", "--citation", str(citation))
    assert done.returncode == 0, done.stderr
    body = (tmp_path / "out" / f"{NAME}-s2s" / "README.md").read_text(encoding="utf-8").split("---\n", 2)[2]
    tokens = MarkdownIt("commonmark").parse(body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert "Injected heading" not in headings
    fences = [t.content for t in tokens if t.type == "fence"]
    assert any("# Injected heading" in f and "@misc{x," in f for f in fences)


def test_the_cards_build_command_pastes_back_into_a_shell(tmp_path):
    from tecb_data import cli

    src = tmp_path / "news.csv"
    records = [{"Titel des Buches": f"Titel {topic} {i}", "Sachgebiet & Thema": topic}
               for topic in ("Sport", "Kultur", "Wirtschaft", "Politik") for i in range(12)]
    with open(src, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    out = tmp_path / "out"
    assert cli.main(["build", "--source", "table", "--input", str(src), "--name", "news", "--text", "Titel des Buches",
                     "--label", "Sachgebiet & Thema", "--licence", "CC-BY-4.0", "--out", str(out), "--quiet"]) == 0
    card = next(out.rglob("README.md")).read_text(encoding="utf-8")
    command = re.search(r"Built with `tecb` \S+ \((`+) ?(.*?) ?\1\)", card).group(2)
    argv = shlex.split(command)
    assert argv[argv.index("--text") + 1] == "Titel des Buches"
    assert argv[argv.index("--label") + 1] == "Sachgebiet & Thema"
