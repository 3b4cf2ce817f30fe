"""The front door and the manual: README.md stays short, every command it shows is run by
a test (here, or by a named test elsewhere), every relative link of README.md and docs/ resolves,
the MkDocs site builds with --strict and renders the API, and the data page says where each source
comes from, under which licence, with the SHA-256 of the files in ../shared."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import redditserver as rs
from helpers import REPO, SHARED_DATA, run_cli_here

README = REPO / "README.md"
DOCS = REPO / "docs"
VENV_BIN = Path(sys.executable).parent
MAX_README_LINES = 250
MAX_IMAGE_BYTES = 300 * 1024

# Every command in the README's shell blocks, and what runs it. A command that is in neither table
# fails `test_every_readme_command_is_run_by_a_test`: add a test before adding a command.
#   RUN_HERE: the test of this module that runs the command as printed.
#   RUN_ELSEWHERE: (test, tokens): a named test whose source passes every token (the command's
#   subcommand and options) as a string literal, i.e. runs that command; or .ci/run for `make test`.
RUN_HERE = {
    "tecb-data build --source blurbs --demo --out out": "test_readme_tour_runs_as_printed",
    "tecb-data stats out/blurbs-clustering-s2s": "test_readme_tour_runs_as_printed",
    "tecb-eval run --data out/blurbs-clustering-s2s --model minilm-l6 --config minibatch_kmeans:none --limit-splits 2 "
    "--results out/results.jsonl": "test_readme_tour_runs_as_printed",
    "tecb-eval report out/results.jsonl --out out/report": "test_readme_tour_runs_as_printed",
    "tecb-data push out/blurbs-clustering-s2s --repo-id ORG/blurbs-clustering-s2s --dry-run":
        "test_readme_tour_runs_as_printed",
    "tecb-data build --source reddit --ids ../shared/data/reddit/submission_ids.txt --out datasets/ --praw-site tecb":
        "test_readme_reddit_command_rehydrates_with_the_readmes_praw_ini",
    "make docs": "test_the_site_builds_strict_and_renders_the_api",
}
# What `make demo` runs (`make -n demo`, checked below), each by a named test.
DEMO_STEPS = {
    "tecb-data build --source blurbs --demo": ("tests/test_cli_habits.py::test_cheap_examples_really_run",
                                               ["build", "--source", "blurbs", "--demo", "--out"]),
    "tecb-data build --source tenkgnad --demo": ("tests/test_build.py::test_paired_flag_on_the_command_line_and_one_view_alone",
                                                 ["build", "--source", "tenkgnad", "--demo", "--out"]),
    "tecb-data stats": ("tests/test_build.py::test_stats_command_prints_table1", ["stats"]),
    "tecb-eval demo": ("tests/test_outputs_owned.py::test_export_run_and_demo_never_write_into_a_folder_they_did_not_write",
                       ["demo", "--data", "--out", "--cache-dir"]),
}
RUN_ELSEWHERE = {"make demo": "make -n demo: " + ", ".join(DEMO_STEPS), "make test": ".ci/run"}

SOURCES = {  # name on the data page -> (published address, licence)
    "GermEval 2019 Task 1": ("https://www.inf.uni-hamburg.de/en/inst/ab/lt/resources/data/germeval-2019-hmc.html",
                             "CC BY-NC 4.0"),
    "10kGNAD": ("https://github.com/tblock/10kGNAD", "CC BY-NC-SA 4.0"),
    "One Million Posts Corpus": ("https://ofai.github.io/million-post-corpus/", "CC BY-NC-SA 4.0"),
    "Reddit submission ids": ("https://github.com/ClimSocAna/tecb-de/tree/81b56bd7b42d7727bddeefef285590d02c71b1fd/reddit_data",
                              "MIT"),
}
SHARED_FILES = ("germeval2019/blurbs_dev.txt.gz", "germeval2019/blurbs_test_nolabel.txt.gz", "germeval2019/hierarchy.txt",
                "10kgnad/test.csv", "reddit/submission_ids.txt")


# --- reading the README --------------------------------------------------------------------------

def fenced_blocks(text: str, languages: tuple[str, ...]) -> list[str]:
    blocks = re.findall(r"^```([\w-]*)\n(.*?)^```", text, flags=re.S | re.M)
    return [body for language, body in blocks if language in languages]


def shell_commands(text: str) -> list[str]:
    """The commands of the shell blocks: continuation lines joined, comments and blank lines dropped."""
    commands = []
    for block in fenced_blocks(text, ("bash", "sh", "shell", "console")):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if line:
                commands.append(" ".join(line.split()))
    return commands


def commands_run_by(test_name: str) -> list[str]:
    commands = [c for c in shell_commands(README.read_text()) if RUN_HERE.get(c) == test_name]
    assert commands, f"README.md shows no command that {test_name} runs: update RUN_HERE"
    return commands


def run_command(command: str, cwd: Path, env: dict, timeout: float = 1500) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    argv[0] = str(VENV_BIN / argv[0])  # the commands of this environment, as `source .venv/bin/activate` gives
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def installed_main(name: str):
    """The function the installed command ``name`` of this environment runs: its script is in the
    environment's bin/ (as `source .venv/bin/activate` gives it) and its console entry point names it."""
    from importlib.metadata import entry_points

    assert os.access(VENV_BIN / name, os.X_OK), f"{VENV_BIN / name}: not installed (pip install -e .)"
    (entry,) = entry_points(group="console_scripts", name=name)
    return entry.load()


def run_command_here(command: str, cwd: Path, monkeypatch) -> subprocess.CompletedProcess:
    """``command``, as printed, through the main of its installed command in this process, in ``cwd``:
    for a command whose subprocess is not what is tested (its output and its files are)."""
    argv = shlex.split(command)
    main = installed_main(argv[0])
    with monkeypatch.context() as here:
        here.chdir(cwd)
        result = run_cli_here(*argv[1:], main=main)
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def function_source(node_id: str) -> str:
    path, name = node_id.split("::")
    tree = ast.parse((REPO / path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment((REPO / path).read_text(), node)
    raise AssertionError(f"{node_id}: no such test")


def string_literals(source: str) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# --- the README ----------------------------------------------------------------------------------

def test_readme_is_a_front_door_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, f"README.md has {len(text.splitlines())} lines"
    assert {"make demo", "make test"} <= set(shell_commands(text))


def test_every_readme_command_is_run_by_a_test():
    module = sys.modules[__name__]
    for command in shell_commands(README.read_text()):
        assert command in RUN_HERE or command in RUN_ELSEWHERE, (
            f"README.md shows `{command}`, which no test runs: run it in a test and name that test in "
            "tests/test_docs.py (RUN_HERE or RUN_ELSEWHERE)")
        if command in RUN_HERE:
            assert callable(getattr(module, RUN_HERE[command], None)), RUN_HERE[command]


def test_make_test_is_what_ci_runs():
    assert "make test" in shell_commands(README.read_text())
    assert re.search(r"^make test\b", (REPO / ".ci" / "run").read_text(), flags=re.M), "CI no longer runs `make test`"


def test_make_demo_runs_only_steps_that_named_tests_run():
    """`make demo` takes minutes: its steps are each run by a named test, and a step added to the
    Makefile without one fails here."""
    result = subprocess.run(["make", "-n", "-o", f"{Path(sys.prefix)}/.installed", "demo", f"VENV={sys.prefix}"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    steps = [line for line in result.stdout.splitlines() if "/bin/tecb-" in line]
    assert len(steps) == len(DEMO_STEPS), steps
    for step in steps:
        command = " ".join(shlex.split(step.split("/bin/", 1)[1].rstrip("\\ ")))
        matched = [key for key in DEMO_STEPS if command.startswith(key)]
        assert matched, f"`make demo` runs `{command}`, which no test in DEMO_STEPS runs"
        node_id, tokens = DEMO_STEPS[matched[0]]
        missing = set(tokens) - string_literals(function_source(node_id))
        assert not missing, f"{node_id} no longer runs `{matched[0]}` (it lacks {sorted(missing)})"


@pytest.mark.slow
def test_readme_library_example_runs(demo_datasets, tmp_path):
    """Every Python block of the README, run as printed against the demo Blurbs datasets in out/
    (the session's build of the demo sample, what `tecb-data build --source blurbs --demo` writes)."""
    blocks = fenced_blocks(README.read_text(), ("python",))
    assert blocks
    for name in ("blurbs-clustering-s2s", "blurbs-clustering-p2p"):
        shutil.copytree(demo_datasets / name, tmp_path / "out" / name)
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=900)
        assert result.returncode == 0, f"{block}\n{result.stderr[-3000:]}"
        assert "blurbs-clustering-s2s" in result.stdout and "tfidf-lsa" in result.stdout, result.stdout


@pytest.mark.slow
def test_readme_tour_runs_as_printed(tmp_path, monkeypatch):
    """The five tour commands, in order, as printed, in a folder with no ../shared beside it (a
    fresh clone's). Each runs through the main that its installed command's entry point names, in
    this process: what is tested is what the tour prints and writes, not a fresh interpreter's start
    (the README's other tests start `tecb-data` from bin/ as a process)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    printed = {command: run_command_here(command, work, monkeypatch)
               for command in commands_run_by("test_readme_tour_runs_as_printed")}
    assert (work / "out" / "blurbs-clustering-s2s" / "manifest.json").exists()
    # Everything the tour writes is in out/, which .gitignore names: a clone stays clean after it.
    ignored = (REPO / ".gitignore").read_text().split()
    assert "/out/" in ignored and ".tecb-cache/" in ignored
    assert {p.name for p in work.iterdir()} <= {"out", ".tecb-cache"}, sorted(p.name for p in work.iterdir())
    assert (work / "out" / "results.jsonl").exists() and (work / "out" / "report" / "index.html").exists()
    outputs = "\n".join(r.stdout + r.stderr for r in printed.values())
    assert "| minilm-l6 |" in outputs and "nothing was sent" in outputs


def test_readme_reddit_command_rehydrates_with_the_readmes_praw_ini(tmp_path):
    """The README's praw.ini (its placeholders filled in, pointed at the local stand-in for Reddit)
    and its Reddit command, run as printed."""
    ini = fenced_blocks(README.read_text(), ("ini",))
    assert len(ini) == 1 and ini[0].startswith("[tecb]\n")
    ids = [f"t{k:05d}" for k in range(120)]
    subreddits = {item: f"Thema{i % 12:02d}" for i, item in enumerate(ids)}
    home, work = tmp_path / "home", tmp_path / "work"
    (tmp_path / "shared" / "data" / "reddit").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "reddit" / "submission_ids.txt").write_text("id\n" + "".join(f"{i}\n" for i in ids))
    work.mkdir()
    with rs.RedditServer(rs.RedditState(ids, subreddits=subreddits)) as server:
        (home / ".config").mkdir(parents=True)
        (home / ".config" / "praw.ini").write_text(
            ini[0].replace("YOUR_APP_ID", rs.CLIENT_ID).replace("YOUR_APP_SECRET", rs.CLIENT_SECRET)
            + f"oauth_url={server.url}\nreddit_url={server.url}\n")
        for command in commands_run_by("test_readme_reddit_command_rehydrates_with_the_readmes_praw_ini"):
            run_command(command, work, rs.clean_env(home), timeout=300)
    for view in ("reddit-clustering-s2s", "reddit-clustering-p2p", "reddit-clustering-ids"):
        assert (work / "datasets" / view / "manifest.json").exists(), view


# --- links, images, the site ---------------------------------------------------------------------

def relative_links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)  # links inside code are not links
    targets = re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text) + re.findall(r"""<img[^>]+src=["']([^"']+)""", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", [README, *sorted(DOCS.rglob("*.md"))], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    links = relative_links(page)
    if page == README:
        assert links, "README.md links into the manual"
    for link in links:
        target = (page.parent / link.split("#", 1)[0]).resolve()
        assert target.exists() or target in generated_pages(), f"{page.relative_to(REPO)}: the link {link} points at nothing"


def generated_pages() -> set[Path]:
    """The pages the docs build writes (the command reference), which exist only in the site."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    return {(DOCS / path).resolve() for path in generated.command_pages()}


def test_images_in_the_docs_are_small_and_each_is_shown_with_its_provenance():
    images = [p for p in DOCS.rglob("*") if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}]
    assert images
    pages = {p: p.read_text() for p in DOCS.rglob("*.md")}
    for image in images:
        assert image.stat().st_size < MAX_IMAGE_BYTES, f"{image.name}: {image.stat().st_size:,} bytes"
        shown = [p for p, text in pages.items() if f"]({image.name})" in text]
        assert shown, f"{image.name} is not shown on any page"
        # the section that shows it names the bench script that drew it
        sections = [s for p in shown for s in re.split(r"\n(?=## )", pages[p]) if f"]({image.name})" in s]
        assert all(re.search(r"bench/bench_\w+\.py", s) for s in sections), f"{image.name}: no bench command beside it"


@pytest.mark.slow
def test_the_site_builds_strict_and_renders_the_api(tmp_path):
    make = subprocess.run(["make", "-n", "-o", f"{Path(sys.prefix)}/.docs-installed", "docs", f"VENV={sys.prefix}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert make.returncode == 0 and "mkdocs build --strict -d site" in make.stdout, make.stdout + make.stderr
    commands_run_by("test_the_site_builds_strict_and_renders_the_api")
    if subprocess.run([sys.executable, "-c", "import mkdocs, material, mkdocstrings_handlers.python"],
                      capture_output=True).returncode != 0:
        pytest.skip("mkdocs, mkdocs-material or mkdocstrings-python is not installed: `make docs` installs the docs extra")
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                             "-d", str(site)], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    api = (site / "api" / "index.html").read_text()
    for name in ("tecb_eval.grid.run.run_grid", "tecb_data.build.build", "tecb_data.build.build_table",
                 "tecb_data.sources.reddit.build_from_ids", "tecb_data.load.load"):
        assert f'id="{name}"' in api, f"the API page does not render {name}"
    assert ":func:" not in api and ":mod:" not in api and ":class:" not in api  # Sphinx roles render as code
    assert (site / "data" / "index.html").exists() and (site / "benchmarks" / "index.html").exists()


# --- the data page, citations --------------------------------------------------------------------

def test_the_data_page_names_each_source_with_its_address_and_licence():
    text = (DOCS / "data.md").read_text()
    for name, (address, licence) in SOURCES.items():
        assert name in text and address in text, name
        row = next((line for line in text.splitlines() if line.startswith("|") and address in line), "")
        assert licence in row, f"{name}: the sources table does not give licence {licence} beside {address}"


def test_the_data_page_gives_the_sha256_of_every_shared_file():
    text = (DOCS / "data.md").read_text()
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent: the hashes are checked against the real files")
    for relative in SHARED_FILES:
        digest = hashlib.sha256((SHARED_DATA / relative).read_bytes()).hexdigest()
        name = relative.rsplit("/", 1)[1]
        row = next((line for line in text.splitlines() if f"`{name}`" in line and "|" in line), "")
        assert digest in row, f"{relative}: SHA-256 {digest} is not on the data page's row for it"


def test_citation_cff_has_the_required_fields():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["message"] and cff["title"] and cff["authors"]
    assert all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert str(cff["version"]) and cff["license"] == "Apache-2.0"
    titles = {r["title"] for r in cff["references"]}
    assert {"German Text Embedding Clustering Benchmark", "One Million Posts: A Data Set of German Online Discussions",
            "GermEval 2019 Task 1: Hierarchical Classification of Blurbs"} <= titles


def test_the_bib_files_in_docs_are_the_ones_the_cards_carry():
    from tecb_data import recipes

    assert (DOCS / "citations" / "ompc.bib").read_text().strip() == recipes.OMPC_CITATION
    assert (DOCS / "citations" / "germeval2019.bib").read_text().strip() == recipes.GERMEVAL_CITATION
    ours = (DOCS / "citations" / "tecb.bib").read_text().strip()
    assert ours.split("\n", 1)[0] == recipes.BENCHMARK_CITATION.split("\n", 1)[0]


def test_each_card_carries_the_bibtex_of_its_sources(demo_datasets):
    """The paper in every card, GermEval 2019 in Blurbs', the One Million Posts Corpus in
    TenKGnad's (10kGNAD asks its users to cite it)."""
    from tecb_data import recipes

    expected = {"blurbs": recipes.GERMEVAL_CITATION, "tenkgnad": recipes.OMPC_CITATION}
    for source, citation in expected.items():
        for view in ("s2s", "p2p"):
            card = (demo_datasets / f"{source}-clustering-{view}" / "README.md").read_text()
            assert recipes.BENCHMARK_CITATION in card and citation in card, f"{source}-{view}"


# --- every feature has a page -------------------------------------------------------------------

def test_the_nav_has_a_page_for_every_feature():
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text().replace("!ENV", "")).get("nav")
    pages = set(re.findall(r"[\w-]+\.md", str(nav)))
    assert {"results.md", "datasets.md", "components.md", "paper-results.md", "faq.md", "changelog.md"} <= pages


def test_the_dataset_catalogue_gives_mtebs_published_figures_and_our_recipes_licences():
    """Every row of the catalogue against MTEB's descriptive statistics and tecb_data's registry."""
    import json

    from tecb_data.recipes import DATASETS

    stats_dir = SHARED_DATA.parent / "reference" / "mteb-descriptive-stats"
    rows = {cells[1]: cells for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in (DOCS / "datasets.md").read_text().splitlines()
        if line.startswith("| `"))}
    splits = {"Blurbs": "28", "TenKGnad": "10"}
    for name in ("BlurbsClusteringS2S", "BlurbsClusteringP2P", "TenKGnadClusteringS2S", "TenKGnadClusteringP2P"):
        cells = rows[name]
        spec = next(s for s in DATASETS.values() if s.mteb_name == name)
        assert cells[0].startswith(f"`{spec.name}`") and spec.name in cells[2], cells
        test = json.loads((stats_dir / f"{name}.json").read_text())["test"]
        assert cells[3] == splits[name.split("Clustering")[0]]
        assert cells[4] == f"{test['num_samples']:,}" and cells[5] == str(test["label_statistics"]["unique_labels"])
        assert cells[6] == f"{test['text_statistics']['average_text_length']:,.1f}"
        assert cells[7] == {"cc-by-nc-4.0": "CC BY-NC 4.0", "cc-by-nc-sa-4.0": "CC BY-NC-SA 4.0"}[spec.license]
        assert spec.source_url in cells[8]


def test_the_papers_tables_on_the_results_page_are_what_table_paper_prints(capsys):
    from tecb_eval.cli import main

    reference = SHARED_DATA.parent / "reference" / "tecb-de-full-results.csv"
    page = (DOCS / "paper-results.md").read_text()
    assert "tecb-eval table --paper --reference ../shared/reference/tecb-de-full-results.csv" in page
    shown = page.split("<!-- paper-tables: begin -->\n", 1)[1].split("\n<!-- paper-tables: end -->", 1)[0]
    assert main(["table", "--paper", "--reference", str(reference)]) == 0
    assert shown.strip() == capsys.readouterr().out.strip()


def test_the_generated_tables_name_every_registry_entry():
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    from tecb_eval.clustering.registry import ALGORITHMS, REDUCTIONS

    algorithms, reductions = generated.algorithms_table(), generated.reductions_table()
    assert all(f"| `{name}`, " in algorithms for name in ALGORITHMS)
    assert all(f"| `{name}` |" in reductions for name in REDUCTIONS)
    assert "`batch_size=500`" in algorithms and "`n_neighbors=15`" in reductions
    page = (DOCS / "components.md").read_text()
    assert "<!-- tecb:algorithms -->" in page and "<!-- tecb:reductions -->" in page
    assert "| `dbcv` |" in generated.row_schema() and "| `name` |" in generated.fields_table("tecb_data.load.Benchmark")
