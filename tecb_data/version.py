"""The installed package's version, named in every manifest, card and Hub commit. A module of its
own so that the build and the Hub push can read it without importing the package's face."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("tecb")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
