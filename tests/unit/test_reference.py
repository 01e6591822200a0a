"""The configuration and CLI references in docs/reference/ are what the code reads and
parses today (scripts/reference.py writes them; CI fails when they are not current)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference"] = module
    spec.loader.exec_module(module)
    return module


def test_the_references_are_current(reference, capsys) -> None:
    assert reference.main(["--check"]) == 0, capsys.readouterr().err


def test_every_key_the_readers_know_is_described(reference) -> None:
    definitions = reference.DOCUMENTS[0]
    keys = reference.observe(definitions)
    assert "channels[].pipelines[].snapshot_chunk_size" in keys
    described = reference.texts()["definitions"]
    described.pop("sources[].charset")
    described["sources[].colour"] = "not a key"
    with pytest.raises(reference.Stale) as raised:
        list(reference.rows(definitions, keys, described, {}))
    assert "has no text for sources[].charset" in str(raised.value)
    assert "does not know: sources[].colour" in str(raised.value)


def test_kinds_and_defaults_are_the_readers_own(reference) -> None:
    page = (ROOT / "docs" / "reference" / "definitions.md").read_text()
    assert "| `parallelism` | an integer from 1 to 64 | `5` |" in page
    assert "| `algorithm` | one of modulo, quotient | `modulo` |" in page
    node = (ROOT / "docs" / "reference" / "node.md").read_text()
    assert "| `start` | one of boot, on_demand | `boot` |" in node
