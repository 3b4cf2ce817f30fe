"""Layer-wise sweep: V-measure of every hidden layer of a transformers model from one forward pass.

ELECTRA-style models give poor sentence embeddings at their last layer and good ones earlier (Rep
et al. 2024), so a model is worth sweeping. ``layer_sweep`` runs each unique text through the model
once with all hidden states, mean-pools every asked layer (attention-masked; layer 0 is the
embedding layer) and stores each layer's vectors in the grid's embedding cache under the identity
that ``get_encoder(model, layer=k)`` has. The clustering is then the grid's own: ``run_grid`` with
one model per layer, ``{"spec": ..., "layer": k}``, legacy protocol, Minibatch k-Means on the
embeddings, which finds every vector in the cache. So layer k scores exactly what a grid run with
``layer=k`` scores, and a later grid run with ``layer=k`` encodes nothing.

Output folder (written as ``OUT.partial`` and swapped in when complete; its marker
``.tecb-output.json`` lets a later sweep replace it, and a sweep never writes into a folder
something else wrote)::

    OUT/layers.csv    one row per (dataset, layer): mean and SD of V-measure over splits, AMI, ARI, ...
    OUT/splits.csv    one row per (dataset, layer, split): the grid's rows
    OUT/figure.png    V-measure against layer, one line per dataset, the best layer marked
    OUT/summary.md    the best layer per dataset, and the table of layers x datasets
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tecb_data.errors import UserError
from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import Progress
from tecb_data.seeding import DEFAULT_SEED
from tecb_data.outputs import check_output, refuse_nested, staged_output
from tecb_eval.grid.seeds import check_seed
from tecb_eval.files import WriteError, atomic_save, markdown_text
from tecb_eval.grid.cache import ENCODE_CHUNK, EmbeddingStore
from tecb_eval.grid.store import check_results
from tecb_eval.clustering.profiles import DEFAULT_PROFILE

COMMAND = "tecb-eval layers"  # the marker of a sweep's output folder
CONFIGURATION = ("minibatch_kmeans", "none")  # the grid's Table-2 cell: k-means on the embeddings
LAYERS_CSV, SPLITS_CSV, FIGURE, SUMMARY_MD = "layers.csv", "splits.csv", "figure.png", "summary.md"
METRICS = ("v_measure", "ami", "ari", "homogeneity", "completeness")
# Far above the layers of any model (the deepest public transformers have about a hundred).
MAX_LAYERS = 1_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_layers(layers) -> list[int] | None:
    """``None``/``"all"`` (every layer), an int, a list of ints, or a string like ``"0-12"`` or
    ``"0,4,6-8"`` -> sorted distinct layer numbers (None for all). Bad syntax is a one-line error."""
    if layers is None or (isinstance(layers, str) and layers.strip().lower() == "all"):
        return None
    if isinstance(layers, (int, np.integer)) and not isinstance(layers, bool):
        layers = [int(layers)]
    if isinstance(layers, str):
        found: list[int] = []
        for part in layers.split(","):
            match = _RANGE.match(part.strip())
            if not match:
                raise UserError(f"layers {layers!r}: {part.strip()!r} is not a layer or a range; "
                                "write e.g. 0-12 or 0,4,6-8 (0 is the embedding layer)")
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) is not None else low
            if high < low:
                raise UserError(f"layers {layers!r}: the range {part.strip()} runs backwards; write {high}-{low}")
            # Counted from the bounds before a list is made: 0-300000000 is a typo, not a sweep.
            if len(found) + high - low + 1 > MAX_LAYERS:
                raise UserError(f"layers {layers!r}: {len(found) + high - low + 1:,} layers; no model has more than "
                                f"{MAX_LAYERS:,}; name the layers of your model, e.g. 0-12")
            found.extend(range(low, high + 1))
        layers = found
    try:
        values = [int(k) for k in layers if not isinstance(k, bool)]
    except (TypeError, ValueError):
        raise UserError(f"layers {layers!r}: give layer numbers, e.g. [0, 6, 12] or '0-12'") from None
    if len(values) != len(list(layers)) or not values:
        raise UserError(f"layers {layers!r}: give at least one layer number, e.g. [0, 6, 12] or '0-12'")
    negative = [k for k in values if k < 0]
    if negative:
        raise UserError(f"layers: {negative[0]} is negative; layers count from 0 (the embedding layer)")
    return sorted(set(values))


def _load(datasets) -> list:
    import tecb_data

    if isinstance(datasets, (str, Path)) or isinstance(datasets, tecb_data.Benchmark):
        datasets = [datasets]
    out = []
    for item in datasets:
        if isinstance(item, tecb_data.Benchmark):
            out.append(item)
            continue
        text = str(item)
        if not Path(text).exists() and "@" in text:
            repo_id, _, revision = text.partition("@")
            out.append(tecb_data.load(repo_id, revision=revision))
        else:
            out.append(tecb_data.load(text))
    if not out:
        raise UserError("no datasets given: pass at least one dataset folder")
    return out


def _sweep_encoder(model, *, max_length, batch_size, device, seed):
    """The model mean-pooled (any layer), or a one-line error for encoders that have no layers."""
    from tecb_eval.models import registry
    from tecb_eval.models.encoders import get_encoder

    if not isinstance(model, (str, Path)):
        raise UserError(f"{type(model).__name__}: a layer sweep needs a transformers model (folder, Hub id or "
                        "minilm-l6), not an encoder object")
    if "layer" not in registry.kind_of(model).options:
        raise UserError(f"{model}: has no hidden layers to sweep; a layer sweep needs a transformers model "
                        "(a checkpoint folder, a sentence-transformers folder, a Hub id, or minilm-l6)")
    # layer=-1: the last layer, through mean pooling even for a sentence-transformers folder.
    options = {"layer": -1, "batch_size": batch_size, "device": device, "seed": seed}
    if max_length is not None:
        options["max_length"] = max_length
    encoder = get_encoder(model, **options)
    if not encoder.sweeps_layers:
        raise UserError(f"{model}: has no hidden layers to sweep; a layer sweep needs a transformers model "
                        "(a checkpoint folder, a sentence-transformers folder, a Hub id, or minilm-l6)")
    return encoder


def encode_layers_once(encoder, texts: Sequence[str], layers: Sequence[int], cache_dir: Path,
                       *, progress: bool = True) -> int:
    """Put every text's vector of each layer into that layer's embedding store under ``cache_dir``,
    encoding each text that any layer lacks once, all layers from the same forward pass.

    Texts go to the model in the order and chunks the grid's own encoding uses (distinct texts
    sorted, then by length; ``ENCODE_CHUNK`` per call), so a layer's vectors are those a grid run
    with ``layer=k`` computes itself. Returns how many texts were encoded."""
    stores = {k: EmbeddingStore(cache_dir, encoder.layer_identity(k)) for k in layers}
    missing: set[str] = set()
    for store in stores.values():
        missing.update(store.missing(texts))
    todo = sorted(missing)
    todo.sort(key=len)
    with Progress(total=len(todo), desc=f"encoding {len(layers)} layers at once", unit="texts",
                  enabled=progress and bool(todo)) as bar, Heartbeat(bar):  # one chunk of a large model: minutes
        for start in range(0, len(todo), ENCODE_CHUNK):
            chunk = todo[start:start + ENCODE_CHUNK]
            vectors = encoder.encode_layers(chunk, list(layers))
            position = {text: i for i, text in enumerate(chunk)}
            for k, store in stores.items():
                # Each store saves (as a shard of its own) only the texts it lacks.
                store.encode_missing(chunk, lambda batch, k=k: vectors[k][[position[t] for t in batch]])
            bar.update(len(chunk))
    return len(todo)


def _summarise(splits: pd.DataFrame, layer_of: dict, identity_of: dict) -> pd.DataFrame:
    """Mean over splits (SD with ddof 0, as ``report.split_means``) per (dataset, layer); ``best``
    marks each dataset's highest mean V-measure (the lowest layer on a tie)."""
    frame = splits.assign(layer=splits["model"].map(layer_of))
    grouped = frame.groupby(["dataset", "layer"], sort=True)
    table = grouped[list(METRICS)].mean()
    table.insert(1, "v_measure_sd", grouped["v_measure"].std(ddof=0).where(grouped.size() > 1))
    table["splits"] = grouped.size()
    table = table.reset_index()
    table["model"] = table["layer"].map({k: m for m, k in layer_of.items()})
    table["model_identity"] = table["layer"].map(identity_of)
    table["mteb_name"] = table["dataset"].map(dict(zip(frame["dataset"], frame["mteb_name"])))
    best = table.sort_values(["dataset", "v_measure", "layer"], ascending=[True, False, True]).groupby("dataset").head(1)
    table["best"] = table.index.isin(best.index)
    columns = ["dataset", "layer", "v_measure", "v_measure_sd", "ami", "ari", "homogeneity", "completeness",
               "splits", "best", "model", "model_identity", "mteb_name"]
    return table[columns].sort_values(["dataset", "layer"]).reset_index(drop=True)


def summary_markdown(table: pd.DataFrame, *, model: str, seed: int, n_layers: int) -> str:
    md = markdown_text  # every name written into the Markdown, escaped
    lines = [f"Layer sweep of {md(model)} ({n_layers} layers; layer 0 is the embedding layer): V-measure x 100, "
             f"Minibatch k-Means (seed {seed}) on each layer's mean-pooled embeddings, mean over splits "
             "(legacy protocol).", ""]
    for dataset, rows in table.groupby("dataset", sort=True):
        best = rows[rows.best].iloc[0]
        last = rows[rows.layer == rows.layer.max()].iloc[0]
        # The SD over one split is no spread: "–", not 0.00.
        spread = "–" if best.splits < 2 or pd.isna(best.v_measure_sd) else f"{100 * best.v_measure_sd:.2f}"
        lines.append(f"- {md(dataset)}: best layer {int(best.layer)}, {100 * best.v_measure:.2f} ± "
                     f"{spread} over {int(best.splits)} split{'s' if best.splits != 1 else ''} "
                     f"(layer {int(last.layer)}: {100 * last.v_measure:.2f})")
    lines.append("")
    wide = table.pivot(index="layer", columns="dataset", values="v_measure").sort_index()
    datasets = list(wide.columns)
    lines.append("| layer | " + " | ".join(map(md, datasets)) + " |")
    lines.append("| ---: |" + " ---: |" * len(datasets))
    for layer, row in wide.iterrows():
        cells = []
        for d in datasets:
            is_best = bool(table[(table.dataset == d) & (table.layer == layer)].best.iloc[0])
            cells.append(f"**{100 * row[d]:.2f}**" if is_best else f"{100 * row[d]:.2f}")
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def layers_figure(table: pd.DataFrame, *, title: str):
    """V-measure against layer, one line per dataset with a band of ± the SD over splits, the best
    layer starred; the y-axis is the V-measure scale from 0 (the figures' house rules:
    :mod:`tecb_eval.reports.figures`)."""
    from tecb_eval.reports.figures import new_figure, style, suptitle, value_limit

    fig, ax = new_figure(figsize=(7.5, 4.6))
    highest = 0.0
    for i, (dataset, rows) in enumerate(table.groupby("dataset", sort=True)):
        colour, marker = style(i)
        mean, sd = 100 * rows.v_measure.to_numpy(), 100 * rows.v_measure_sd.fillna(0).to_numpy()
        splits = int(rows.splits.max())
        if splits >= 2:
            ax.fill_between(rows.layer, mean - sd, mean + sd, color=colour, alpha=0.15, linewidth=0)
            spread = "band ± SD over splits"
        else:  # no spread over one split: no band promised
            spread = "one split: no band"
        ax.plot(rows.layer, mean, marker=marker, markersize=4, color=colour, gid=f"line:{dataset}",
                label=f"{dataset} (mean over {splits} split{'s' if splits != 1 else ''}; {spread})")
        best = rows[rows.best].iloc[0]
        ax.plot([best.layer], [100 * best.v_measure], marker="*", markersize=15, color=colour,
                markeredgecolor="black", linestyle="none")
        # Towards the middle of the plot: at the last layer, text to the right fell outside the axes.
        right_half = best.layer > (table.layer.min() + table.layer.max()) / 2
        ax.annotate(f"best: layer {int(best.layer)}", (best.layer, 100 * best.v_measure),
                    textcoords="offset points", xytext=(-8 if right_half else 8, 8 + 11 * i), fontsize=8, color=colour,
                    ha="right" if right_half else "left", gid=f"best:{dataset}")
        highest = max(highest, float(np.nanmax(mean + sd)))
    ax.set_xticks(sorted(table.layer.unique()))
    ax.set_ylim(*value_limit(highest))
    ax.set_xlabel("layer (0 = embedding layer)")
    ax.set_ylabel("V-measure x 100 (k-means)")
    suptitle(fig, title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    return fig


def plot_layers(table: pd.DataFrame, path: Path, *, title: str) -> Path:
    from tecb_eval.reports.figures import save_figure

    return save_figure(layers_figure(table, title=title), path)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    from tecb_eval.reports.tables import csv_safe  # a model or dataset name holding a formula stays text

    text = csv_safe(frame).to_csv(index=False, float_format="%.17g", lineterminator="\n")
    atomic_save(path, lambda fh: fh.write(text.encode("utf-8")), ".csv")


def _write_output(output_dir, inputs, table: pd.DataFrame, splits: pd.DataFrame, *, name: str, seed: int,
                  n_layers: int, demo_note: str | None = None, demo_title: str | None = None) -> None:
    """The four files, written whole or not at all into a folder the sweep owns (its marker): an
    earlier sweep's folder is replaced, anything else was refused before the sweep started."""
    try:
        with staged_output(output_dir, COMMAND, inputs=inputs) as stage:
            _write_csv(table, stage.work / LAYERS_CSV)
            _write_csv(splits, stage.work / SPLITS_CSV)
            stage.check()
            title = f"{name}: V-measure per layer (k-means, seed {seed})"
            plot_layers(table, stage.work / FIGURE, title=title + (f"\n{demo_title}" if demo_title else ""))
            stage.check()
            markdown = summary_markdown(table, model=name, seed=seed, n_layers=n_layers)
            if demo_note:  # synthetic data say so first, wherever they go
                markdown = f"{demo_note}\n\n{markdown}"
            atomic_save(stage.work / SUMMARY_MD, lambda fh: fh.write(markdown.encode("utf-8")), ".md")
    except WriteError as exc:
        raise UserError(f"--out {output_dir}: writing {exc.path.name} failed ({exc.reason}); nothing in {output_dir} "
                        "was changed: free space or choose another --out") from None


def layer_sweep(model, datasets, layers=None, seed: int = DEFAULT_SEED, cache_dir=None, output_dir=None, *,
                max_length: int | None = None, batch_size: int = 32, device: str | None = None,
                results=None, per_split: bool = False, profile: str = DEFAULT_PROFILE, progress: bool = True,
                log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """V-measure of each of ``layers`` of ``model`` on ``datasets``: one row per (dataset, layer).

    ``model``: a transformers checkpoint or sentence-transformers folder, a Hub id, or ``minilm-l6``
    (its transformer, mean-pooled). ``layers``: None (all: 0 .. the model's number of layers),
    ints, or ``"0-12"`` / ``"0,4,6-8"``. Each unique text is encoded once for all layers; the
    clustering is ``run_grid``'s with ``{"spec": model, "layer": k}`` (legacy protocol,
    ``minibatch_kmeans`` on ``none``, ``seed``), so layer k's value equals that grid's. Without
    ``cache_dir`` the vectors live in a temporary folder for the call. ``results``: a grid results
    store (JSONL) to append the cells to. ``output_dir``: where layers.csv, splits.csv, figure.png
    and summary.md go. ``per_split=True`` returns the grid's rows, one per (dataset, layer, split),
    instead. The frame's ``attrs`` hold ``encoded_texts`` (texts sent through the model),
    ``encode_seconds``, ``cluster_seconds`` and ``n_layers``.

    Args:
        model (str | Path): A transformers checkpoint or sentence-transformers folder, a Hub id, or
            ``minilm-l6``.
        datasets (Sequence[str | Path | Benchmark]): Dataset folders, repo ids or loaded benchmarks.
        layers (None | int | Sequence[int] | str): The layers to score; None: all (0 .. the model's
            number of layers); ``"0-12"`` or ``"0,4,6-8"``.
        seed (int): Seed of the k-means clustering.
        cache_dir (str | Path | None): Keeps the vectors across calls; None: a temporary folder.
        output_dir (str | Path | None): Where layers.csv, splits.csv, figure.png and summary.md go;
            None: nothing written.
        max_length (int | None): Truncate texts to this many tokens; None: the model's own limit.
        batch_size (int): Texts per forward pass.
        device (str | None): The torch device; None: CUDA when present.
        results (str | Path | None): A grid results store (JSONL) to append the cells to.
        per_split (bool): Return the grid's rows, one per (dataset, layer, split), instead.
        profile (str): ``"current"`` or ``"paper"``, as in ``run_grid``.
        progress (bool): Show progress bars on a terminal.
        log (Callable[[str], None] | None): Receives each line the sweep says; None: standard error.

    Returns:
        pandas.DataFrame: One row per (dataset, layer) with its V-measure, or the grid's rows with
            ``per_split``; ``attrs`` hold ``encoded_texts``, ``encode_seconds``, ``cluster_seconds`` and
            ``n_layers``.

    Raises:
        UserError: A model without hidden layers to pool, a layer outside the model, a bad seed, or
            an output folder or results store that is not ours to write.
    """
    from tecb_eval.models.encoders import display_name
    from tecb_eval.grid.run import run_grid

    say = log or (lambda message: print(message, file=sys.stderr))
    seed = check_seed(seed)  # before encoding, not after it (run_grid would check it then)
    asked = parse_layers(layers)
    benchmarks = _load(datasets)
    # Where the sweep writes is checked before the model is loaded (refuse_nested's rules).
    local = [b.location for b in benchmarks if getattr(b, "location", None) and Path(b.location).is_dir()]
    local += [model] if isinstance(model, (str, Path)) and Path(str(model)).is_dir() else []
    if cache_dir is not None:
        refuse_nested(cache_dir, option="cache folder", itself=True, inputs=local)
    if output_dir is not None:
        refuse_nested(output_dir, command=COMMAND)
    encoder = _sweep_encoder(model, max_length=max_length, batch_size=batch_size, device=device, seed=seed)
    n_layers = encoder.n_layers
    beyond = [k for k in (asked or []) if k > n_layers]
    if beyond:
        raise UserError(f"{model}: layer {beyond[0]} asked, but this model has layers 0..{n_layers} "
                        f"(0 = embedding layer, {n_layers} = last); pass --layers 0-{n_layers} or fewer")
    chosen = list(range(n_layers + 1)) if asked is None else asked
    if output_dir is not None:
        # Checked before the long work: an unwritable or foreign --out, or one that is, holds or lies
        # inside something the sweep reads or keeps, is one line before any work (the swap would delete them).
        inputs = [b.location for b in benchmarks if getattr(b, "location", None) and Path(b.location).is_dir()]
        inputs += [model] if Path(str(model)).is_dir() else []
        inputs += [results, cache_dir]
        check_output(output_dir, COMMAND, inputs=inputs)
    if results is not None:
        # Before the one forward pass: a --results that cannot hold a store is one line.
        check_results(results, inputs=[b.location for b in benchmarks if getattr(b, "location", None)
                                       and Path(b.location).exists()])
    texts = sorted({t for bench in benchmarks for split in bench.splits for t in split.texts})
    name = display_name(model)
    names = {k: f"{name}-layer{k}" for k in chosen}  # what the grid calls {"spec": model, "layer": k}

    with tempfile.TemporaryDirectory(prefix="tecb-layers-") as scratch:
        root = Path(cache_dir) if cache_dir is not None else Path(scratch)
        started = time.perf_counter()
        encoded = encode_layers_once(encoder, texts, chosen, root, progress=progress)
        encode_seconds = time.perf_counter() - started
        if encoded:
            say(f"{name}: encoded {encoded:,} unique texts once for {len(chosen)} layers in {encode_seconds:.1f} s")
        # The grid reads every vector from the cache; each layer's encoder shares the loaded model.
        models = [{"spec": encoder.at_layer(k), "name": names[k]} for k in chosen]
        started = time.perf_counter()
        splits = run_grid(benchmarks, models, configurations=[CONFIGURATION], protocol="legacy", seed=seed,
                          cache_dir=root, results=results, profile=profile, progress=progress, log=say)
        cluster_seconds = time.perf_counter() - started
    layer_of = {names[k]: k for k in chosen}
    identity_of = {k: encoder.layer_identity(k) for k in chosen}
    table = _summarise(splits, layer_of, identity_of)
    splits = splits.assign(layer=splits["model"].map(layer_of))
    split_columns = ["dataset", "layer", "split", *METRICS, "n_samples", "n_labels", "model", "model_identity"]
    splits = splits[split_columns].sort_values(["dataset", "layer", "split"]).reset_index(drop=True)

    if output_dir is not None:
        from tecb_data.demo import is_demo_manifest
        from tecb_eval.reports.tables import DEMO_NOTE, DEMO_TITLE

        synthetic = any(is_demo_manifest(getattr(b, "manifest", None)) for b in benchmarks)
        _write_output(output_dir, inputs, table, splits, name=name, seed=seed, n_layers=n_layers,
                      demo_note=DEMO_NOTE if synthetic else None, demo_title=DEMO_TITLE if synthetic else None)
    result = splits if per_split else table
    result.attrs.update(encoded_texts=encoded, encode_seconds=encode_seconds, cluster_seconds=cluster_seconds,
                        n_layers=n_layers, model=name)
    return result
