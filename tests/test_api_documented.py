"""The API reference describes every parameter: each object the API page renders (``::: name``) and
each public name of ``tecb_data`` and ``tecb_eval`` has, in the docstring style mkdocs.yml names,
every parameter of its signature with a type and a meaning, what it returns and what it raises; a
dataclass's fields are its parameters and are described in the table the docs build generates
from the comment beside each field (docs/hooks/generated.py).

Read with griffe, as mkdocstrings reads them for the page, so what is checked is what is shown.
"""

from __future__ import annotations

import re
import sys

import pytest
import yaml

from helpers import REPO

griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra (mkdocstrings-python)")

API = REPO / "docs" / "api.md"
# Objects that raise nothing of their own: computing on what they are given, which was checked before.
RAISE_NOTHING = {
    "tecb_eval.reports.compare.mean_interval": "bootstraps a series the caller checked",
    "tecb_eval.reports.compare.against_best": "markers from rows compare has checked",
    "tecb_eval.reports.compare.comparison_table": "a frame of Comparison objects",
    "tecb_eval.reports.recommend.text": "formats Recommendation objects",
    "tecb_eval.reports.recommend.as_json": "formats Recommendation objects",
}


def docstring_style() -> str:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text().replace("!ENV", ""))
    handler = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    return handler["handlers"]["python"]["options"]["docstring_style"]


@pytest.fixture(scope="module")
def packages():
    options = {"returns_named_value": False}
    return {name: griffe.load(name, search_paths=[str(REPO)], docstring_parser=docstring_style(),
                              docstring_options=options, allow_inspection=False)
            for name in ("tecb_data", "tecb_eval")}


def rendered() -> list[str]:
    return re.findall(r"^::: ([\w.]+)", API.read_text(), flags=re.M)


def fields_tables() -> set[str]:
    return set(re.findall(r"<!-- tecb:fields ([\w.]+) -->", API.read_text()))


def lookup(packages, dotted: str):
    top, _, rest = dotted.partition(".")
    found = packages[top][rest] if rest else packages[top]
    return found.final_target if found.is_alias else found


def sections(obj) -> dict[str, list]:
    parsed = obj.docstring.parsed if obj.docstring else []
    return {s.kind.value: s.value for s in parsed}


def problems_of(obj, dotted: str) -> list[str]:
    """What the docstring of a function or a class leaves out."""
    found = sections(obj)
    signature = obj.members["__init__"] if obj.is_class and "__init__" in obj.members else obj
    documented = {p.name.lstrip("*"): p for p in found.get("parameters", [])}
    problems = []
    for parameter in getattr(signature, "parameters", []):
        if parameter.name in ("self", "cls"):
            continue
        described = documented.get(parameter.name)
        if described is None or not str(described.description).strip():
            problems.append(f"parameter {parameter.name!r} has no description")
        elif not (parameter.annotation or described.annotation):
            problems.append(f"parameter {parameter.name!r} has no type (annotation or docstring)")
    for name in set(documented) - {p.name for p in getattr(signature, "parameters", [])}:
        problems.append(f"describes {name!r}, which is not a parameter")
    if obj.is_function:
        if str(obj.returns) != "None" and not found.get("returns"):
            problems.append("no Returns section")
        if dotted not in RAISE_NOTHING and not found.get("raises"):
            problems.append("no Raises section (or list it in RAISE_NOTHING with why)")
    return problems


def test_the_docstring_style_is_one_mkdocstrings_renders_as_tables():
    assert docstring_style() in {"google", "numpy"}


def test_every_object_the_api_page_renders_describes_every_parameter(packages):
    problems, tables = {}, fields_tables()
    for dotted in rendered():
        obj = lookup(packages, dotted)
        if obj.is_module:
            continue
        if obj.is_class and dotted in tables:
            continue  # a dataclass: its fields table (next test) is its parameter table
        found = problems_of(obj, dotted)
        if found:
            problems[dotted] = found
    assert not problems, problems


def test_every_dataclass_field_table_describes_every_field():
    sys.path.insert(0, str(REPO / "docs" / "hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(REPO / "docs" / "hooks"))
    for dotted in fields_tables():
        rows = generated.fields_table(dotted).splitlines()[2:]
        empty = [row.split("|")[1].strip() for row in rows if not row.rstrip(" |").split("|")[-1].strip()]
        assert rows and not empty, f"{dotted}: fields without a comment in the source: {empty}"


def test_every_public_name_of_both_packages_is_on_the_api_page():
    import inspect

    import tecb_data
    import tecb_eval

    shown = set(rendered()) | fields_tables()
    page = API.read_text()
    for package in (tecb_data, tecb_eval):
        for name in package.__all__:
            if name.startswith("__"):
                continue
            obj = getattr(package, name)  # tecb_eval's names are imported on first use
            if inspect.ismodule(obj):  # a module: the page says so and renders its functions
                assert f"`{package.__name__}.{name}`" in page and any(s.startswith(obj.__name__ + ".") for s in shown)
            else:
                path = f"{obj.__module__}.{obj.__qualname__}"
                assert path in shown, f"{package.__name__}.{name} ({path}) is not rendered on the API page"


def test_the_check_finds_an_undocumented_parameter():
    code = '''
def f(a: int, b, *, c: str = "x"):
    """Do it.

    Args:
        a: The first.
        b (list): The second.

    Returns:
        int: The sum.
    """
'''
    module = griffe.visit("m", filepath=REPO / "m.py", code=code, docstring_parser=docstring_style())
    assert problems_of(module["f"], "m.f") == ["parameter 'c' has no description",
                                                "no Raises section (or list it in RAISE_NOTHING with why)"]
