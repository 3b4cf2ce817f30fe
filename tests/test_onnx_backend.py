"""The ONNX backend (``backend=onnx``, ``tecb_eval.models.backends``): a model is exported to ONNX
only when a text still needs encoding."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_onnx_does_not_export_again_when_every_text_is_cached(tiny_sentence_transformer, demo_datasets, tmp_path,
                                                              monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from tecb_eval.grid.run import run_grid
    from tecb_eval.models import backends

    data = demo_datasets / "tenkgnad-clustering-s2s"
    exports = []
    real = backends.to_onnx_runtime
    monkeypatch.setattr(backends, "to_onnx_runtime", lambda *a, **k: (exports.append(1), real(*a, **k))[1])
    model = {"spec": str(tiny_sentence_transformer), "backend": "onnx"}
    for _ in range(2):
        run_grid([data], [model], configurations=["minibatch_kmeans:none"], limit_splits=1, progress=False,
                 log=lambda m: None, cache_dir=tmp_path / "cache")
    assert len(exports) == 1
