"""Running a sentence-transformers model's transformer on ONNX Runtime.

sentence-transformers' own ``backend="onnx"`` exports through Optimum, whose ONNX exporter
(``optimum-onnx`` 0.1.0, its only release) requires transformers < 4.58; with transformers 5 it
cannot be imported. When it cannot, tecb exports the transformer itself with torch's ONNX exporter
(``torch.onnx.export(dynamo=True)``, which needs ``onnxscript``) and runs it in an ONNX Runtime
session that takes the place of the model's transformer: tokenisation, prompts, batching, pooling
and normalisation stay sentence-transformers' own modules, so only the transformer's arithmetic
changes (bench/bench_backend.py measures by how much).

The export is written to a temporary folder per loaded model (tens of seconds for MiniLM on a
2-core machine) and removed with the process.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import shutil
import tempfile
from pathlib import Path

from tecb_data.errors import UserError

ORT_PACKAGES = ("onnxruntime", "onnxscript", "onnx")


def missing_packages() -> list[str]:
    import importlib.util

    return [name for name in ORT_PACKAGES if importlib.util.find_spec(name) is None]


def optimum_onnx_usable() -> bool:
    """Whether sentence-transformers' own ONNX backend (Optimum) can be imported here."""
    import importlib

    try:
        importlib.import_module("optimum.onnxruntime")
    except Exception:  # not installed, or built for another transformers
        return False
    return True


def check_onnx(model: str) -> str:
    """How ``backend=onnx`` will run: ``"optimum"`` (sentence-transformers' own backend) or
    ``"torch-export"`` (ours); one line if neither can run here."""
    if optimum_onnx_usable():
        return "optimum"
    missing = missing_packages()
    if missing:
        raise UserError(f"model {model}: backend=onnx needs {', '.join(missing)} (or sentence-transformers' Optimum "
                        "backend, which cannot be imported here): pip install onnxruntime onnxscript")
    return "torch-export"


@contextlib.contextmanager
def _working_directory(folder: Path):
    """``contextlib.chdir`` (Python 3.11) for the 3.10 that pyproject allows."""
    import os

    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _ort_transformer(session, input_names, config, model_path: Path):
    """An ONNX Runtime session in the place of a transformers model (a torch module without
    weights): ``forward(**features)`` -> ``{"last_hidden_state": tensor}``, as
    sentence-transformers' Transformer module reads it."""
    import torch

    class OrtTransformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.session = session
            self.input_names = list(input_names)
            self.config = config  # sentence-transformers reads the model type and limits from it
            self.model_path = model_path  # the ONNX file the session runs (int8 or float)

        def forward(self, **features):
            inputs = {name: features[name].detach().cpu().numpy() for name in self.input_names}
            (hidden,) = self.session.run(["last_hidden_state"], inputs)
            return {"last_hidden_state": torch.from_numpy(hidden)}

    return OrtTransformer()


def quantized(path: Path) -> Path:
    """The export with its MatMul weights quantized to int8 per output channel, activations
    quantized per batch as they come (ONNX Runtime's ``quantize_dynamic``): the backend that is
    faster than float torch at nearly the same V-measure (docs/benchmarks.md, "Encoding backends").
    Activation scales are computed over each batch, so a text's vector depends a little on the texts
    batched with it, as with any dynamic int8."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = path.with_name("model.int8.onnx")
    # ONNX Runtime advises its pre-processing on the root logger; that pre-processing cannot read
    # the dynamo export's external weights file, and the quantization needs none of it.
    advice = logging.Filter()
    advice.filter = lambda record: "pre-processing before quantization" not in record.getMessage()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        quantize_dynamic(str(path), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    finally:
        root.removeFilter(advice)
    return out


def to_onnx_runtime(st_model, *, threads: int | None = None, quantize: bool = False) -> None:
    """Export ``st_model``'s first module (a Transformer) with torch's ONNX exporter and run it in
    an ONNX Runtime session from now on (CPU); ``quantize``: its int8 quantization (:func:`quantized`)."""
    import onnxruntime as ort
    import torch

    module = st_model[0]
    transformer = getattr(module, "model", None) or getattr(module, "auto_model", None)
    if transformer is None or not hasattr(module, "tokenize"):
        raise UserError(f"backend=onnx: the model's first module ({type(module).__name__}) is not a transformer")
    transformer = transformer.eval().float()
    tokenize = getattr(module, "preprocess", None) or module.tokenize
    sample = tokenize(["ein Beispiel", "ein etwas längeres Beispiel mit mehr Wörtern"])
    import inspect

    accepted = set(inspect.signature(transformer.forward).parameters)
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample and k in accepted]

    class Exported(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(names, tensors)), return_dict=True).last_hidden_state

    folder = Path(tempfile.mkdtemp(prefix="tecb-onnx-")).resolve()
    atexit.register(shutil.rmtree, folder, True)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", max=int(st_model.max_seq_length or 512))
    # torch's exporter prints its progress on stdout, where `tecb-eval` prints its tables.
    # ONNX Runtime's symbolic shape inference (run by the int8 quantization) saves a
    # `sym_shape_infer_temp.onnx` and uuid-named `.data` weight files to a relative path, i.e. into
    # whatever folder the user ran us from; in the export's own temporary folder they go with it.
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), _working_directory(folder):
        torch.onnx.export(Exported(transformer), tuple(sample[k] for k in names), str(folder / "model.onnx"),
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_shapes=(tuple({0: batch, 1: seq} for _ in names),), dynamo=True, verbose=False)
        model = quantized(folder / "model.onnx") if quantize else folder / "model.onnx"
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    module.model = _ort_transformer(session, names, transformer.config, model)
    # sentence-transformers passes the model only the features its forward declares.
    module.model_forward_params = set(names)
