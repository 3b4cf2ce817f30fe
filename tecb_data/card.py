"""Rendering dataset cards from the templates in cards/ (shipped as the package tecb_data.cards),
and checking the metadata the Hub validates with huggingface_hub's own card classes."""

from __future__ import annotations

import re
from importlib import resources

import jinja2
import yaml

from tecb_data.errors import UserError
from tecb_data.recipes import BENCHMARK_CITATION, DATASETS, DatasetSpec, Recipe
from tecb_data.stats import markdown_table, size_category

# Licence ids the Hub accepts on dataset cards (the data-relevant part of
# https://huggingface.co/docs/hub/repositories-licenses); "other" needs license_name and license_link.
HUB_LICENSES = frozenset(
    """apache-2.0 mit cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0
    cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0
    cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 odc-by odbl pddl cdla-permissive-2.0 cdla-sharing-1.0 other unknown""".split()
)
# Hub task categories that describe clustering data (MTEB files its clustering sets under these).
HUB_TASK_CATEGORIES = frozenset({"text-classification", "sentence-similarity", "feature-extraction", "text-retrieval"})


def yaml_scalar(value) -> str:
    """``value`` as one YAML scalar, written by the YAML dumper (double-quoted, every line break and
    control character escaped): text a user supplied can never end the scalar and add a key."""
    dumped = yaml.safe_dump(value, default_style='"', allow_unicode=True, width=float("inf"))
    return dumped.removesuffix("\n").removesuffix("\n...")


def code_span(value) -> str:
    """``value`` as a Markdown code span: delimited by one backtick more than its longest run of
    backticks (CommonMark), so a backtick in a column name cannot end the span early."""
    text = str(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence_for(*texts) -> str:
    """A code fence longer than any run of backticks in ``texts`` (three at least): a fence inside a
    citation file cannot close the card's BibTeX block (CommonMark: a block closes only on a fence
    at least as long as its opening one)."""
    longest = max((len(run) for text in texts for item in _as_list(text) for run in re.findall(r"`{3,}", str(item))),
                  default=0)
    return "`" * max(3, longest + 1)


def _environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: resources.files("tecb_data.cards").joinpath(name).read_text(encoding="utf-8")
    )
    environment = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["yaml"] = yaml_scalar
    environment.filters["code"] = code_span
    environment.globals["fence_for"] = fence_for
    return environment


# The first line a reader sees of a card built from the embedded demo sample (right below the
# metadata block, which must open the file for the Hub to read it).
SYNTHETIC_NOTICE = ("> **Synthetic demo data.** Built from tecb's small embedded demo sample, written for this "
                    "project: not the published dataset, and scores on it are not comparable with the paper's.")


def mark_synthetic(text: str) -> str:
    """``text`` (a card) with :data:`SYNTHETIC_NOTICE` as the first line below its metadata block."""
    if SYNTHETIC_NOTICE in text:
        return text
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end >= 0:
            cut = end + len("\n---\n")
            rest = text[cut:]
            return text[:cut] + SYNTHETIC_NOTICE + "\n" + ("" if rest.startswith("\n") else "\n") + rest
    return SYNTHETIC_NOTICE + "\n\n" + text


def render_card(spec: DatasetSpec, recipe: Recipe, *, version: str, seed: int, stats: dict, splits: list[dict],
                data_digest: str | None = None, extra: dict | None = None, synthetic: bool = False) -> str:
    """The card; ``data_digest`` (a hash of the data files) goes into each config's description, where
    ``datasets`` hashes it: it keys its cache of a local folder by the card's metadata and the data
    files' names, not their content, so without it two builds of one dataset would share a cache entry.
    ``synthetic``: built from the demo sample, said in the card's first line (:func:`mark_synthetic`)."""
    text = _render(spec, recipe, version=version, seed=seed, stats=stats, splits=splits, data_digest=data_digest,
                   extra=extra)
    return mark_synthetic(text) if synthetic else text


def _render(spec: DatasetSpec, recipe: Recipe, *, version: str, seed: int, stats: dict, splits: list[dict],
            data_digest: str | None, extra: dict | None) -> str:
    template = _environment().get_template(spec.card_template)
    return template.render(
        data_digest=data_digest,
        spec=spec,
        recipe=recipe,
        version=version,
        seed=seed,
        stats_table=markdown_table(stats),
        size_category=size_category(stats["samples"]),
        splits=splits,
        benchmark_citation=BENCHMARK_CITATION,
        **(extra or {}),
    )


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def card_problems(text: str, manifest: dict) -> list[str]:
    """What is wrong with a rendered card's metadata, read through huggingface_hub.DatasetCard the
    way the Hub reads it; empty when the card is good to publish with this manifest."""
    from huggingface_hub import DatasetCard  # imported here: building a dataset does not need it

    try:
        card = DatasetCard(text)
    except (ValueError, yaml.YAMLError) as exc:
        return [f"the YAML metadata block does not parse ({' '.join(str(exc).split())})"]
    data = card.data
    problems = []
    licenses = _as_list(data.license)
    spec = DATASETS.get(manifest.get("dataset"))
    if len(licenses) != 1 or licenses[0] not in HUB_LICENSES:
        problems.append(f"license {data.license!r} is not one Hub licence id")
    elif spec is not None and licenses[0] != spec.license:
        problems.append(f"license {licenses[0]!r} differs from the source's licence {spec.license!r}")
    elif spec is None and manifest.get("license") and licenses[0] != manifest["license"]:
        problems.append(f"license {licenses[0]!r} differs from the manifest's licence {manifest['license']!r}")
    if licenses == ["other"] and not (data.get("license_name") and data.get("license_link")):
        problems.append("license 'other' needs license_name and license_link")
    # A table dataset says its language in the manifest; every registry dataset is German.
    language = manifest.get("language", "de") if spec is None else "de"
    if _as_list(data.language) != [language]:
        problems.append(f"language is {data.language!r}, expected [{language!r}]")
    tasks = _as_list(data.task_categories)
    if not tasks or any(task not in HUB_TASK_CATEGORIES for task in tasks):
        problems.append(f"task_categories {tasks!r} must be Hub task categories among {sorted(HUB_TASK_CATEGORIES)}")
    if not (isinstance(data.pretty_name, str) and data.pretty_name.strip()):
        problems.append("pretty_name is missing")
    elif spec is not None and data.pretty_name != spec.pretty_name:
        problems.append(f"pretty_name {data.pretty_name!r} differs from the registry's {spec.pretty_name!r}")
    samples = manifest.get("statistics", {}).get("samples")
    if samples is not None and _as_list(data.size_categories) != [size_category(samples)]:
        problems.append(f"size_categories {data.size_categories!r} does not fit {samples} samples ({size_category(samples)})")
    problems += _config_problems(data.get("configs"), manifest)
    return problems


def _config_problems(configs, manifest: dict) -> list[str]:
    """``configs`` must name files of this dataset, so the Hub viewer and ``datasets.load_dataset``
    read exactly what the manifest hashes."""
    if not isinstance(configs, list) or not configs:
        return ["configs is missing: datasets.load_dataset would guess the files"]
    problems, names = [], []
    files = manifest.get("files", {})
    for config in configs:
        name = config.get("config_name") if isinstance(config, dict) else None
        data_files = config.get("data_files") if isinstance(config, dict) else None
        if not name or not isinstance(data_files, list) or not data_files:
            problems.append(f"config {config!r} needs config_name and a list of data_files")
            continue
        names.append(name)
        for entry in data_files:
            entry = entry if isinstance(entry, dict) else {}
            if not entry.get("split"):
                problems.append(f"config {name!r}: a data_files entry has no split")
            if entry.get("path") not in files:
                problems.append(f"config {name!r}: data file {entry.get('path')!r} is not a file of this dataset")
    if len(set(names)) != len(names):
        problems.append(f"config names repeat: {names}")
    if "default" not in names:
        problems.append("no 'default' config: load_dataset(repo_id) would not know what to read")
    return problems


def check_card(text: str, manifest: dict, *, where: str):
    """Raise a UserError naming the first problem of the card; return its metadata
    (huggingface_hub.DatasetCardData) when good."""
    from huggingface_hub import DatasetCard

    problems = card_problems(text, manifest)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(f"{where}: dataset card metadata: {problems[0]}{more}; fix the card template and rebuild")
    return DatasetCard(text).data
