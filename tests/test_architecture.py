"""The house keeps its shape: no import circles in tecb_eval or tecb_data, lower rooms never import
higher ones (tecb_eval's rooms, tecb_data's modules), tecb_data never imports tecb_eval.

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import is still a dependency; it only moves the circle to run time).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from importgraph import import_graph, imported_from, modules, room  # noqa: F401 (shared with test_training.py)
from helpers import REPO


# tecb_eval's rooms, bottom to top (../shared/ARCHITECTURE.md). A room may import its own modules
# and any room of a lower rank; rooms of one rank may import each other as long as the rooms' own
# graph stays acyclic (checked below).
RANKS = {
    "files": 0, "benchmark": 0,
    "models": 1, "clustering": 1,
    "mteb": 2,
    "grid": 3,
    # What pre-training and fine-tuning share (model source, live encoders, tracking, optimiser,
    # checkpoints, data order); the two stand on it and never import each other.
    "training": 4,
    "reports": 5, "layers": 5, "pretraining": 5, "finetuning": 5,
    "cli": 6,
}

# tecb_data's modules, bottom to top, by their name under tecb_data: "sources" is the package and
# every module in it, "__init__" the package itself. A module may import any of a lower rank, and
# modules of one rank may import each other as long as the graph stays acyclic (checked below).
DATA_RANKS = {
    # What every command stands on: errors, seeds, progress and its heartbeat, the command-line
    # habits, network retries, folders published atomically, statistics, label spellings, the version,
    # reading a user's file (a regular file, with a bound).
    "errors": 0, "inputs": 0, "seeding": 0, "progress": 0, "heartbeat": 0, "repeats": 0, "commandline": 0, "runner": 0,
    "network": 0, "publication": 0, "outputs": 0, "stats": 0, "labels": 0, "version": 0,
    # What a dataset is: the declared datasets and their recipes, the card, the published layout and
    # what one folder holds.
    "recipes": 1, "card": 1, "layout": 1, "contents": 1,
    # One module per source: its raw input -> normalized records (Reddit's rehydration publishes its
    # three folders through contents).
    "sources": 2,
    # The embedded demo sample, recognised by reading it with the file sources' readers.
    "demo": 3,
    # Building from a source, pushing to and loading from the Hub.
    "build": 4, "hub": 4, "load": 4,
    # The command, and the package's face (load, UserError, __version__).
    "cli": 5, "__init__": 5,
}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, deps in sorted(graph.items()):
        for target in sorted(deps):
            if source.startswith("tecb_data") and target.startswith("tecb_eval"):
                bad.append(f"{source} -> {target}: tecb_data never imports tecb_eval")
            here, there = room(source), room(target)
            if here is None or there is None or here == there:
                continue
            if here not in RANKS or there not in RANKS:
                bad.append(f"{source} -> {target}: a room not in RANKS; place it in the house plan")
            elif RANKS[there] > RANKS[here]:
                bad.append(f"{source} -> {target}: room {here!r} (rank {RANKS[here]}) imports the higher room "
                           f"{there!r} (rank {RANKS[there]})")
    return bad


def data_place(module: str) -> str | None:
    """The DATA_RANKS key of a tecb_data module (the longest ranked name it is or lies in); None for
    a module outside tecb_data or in no rank."""
    parts = module.split(".")
    if parts[0] != "tecb_data":
        return None
    name = ".".join(parts[1:]) or "__init__"
    while name and name not in DATA_RANKS:
        name = name.rpartition(".")[0]
    return name or None


def data_layering_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, deps in sorted(graph.items()):
        if source.split(".")[0] != "tecb_data":
            continue
        here = data_place(source)
        if here is None:
            bad.append(f"{source}: a module not in DATA_RANKS; place it in the house plan")
            continue
        for target in sorted(deps):
            there = data_place(target)
            if there is not None and DATA_RANKS[there] > DATA_RANKS[here]:
                bad.append(f"{source} -> {target}: {here!r} (rank {DATA_RANKS[here]}) imports the higher "
                           f"{there!r} (rank {DATA_RANKS[there]})")
    return bad


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for source, deps in graph.items():
        here = room(source)
        if here is None:
            continue
        rooms.setdefault(here, set()).update(r for r in map(room, deps) if r is not None and r != here)
    return rooms


@pytest.fixture(scope="module")
def graph():
    return import_graph(REPO, ("tecb_data", "tecb_eval"))


def test_no_import_cycles_among_the_modules(graph):
    assert cycles(graph) == []


def test_no_cycles_among_the_rooms(graph):
    assert cycles(room_graph(graph)) == []


def test_lower_rooms_never_import_higher_ones(graph):
    assert layering_violations(graph) == []


def test_lower_tecb_data_modules_never_import_higher_ones(graph):
    assert data_layering_violations(graph) == []


def test_every_tecb_data_module_is_ranked_and_opens_with_a_docstring():
    for name, path in modules(REPO, "tecb_data").items():
        assert data_place(name) is not None, f"{path.relative_to(REPO)} is in no rank of DATA_RANKS"
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{path} has no docstring"
    # Every rank names a module that is there: a renamed or removed one leaves no stale entry.
    present = {data_place(name) for name in modules(REPO, "tecb_data")}
    assert set(DATA_RANKS) - present == set()


def test_every_room_is_ranked_and_opens_with_a_docstring():
    for path in sorted((REPO / "tecb_eval").iterdir()):
        name = path.stem if path.suffix == ".py" else path.name
        if name.startswith(("_", ".")) or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
            continue
        assert name in RANKS, f"tecb_eval/{path.name} is in no room of the house plan"
        source = path if path.suffix == ".py" else path / "__init__.py"
        assert ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))), f"{source} has no docstring"


def _package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def test_the_checks_find_a_cycle_and_an_upward_import(tmp_path):
    # The checks above can fail: a circle through a lazy import, and a low room importing a high one.
    root = _package(tmp_path, {
        "tecb_eval/__init__.py": "",
        "tecb_eval/grid/__init__.py": "",
        "tecb_eval/grid/run.py": "from tecb_eval.grid import executors\n",
        "tecb_eval/grid/executors.py": "def f():\n    from .run import x\n",
        "tecb_eval/models/__init__.py": "",
        "tecb_eval/models/encoders.py": "import tecb_eval.reports.tables\n",
        "tecb_eval/reports/__init__.py": "",
        "tecb_eval/reports/tables.py": "from tecb_eval.models import encoders\n",
        "tecb_data/__init__.py": "from tecb_eval.files import atomic_save\n",
        "tecb_eval/files.py": "",
    })
    found = import_graph(root, ("tecb_data", "tecb_eval"))
    assert cycles(found) == [["tecb_eval.grid.executors", "tecb_eval.grid.run"],
                             ["tecb_eval.models.encoders", "tecb_eval.reports.tables"]]
    assert cycles(room_graph(found)) == [["models", "reports"]]
    assert layering_violations(found) == [
        "tecb_data -> tecb_eval.files: tecb_data never imports tecb_eval",
        "tecb_eval.models.encoders -> tecb_eval.reports.tables: room 'models' (rank 1) imports the higher room "
        "'reports' (rank 5)",
    ]


def test_the_data_checks_find_an_upward_import_and_an_unranked_module(tmp_path):
    root = _package(tmp_path, {
        "tecb_data/__init__.py": "from tecb_data.load import load\n",
        "tecb_data/load.py": "from tecb_data import hub\n",
        "tecb_data/hub.py": "",
        "tecb_data/errors.py": "def f():\n    from tecb_data.build import build\n",
        "tecb_data/build.py": "from tecb_data.sources import reddit\n",
        "tecb_data/sources/__init__.py": "",
        "tecb_data/sources/reddit.py": "from tecb_data import cli\n",
        "tecb_data/cli.py": "",
        "tecb_data/scratch.py": "from tecb_data import errors\n",
    })
    found = import_graph(root, ("tecb_data",))
    assert data_place("tecb_data.sources.reddit") == "sources" and data_place("tecb_data") == "__init__"
    assert data_layering_violations(found) == [
        "tecb_data.errors -> tecb_data.build: 'errors' (rank 0) imports the higher 'build' (rank 4)",
        "tecb_data.scratch: a module not in DATA_RANKS; place it in the house plan",
        "tecb_data.sources.reddit -> tecb_data.cli: 'sources' (rank 2) imports the higher 'cli' (rank 5)",
    ]


def test_the_public_face_stays_where_it_was():
    import tecb_eval
    from tecb_eval.grid.run import run_grid
    from tecb_eval.reports import compare

    for name in tecb_eval.__all__:
        assert getattr(tecb_eval, name) is not None, name
    assert tecb_eval.run_grid is run_grid and tecb_eval.compare is compare
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        tecb_eval.nothing  # noqa: B018


def test_every_room_is_in_the_wheel():
    """pyproject lists packages by hand; an editable install finds a forgotten one anyway, a wheel does
    not. Every folder with an __init__.py must be in the list."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(REPO).parts)
               for package in ("tecb_data", "tecb_eval") for init in (REPO / package).rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_across_modules(root: Path, packages: tuple[str, ...]) -> list[str]:
    """Where one of our modules imports or reads another module's private name: ``from X import _y``,
    and ``m._y`` where ``m`` is bound in that module to one of our modules (``import a.b as m``,
    ``from a import b``). A module's own names, and other libraries' private names, do not count."""
    known: dict[str, Path] = {}
    for package in packages:
        known.update(modules(root, package))
    found = []
    for name, path in sorted(known.items()):
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound: dict[str, str] = {}  # a local name -> the module of ours it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = imported_from(name, is_package, node)
                if base not in known:
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif _private(alias.name) and base != name:
                        found.append(f"{name} imports {base}.{alias.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and bound[node.value.id] != name):
                found.append(f"{name} reads {bound[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_private_name_is_used_across_modules():
    # What modules share goes by public names; a leading underscore stays in its module.
    assert private_names_across_modules(REPO, ("tecb_data", "tecb_eval")) == []


def test_the_private_name_check_finds_an_import_and_a_read(tmp_path):
    root = _package(tmp_path, {
        "tecb_eval/__init__.py": "",
        "tecb_eval/reports/__init__.py": "",
        "tecb_eval/reports/tables.py": "def _shown(v):\n    return v\n\ndef ok():\n    return _shown(1)\n",
        "tecb_eval/reports/board.py": "from tecb_eval.reports import tables\nx = tables._shown(1)\n",
        "tecb_eval/reports/other.py": "from .tables import _shown, ok\nimport os\ny = os._exit\n",
        "tecb_data/__init__.py": "",
    })
    assert private_names_across_modules(root, ("tecb_data", "tecb_eval")) == [
        "tecb_eval.reports.board reads tecb_eval.reports.tables._shown",
        "tecb_eval.reports.other imports tecb_eval.reports.tables._shown",
    ]


def test_the_grid_keeps_its_rooms_small():
    # The grid's plan, encoding and execution live apart: the module that runs them stays
    # short and no class in the grid grows past one screenful of responsibilities.
    assert len((REPO / "tecb_eval/grid/run.py").read_text(encoding="utf-8").splitlines()) <= 350
    for path in sorted((REPO / "tecb_eval/grid").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno - node.lineno + 1 <= 200, f"{path.name}: class {node.name} is over 200 lines"


def _reads_the_package_version(tree: ast.AST) -> list[int]:
    """Lines that ask importlib.metadata for tecb's version: ``version("tecb")`` under any name."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "tecb" and getattr(node.func, "id", getattr(node.func, "attr", "")) in
            ("version", "_version", "metadata", "distribution")]


def test_the_package_version_is_read_in_one_place():
    """tecb_data.version reads it and says what a source tree without an install is; a second
    reader (a Dask version check, a report's provenance) broke a run from such a tree."""
    found = {}
    for path in sorted((REPO / "tecb_eval").rglob("*.py")) + sorted((REPO / "tecb_data").rglob("*.py")):
        lines = _reads_the_package_version(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path.relative_to(REPO))] = lines
    assert list(found) == ["tecb_data/version.py"], found
    assert _reads_the_package_version(ast.parse('from importlib.metadata import version\nversion("tecb")\n')) == [2]


# Features whose names other things have too (a command's --prompt, a dataset's location): a probe
# of one counts where it asks something named an encoder.
_SHARED_WORDS = {"prompt", "backend", "dtype", "location"}


def encoder_feature_probes(root: Path, features: set[str]) -> list[str]:
    """Where code outside ``tecb_eval/models`` asks an encoder whether it has a feature
    (``getattr(x, "per_task", ...)``, ``hasattr(x, "encode_batches")``) or what class it is
    (``isinstance(x, SomeEncoder)``, ``issubclass``), as ``file:line``. The encoder base class
    declares every feature with its default: code outside the models' room reads the attribute."""
    found = []
    for path in sorted((root / "tecb_eval").rglob("*.py")):
        if (root / "tecb_eval/models") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2):
                continue
            where = f"{path.relative_to(root).as_posix()}:{node.lineno}"
            second = node.args[1]
            if (node.func.id in ("getattr", "hasattr") and isinstance(second, ast.Constant)
                    and second.value in features
                    and (second.value not in _SHARED_WORDS or "encoder" in ast.unparse(node.args[0]).lower())):
                found.append(f"{where} {node.func.id}(..., {second.value!r})")
            elif node.func.id in ("isinstance", "issubclass"):
                named = second.elts if isinstance(second, ast.Tuple) else [second]
                classes = [getattr(n, "id", getattr(n, "attr", "")) for n in named]
                if any(name.endswith("Encoder") or name == "ENCODER_CLASSES" for name in classes):
                    found.append(f"{where} {node.func.id}(..., {', '.join(classes)})")
    return found


def _encoder_features() -> set[str]:
    from tecb_eval.models.kinds.common import Encoder

    # identity and encode are what every encoder has, an encoder object of a user's too.
    return {name for name in vars(Encoder) if not name.startswith("_")} - {"identity", "encode"}


def test_code_outside_the_models_reads_declared_encoder_features():
    features = _encoder_features()
    assert {"per_task", "per_dataset", "persistent", "in_batches", "note_cache_hits", "scheduler"} <= features
    assert encoder_feature_probes(REPO, features) == []


def test_the_encoder_feature_check_finds_a_probe_and_a_class_test(tmp_path):
    root = _package(tmp_path, {
        "tecb_eval/__init__.py": "",
        "tecb_eval/models/__init__.py": "",
        "tecb_eval/models/encoders.py": "def f(e):\n    return getattr(e, 'per_task', False)\n",
        "tecb_eval/grid/__init__.py": "",
        "tecb_eval/grid/encoding.py": (
            "def f(e, M):\n    a = getattr(e, 'per_task', False)\n    b = hasattr(e, 'encode_batches')\n"
            "    c = isinstance(e, (int, M.MeanPoolingEncoder))\n    d = getattr(e, 'address', '')\n"
            "    g = getattr(args, 'prompt', None)\n    h = getattr(run.encoder, 'prompt', None)\n"
            "    return e.persistent\n"),
    })
    assert encoder_feature_probes(root, _encoder_features()) == [
        "tecb_eval/grid/encoding.py:2 getattr(..., 'per_task')",
        "tecb_eval/grid/encoding.py:3 hasattr(..., 'encode_batches')",
        "tecb_eval/grid/encoding.py:4 isinstance(..., int, MeanPoolingEncoder)",
        "tecb_eval/grid/encoding.py:7 getattr(..., 'prompt')",
    ]


# The grid's options travel as one checked GridConfig (tecb_eval/grid/plan.py); run_grid keeps
# its keywords as the library's face and makes the config from them.
MOST_PARAMETERS = 12
LONG_SIGNATURES_ALLOWED = {"tecb_eval/grid/run.py:run_grid"}


def long_signatures(root: Path, folder: str = "tecb_eval/grid") -> list[str]:
    """Functions and methods under ``folder`` that take more than :data:`MOST_PARAMETERS` parameters,
    as ``file:name (count)``: every named one counts (positional, keyword-only, ``*args``,
    ``**options``), ``self`` and ``cls`` do not."""
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            named = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            count = (len([name for name in named if name not in ("self", "cls")]) + (args.vararg is not None)
                     + (args.kwarg is not None))
            where = f"{path.relative_to(root).as_posix()}:{node.name}"
            if where in LONG_SIGNATURES_ALLOWED:
                continue
            if count > MOST_PARAMETERS:
                found.append(f"{where} ({count})")
    return found


def test_no_grid_function_takes_more_than_twelve_parameters():
    assert long_signatures(REPO) == []


def test_the_signature_check_finds_a_long_list_and_a_catch_all_beside_it(tmp_path):
    thirteen = ", ".join(f"p{i}" for i in range(12))
    root = _package(tmp_path, {
        "tecb_eval/grid/plan.py": (
            f"def long(a, *, {thirteen}):\n    pass\n"
            f"class Plan:\n    def __init__(self, {thirteen[:-5]}):\n        pass\n"
            f"def catch_all(self, a, {thirteen[:-5]}, **cells):\n    pass\n"
            "def forwards(self, what, *args, **options):\n    pass\n"),
        "tecb_eval/grid/run.py": f"def run_grid(a, b, *, {thirteen}):\n    pass\n",
    })
    assert long_signatures(root) == ["tecb_eval/grid/plan.py:long (13)", "tecb_eval/grid/plan.py:catch_all (13)"]


def setting_text_reads(root: Path) -> list[str]:
    """Where code under ``tecb_eval`` (outside the models' room, whose identities are ``a=b|c=d``
    texts of their own) splits a text on ``=``, or where the grid reads a row's setting text back,
    as ``file:line``. A cluster setting travels as a typed ``Setting`` (parameter, value); its text
    (``"k=10"``) is made for a row and read back in one place, the results store's ``read_setting``."""
    found = []
    for path in sorted((root / "tecb_eval").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("tecb_eval/models/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            splits = (name in ("partition", "rpartition", "split", "rsplit") and node.args
                      and isinstance(node.args[0], ast.Constant) and node.args[0].value == "=")
            grid_reads = (name == "read_setting" and relative.startswith("tecb_eval/grid/")
                          and relative != "tecb_eval/grid/store.py")
            if splits and relative != "tecb_eval/grid/store.py" or grid_reads:
                found.append(f"{relative}:{node.lineno} {name}")
    return found


def test_a_setting_text_is_read_only_by_the_results_store():
    assert setting_text_reads(REPO) == []


def test_the_setting_check_finds_a_split_and_a_read_in_the_grid(tmp_path):
    root = _package(tmp_path, {
        "tecb_eval/grid/store.py": "def read_setting(t):\n    return t.partition('=')\n",
        "tecb_eval/grid/work.py": "def k(cell):\n    return read_setting(cell.setting)\n",
        "tecb_eval/reports/figures.py": "def k(s):\n    a = read_setting(s)\n    return s.split('=', 1)[1]\n",
        "tecb_eval/models/kinds/common.py": "def parts(identity):\n    return identity.split('=')\n",
    })
    assert setting_text_reads(root) == ["tecb_eval/grid/work.py:2 read_setting", "tecb_eval/reports/figures.py:3 split"]
