"""A batch's Extract/Transform errors as setl's, whether it ran on Spark or in the node.

A failed Spark job reaches the driver as a py4j error whose text holds the worker's Python
traceback: :func:`translate` finds its last line and gives one :class:`SetlError`, of the
worker's class when it is setl's own (a ConfigError pauses the pipeline at once, a passing
failure is retried). :func:`in_process` runs the same work in the node with its errors said
the same way, so a batch's failure reads alike wherever it ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from node.extract.etl import CompiledPipeline
from shared import errors
from shared.errors import SetlError, with_context


def in_process(compiled: CompiledPipeline, run: Callable[[], list[Any]],
               what: str = "extract/transform") -> list[Any]:
    """Extract/Transform in the node (the same function a Spark task runs), with its errors
    as a Spark job's would be: setl's own keep their class, others say their Python type."""
    prefix = f"pipeline {compiled.pipeline_id}: {what} failed: "
    try:
        return run()
    except SetlError as exc:
        raise with_context(type(exc), prefix + str(exc)) from None
    except Exception as exc:
        raise SetlError(f"{prefix}{type(exc).__name__}: {exc}") from exc


def translate(exc: Exception, compiled: CompiledPipeline,
              what: str = "extract/transform") -> SetlError:
    """A failed Spark job as one SetlError carrying the Python error from the worker; an
    error of setl's own hierarchy keeps its class (a ConfigError pauses at once, a passing
    failure is retried)."""
    return translate_for(exc, f"pipeline {compiled.pipeline_id}: {what}")


def translate_for(exc: Exception, where: str) -> SetlError:
    text = str(exc)
    prefix = f"{where} failed: "
    for line in reversed(text.splitlines()):
        found = _WORKER_ERROR.match(line.strip())
        if found is None:
            continue
        kind, message = found["kind"], found["message"]
        cls = getattr(errors, kind.rpartition(".")[2], None) \
            if kind.startswith("shared.errors.") else None
        if isinstance(cls, type) and issubclass(cls, SetlError):
            return with_context(cls, prefix + message)
        return SetlError(prefix + line.strip())
    return SetlError(prefix + (text.splitlines()[0] if text else type(exc).__name__))


# the last line of a Python traceback: "module.Class: message" (builtins without a module)
_WORKER_ERROR = re.compile(r"(?P<kind>(?:shared\.|node\.)[\w.]+|[A-Z]\w*(?:Error|Exception))"
                           r": (?P<message>.*)")
