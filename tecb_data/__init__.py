"""tecb_data: rebuild the German Text Embedding Clustering Benchmark datasets from their sources."""

from tecb_data.errors import UserError
from tecb_data.load import Benchmark, BenchmarkSplit, load
from tecb_data.version import __version__

__all__ = ["Benchmark", "BenchmarkSplit", "UserError", "load", "__version__"]
