"""node/compiled.py: which of the stream path's modules run compiled, and the pure-Python twin
taken whenever the extension is not the source's (the twins' equal output is tested on the
schemas corpus: tests/integration/test_compiled.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from node import compiled
from tests.devcluster import ROOT


def loaded_from(pure: str, modules: tuple[str, ...] = compiled.MODULES) -> list[str]:
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    print(importlib.import_module(name).__file__)")
    done = subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT, check=True,
                          env={**os.environ, compiled.PURE_ENV: pure}, capture_output=True,
                          text=True)
    return done.stdout.split()


def test_make_setup_compiled_every_module_and_it_is_what_runs() -> None:
    assert compiled.status() == dict.fromkeys(compiled.MODULES, "compiled") or \
        compiled.pure_requested()
    found = loaded_from("0")
    assert all(path.endswith(".so") for path in found), found
    assert set(compiled.built()) == set(compiled.MODULES)


def test_the_pure_twins_run_when_asked() -> None:
    found = loaded_from("1")
    assert [path.removeprefix(str(ROOT) + "/") for path in found] == \
        [module.replace(".", "/") + ".py" for module in compiled.MODULES]


def test_an_extension_whose_source_changed_is_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = dict(compiled.built(), **{"node.merge": "0" * 64})
    monkeypatch.setattr(compiled, "built", lambda: stale)
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    state = compiled.status()
    assert state["node.merge"].startswith("pure (its source changed")
    assert state["node.changes"] == "compiled"
    monkeypatch.setattr(compiled, "built", lambda: {})
    assert compiled.status()["node.merge"].startswith("pure (not compiled")
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    assert set(compiled.status().values()) == {f"pure ({compiled.PURE_ENV} is set)"}


def test_a_stale_extension_loads_its_source() -> None:
    """The record says another source of node.merge was compiled: its .py runs, the others'
    extensions stay (the finder installed before ``node`` is imported, as node/__init__
    does; the record itself is left alone: other tests run beside this one)."""
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('early', 'node/compiled.py')\n"
            "early = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(early)\n"
            "record = early.built()\n"
            "early.built = lambda: dict(record, **{'node.merge': '0' * 64})\n"
            "early.install()\n"
            "import node.merge, node.changes\n"
            "print(node.merge.__file__, node.changes.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, text=True,
                          env={**os.environ, compiled.PURE_ENV: "0"}, capture_output=True)
    merge, changes = done.stdout.split()
    assert merge.endswith("node/merge.py") and changes.endswith(".so")


def test_a_modules_c_types_are_part_of_what_it_was_compiled_from() -> None:
    """The ``.pxd`` beside a module types its compiled build: a change to it makes the
    extension stale as a change to the ``.py`` does."""
    import hashlib

    typed = [m for m in compiled.MODULES if compiled.source_of(m).with_suffix(".pxd").exists()]
    assert {"node.select.packets", "node.select.framing"} <= set(typed)
    for module in typed:
        source = compiled.source_of(module)
        assert compiled.digest(module) == hashlib.sha256(
            source.read_bytes() + b"\0" + source.with_suffix(".pxd").read_bytes()).hexdigest()
