"""Helpers for the definition loader tests: a channel skeleton with known line numbers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shared.definitions import load_text
from shared.errors import ConfigError
from shared.model import (
    Definitions,
)

CONF = Path(__file__).resolve().parents[2] / "conf" / "channels"

# Two sources on lines 2 and 3; the channel cases below start on line 4.
SOURCES = """\
sources:
  - {name: src, host: db1}
  - {name: dst, host: db2}
"""


def load(text: str, **kwargs: object) -> Definitions:
    return load_text(textwrap.dedent(text), "f.yaml", **kwargs)  # type: ignore[arg-type]


def errors(text: str, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(text, **kwargs)
    return str(caught.value).splitlines()


def channel(pipeline_lines: str, pairs: str = "          - {source: s.t, target: s2.t}\n") -> str:
    """SOURCES plus one channel with one pipeline src → dst.

    Line numbers: 4 channels, 5 - name: c, 6 pipelines, 7 - name: p, 8 source, 9 target,
    then ``pipeline_lines``, then ``pairs:`` and ``pairs``.
    """
    return (SOURCES + "channels:\n  - name: c\n    pipelines:\n      - name: p\n"
            "        source: src\n        target: dst\n" + pipeline_lines
            + "        pairs:\n" + pairs)


def pairs(text: str) -> str:
    """SOURCES plus a pipeline whose pairs are ``text``; the first pair is on line 11."""
    return channel("", textwrap.indent(textwrap.dedent(text), " " * 10))


P = "channels[0].pipelines[0]"  # the pipeline of ``channel()``
