"""Write the configuration and CLI references (docs/reference/) from the code itself.

The keys, their kinds (text, an integer from 1 to 64, one of …), whether they are required and
their defaults come from the readers (``shared.definitions``, ``shared.settings``) observed
while they read the example files; what each key means comes from ``scripts/reference.yaml``.
The CLI reference is each command's own ``--help``.

    .venv/bin/python scripts/reference.py          # write docs/reference/*.md
    .venv/bin/python scripts/reference.py --check  # exit 1 when they are not current

A key the readers know but ``reference.yaml`` does not describe (or the other way round), or a
key no example file holds (its kind unknown), stops the generator with what to add where.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["COLUMNS"] = "100"  # argparse wraps --help to the terminal: the same on every machine

from manager import cli as admin  # noqa: E402
from manager import daemon as manager_daemon  # noqa: E402
from node import daemon as node_daemon  # noqa: E402
from shared import definitions, settings, yamlreader  # noqa: E402
from shared.errors import ConfigError  # noqa: E402

OUT = ROOT / "docs" / "reference"
TEXTS = ROOT / "scripts" / "reference.yaml"
CHANNELS = sorted((ROOT / "conf" / "channels").glob("*.yaml"))
MANAGER = [ROOT / "conf" / "manager.yaml", ROOT / "conf" / "examples" / "manager-full.yaml"]
NODE = [ROOT / "conf" / "node.yaml", ROOT / "conf" / "examples" / "node-full.yaml"]
# what an example may fail on when read here: files it names need not be on this machine
TOLERATED = ("no such file", "no such directory")


class Stale(Exception):
    """What to add where before the references can be written."""


@dataclasses.dataclass
class Document:
    """One kind of file the reference describes, read by its own reader."""

    name: str  # the section of reference.yaml and the page's title
    title: str
    intro: str
    examples: list[Path]
    read: Callable[[Path], object]


DOCUMENTS = [
    Document("definitions", "Definitions (`setl apply -f FILE`)",
             "A definitions file holds `sources:` and `channels:`; `setl apply` checks it "
             "whole (file, line and key of every problem) and stores it in ZooKeeper. "
             "[conf/channels/example-full.yaml](../../conf/channels/example-full.yaml) shows "
             "every key; [configuration.md](../configuration.md) explains how they fit.",
             CHANNELS, definitions.load_file),
    Document("manager", "The manager's configuration (`setl-manager --config FILE`)",
             "Every key is optional; [conf/manager.yaml](../../conf/manager.yaml) is the "
             "demo's, [conf/examples/manager-full.yaml](../../conf/examples/manager-full.yaml) "
             "shows every key.", MANAGER, settings.load_manager),
    Document("node", "The node's configuration (`setl-node --id N --config FILE`)",
             "Every key is optional; [conf/node.yaml](../../conf/node.yaml) is the demo's, "
             "[conf/examples/node-full.yaml](../../conf/examples/node-full.yaml) shows every "
             "key.", NODE, settings.load_node),
]


def observe(document: Document) -> dict[str, dict[str, Any]]:
    """Every key the reader asks for in the document's examples, as the observer saw it."""
    with yamlreader.observed() as observer:
        for example in document.examples:
            try:
                document.read(example)
            except ConfigError as exc:
                wrong = [issue for issue in exc.issues
                         if not any(text in issue.message for text in TOLERATED)]
                if wrong:
                    raise Stale(f"{example.relative_to(ROOT)} does not read cleanly: "
                                + "; ".join(map(str, wrong))) from None
    return observer.keys


def texts() -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load(TEXTS.read_text())
    return {name: section or {} for name, section in loaded.items()}


def rows(document: Document, keys: dict[str, dict[str, Any]], described: dict[str, Any],
         common: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """(key, kind, default, meaning) of each key in reading order; raises Stale for what is
    not described, described but not read, or not in any example."""
    problems = []
    unknown = sorted(set(described) - set(keys))
    described = {**common, **described}
    if unknown:
        problems.append(f"{TEXTS.name} [{document.name}] describes keys the reader does not "
                        f"know: {', '.join(unknown)}; remove them")
    free = tuple(f"{path}." for path, text in described.items()  # keys a user names
                 if isinstance(text, dict) and text.get("free"))
    for path, seen in keys.items():
        if path.startswith(free):
            continue
        text = described.get(path)
        if text is None:
            problems.append(f"{TEXTS.name} [{document.name}] has no text for {path}: add one")
            continue
        entry = text if isinstance(text, dict) else {"text": text}
        kind = entry.get("kind") or _kind(seen)
        if not kind:
            examples = ", ".join(str(example.relative_to(ROOT)) for example in document.examples)
            problems.append(f"{path} is in no example ({examples}): add it")
            continue
        default = entry.get("default") or ("required" if seen["required"] else " or ".join(
            _value(value) for value in seen["defaults"]) or "—")
        yield path, kind, default, " ".join(str(entry["text"]).split())
    if problems:
        raise Stale("\n".join(problems))


def _kind(seen: dict[str, Any]) -> str:
    kinds = [kind for kind in seen["kinds"] if kind != "a list"]
    if "a list" in seen["kinds"]:
        plural = {"a mapping": "mappings", "a list": "lists"}
        items = " or ".join(plural.get(kind, kind) for kind in seen["items"])
        kinds.append(f"a list of {items}" if items else "a list")
    return "; or ".join(kinds)


def _value(value: object) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or value == () or value == "":
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Path):
        raise Stale(f"a default path ({value}) depends on the machine: give its 'default' "
                    f"text in {TEXTS.name}")
    if dataclasses.is_dataclass(value) or isinstance(value, tuple | list | dict):
        raise Stale(f"a default ({value!r}) has no plain spelling: give its 'default' text in "
                    f"{TEXTS.name}")
    return f"`{value}`"


def configuration_page(document: Document, described: dict[str, Any],
                       common: dict[str, Any]) -> str:
    lines = [f"# {document.title}", "", GENERATED, "", document.intro, ""]
    groups: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in rows(document, observe(document), described, common):
        parent, _, _ = row[0].rpartition(".")
        groups.setdefault(parent, []).append(row)
    for parent, members in groups.items():
        lines += [f"## `{parent}`" if parent else "## Top level", "",
                  "| key | value | default | what it does |", "|---|---|---|---|"]
        lines += [f"| `{path.rpartition('.')[2]}` | {_cell(kind)} | {_cell(default)} | "
                  f"{_cell(text)} |" for path, kind, default, text in members]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def cli_page() -> str:
    lines = ["# CLI reference", "", GENERATED, "",
             "Each command's `--help`; the options of `setl` itself (`--manager`, `-o`, …) go "
             "before or after any command and are shown once, under `setl`. How the commands "
             "fit together: [cli.md](../cli.md).", ""]
    top = admin._parser()
    shared = {action.dest for action in top._actions} - {"help", "command"}
    for parser in (top, manager_daemon.parser(), node_daemon.parser()):
        for name, command in _commands(parser):
            hidden = shared if command is not top and parser is top else set()
            lines += [f"## `{name}`", "", "```text", _help(command, hidden).rstrip(), "```", ""]
    return "\n".join(lines)


def _help(parser: argparse.ArgumentParser, hidden: set[str]) -> str:
    """``parser.format_help()`` without the actions named in ``hidden``."""
    shown = [action for action in parser._actions if action.dest not in hidden]
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, shown, parser._mutually_exclusive_groups)
    formatter.add_text(parser.description)
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if action in shown]
        if actions:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(actions)
            formatter.end_section()
    formatter.add_text(parser.epilog)
    return formatter.format_help()


def _commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The parser and every subcommand's, depth first, each once."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for sub in action.choices.values():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _commands(sub)


GENERATED = ("<!-- Generated by scripts/reference.py from the code; do not edit: change the "
             "code or scripts/reference.yaml and run it again. -->")


def pages() -> dict[Path, str]:
    described = texts()
    common = described.get("common", {})
    found = {OUT / f"{document.name}.md": configuration_page(
        document, described.get(document.name, {}),
        common if document.name != "definitions" else {}) for document in DOCUMENTS}
    found[OUT / "cli.md"] = cli_page()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only say whether docs/reference/ is current (exit 1 if not)")
    args = parser.parse_args(argv)
    try:
        wanted = pages()
    except Stale as exc:
        print(f"reference: {exc}", file=sys.stderr)
        return 1
    stale = [path for path, text in wanted.items()
             if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not current: run "
                  "'.venv/bin/python scripts/reference.py' and commit it", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(exist_ok=True)
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
