"""The stream path's hot modules compiled with Cython, with their pure-Python twins kept.

``make setup`` compiles :data:`MODULES` in place (``scripts/compile.py``): each module's
extension (``binlog.cpython-311-….so``) sits beside its ``.py``, and Python imports the
extension first. The source stays the one truth — the extension is the same file compiled,
no ``.pyx`` to keep in step; where a ``.pxd`` sits beside a module (Select's packet reader
and framing loop) it types named values in the compiled build only — and the build writes
``node/compiled.json``: each module's source hash (``.py`` and ``.pxd``) at the time it
was compiled.

This module, imported by ``node/__init__.py`` before any of them, makes a module load from
its ``.py`` instead when

- ``SETL_PURE_PYTHON=1`` is set (every module: how the test suite runs the pure path), or
- its source changed since it was compiled (the extension is stale: never run code that is
  not the source's; ``make setup`` compiles it again), or
- it was not compiled (no gcc, no Cython: nothing is lost but speed).

The Spark workers import ``node`` too, so they choose the same way (the environment is
theirs as well).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PURE_ENV = "SETL_PURE_PYTHON"
ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path(__file__).with_name("compiled.json")
# where a catch-up's CPU goes (bench.peers --profile): framing, decoding to row changes,
# Extract/Transform, the merge, and rendering the target's rows
MODULES = (
    "node.changes",
    "node.merge",
    "node.select.binlog",
    "node.select.framing",
    "node.select.packets",
    "node.select.selector",
    "node.extract.job",
    "node.extract.parts",
    "node.extract.etl",
    "node.extract.mapping",
    "node.extract.pairs",
    "node.target.mysql.loaddata",
    "node.extract.insertlines",
)


def source_of(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest(module: str) -> str:
    """The hash of what a module is compiled from: its ``.py``, and the ``.pxd`` of C types
    beside it where there is one."""
    source = source_of(module)
    types = source.with_suffix(".pxd")
    return hashlib.sha256(source.read_bytes() + (
        b"\0" + types.read_bytes() if types.exists() else b"")).hexdigest()


def pure_requested() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def built() -> dict[str, str]:
    """module → its source's hash when it was compiled (empty without a build)."""
    try:
        found = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def extension_of(module: str) -> Path | None:
    source = source_of(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        found = source.with_name(source.stem + suffix)
        if found.exists():
            return found
    return None


def status() -> dict[str, str]:
    """Per module: "compiled", or "pure" with why."""
    hashes, pure = built(), pure_requested()
    found = {}
    for module in MODULES:
        if pure:
            found[module] = f"pure ({PURE_ENV} is set)"
        elif extension_of(module) is None or module not in hashes:
            found[module] = "pure (not compiled: make setup compiles it)"
        elif hashes[module] != digest(module):
            found[module] = "pure (its source changed since it was compiled: make setup)"
        else:
            found[module] = "compiled"
    return found


class _Source(importlib.abc.MetaPathFinder):
    """Finds the modules that must not come from their extension: their ``.py``."""

    def __init__(self, modules: frozenset[str]) -> None:
        self.modules = modules

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def install() -> None:
    """Make the modules that are not "compiled" (:func:`status`) load from source."""
    if any(isinstance(finder, _Source) for finder in sys.meta_path):
        return
    pure = frozenset(module for module, state in status().items() if state != "compiled"
                     and extension_of(module) is not None)
    if pure:
        sys.meta_path.insert(0, _Source(pure))
