"""The installed package's version, as ``setl``, ``setl-manager`` and ``setl-node`` print it."""

from __future__ import annotations

import importlib.metadata


def version() -> str:
    try:
        return importlib.metadata.version("setl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"
