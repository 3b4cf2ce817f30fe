"""tecb_data: rebuild the German Text Embedding Clustering Benchmark datasets from their sources."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("tecb")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

from tecb_data.errors import UserError  # noqa: E402
from tecb_data.load import Benchmark, BenchmarkSplit, load  # noqa: E402

__all__ = ["Benchmark", "BenchmarkSplit", "UserError", "load", "__version__"]
