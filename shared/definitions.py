"""Load channel definitions from YAML into the model, reporting every problem with its place.

A file holds ``sources:`` and ``channels:``. Errors read
``file:line: channels[0].pipelines[1].parallelism: expected a positive integer, got "five"``.
``known_sources`` lets a file refer to sources already stored by an earlier apply (given
with their types, a pair into a stored lake is checked as one into a lake of the file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from shared import confinement, identifiers, retl, yamlreader
from shared.confinement import Confinement
from shared.errors import ConfigError
from shared.model import (
    TWO_WAY_COPY,
    BinlogPosition,
    Channel,
    DataMedia,
    Definitions,
    MediaPair,
    Pipeline,
    PipelineParams,
    StartupMode,
)
from shared.pairchecks import lake_pair_problems, pairs_problems, two_way_pair_problems
from shared.pairs import read_pair_options
from shared.patterns import NamePattern, PatternKind
from shared.sourcedefs import SourceFields, name_problem
from shared.yamlreader import MISSING, Field, Issues, Mapping

DEFAULTS = PipelineParams()


def load_file(path: str | Path, known_sources: Iterable[str] = ()) -> Definitions:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return load_text(text, str(path), known_sources)


def load_text(text: str, file: str = "<definitions>",
              known_sources: Iterable[str] | dict[str, str] = (),
              rules: Confinement | None = None) -> Definitions:
    """Parse and validate; raise ConfigError listing every issue, or return the model.
    With ``rules`` (the manager's apply), every password reference and processor must be
    one this machine's configuration allows."""
    root, issues = yamlreader.parse(text, file)
    definitions = Definitions()
    if root is not None:
        top = Field(root, "", issues).mapping()
        if top is not None:
            with confinement.checking(rules):
                definitions = _Loader(issues, known_sources).definitions(top)
    elif not issues.items:
        issues.add(None, "", "the file is empty; expected 'sources:' and/or 'channels:'")
    issues.raise_if_any()
    return definitions



class _Loader(SourceFields):
    def __init__(self, issues: Issues, known_sources: Iterable[str] | dict[str, str]) -> None:
        self.issues = issues
        self.sources = set(known_sources)
        # a lake's or a subscription's name → its type (a stored one's, when known)
        self.targets_only: dict[str, str] = {
            name: kind for name, kind in known_sources.items()
            if kind in ("delta", "subscription")} if isinstance(known_sources, dict) else {}

    def definitions(self, top: Mapping) -> Definitions:
        sources = self._unique(top.field("sources"), self.source, "source")
        self.sources |= {source.name for source in sources}
        channels = self._unique(top.field("channels"), self.channel, "channel")
        top.field("status")  # what `setl channel show -o yaml` reports beside: not applied
        top.close()
        if not top.has("sources") and not top.has("channels"):
            self.issues.add(top.node, "", "nothing defined: expected 'sources:' and/or 'channels:'")
        return Definitions(tuple(sources), tuple(channels))

    def _unique(self, items: Field | None, read: Any, what: str) -> list[Any]:
        """Read every element of a list with ``read``; report duplicate names."""
        result, seen = [], set()
        for item in items.items() if items else ():
            value = read(item)
            if value is None:
                continue
            if value.name in seen:
                item.fail(f"duplicate {what} name {value.name!r}")
                continue
            seen.add(value.name)
            result.append(value)
        return result

    def _source_ref(self, item: Field) -> Any:
        name = item.string()
        if name is not MISSING and name not in self.sources:
            known = ", ".join(sorted(self.sources)) or "none defined"
            return item.fail(f"unknown source {name!r} (known: {known}); "
                             "define it under 'sources:'")
        return name

    def _read_ref(self, item: Field) -> Any:
        """A pipeline's source: a database (a lake or a subscription is only written)."""
        name = self._source_ref(item)
        kind = self.targets_only.get(name) if isinstance(name, str) else None
        if kind is not None:
            return item.fail(f"source {name!r} is a {'lake' if kind == 'delta' else kind}, "
                             "which a pipeline can only write (its target:); a pipeline "
                             "reads a MySQL or MariaDB source")
        return name

    def channel(self, item: Field) -> Channel | None:
        entry = item.mapping()
        if entry is None:
            return None
        name = entry.get("name", lambda f: f.string(name_problem), required=True)
        description = entry.get("description", lambda f: f.string(empty=True), "")
        pipelines_field = entry.field("pipelines", required=True)
        pipelines = self._unique(pipelines_field, self.pipeline, "pipeline")
        entry.close()
        count = len(pipelines_field.node.value) if pipelines_field and \
            pipelines_field.is_list() else None
        if count is not None and not 1 <= count <= 2:
            pipelines_field.fail(  # type: ignore[union-attr]
                f"{count} pipelines given; a channel has one pipeline (one-way) or two (two-way)")
        elif len(pipelines) == 2:
            first, second = pipelines
            if (first.source, first.target) != (second.target, second.source):
                pipelines_field.fail(  # type: ignore[union-attr]
                    "the two pipelines of a two-way channel must run in opposite directions "
                    f"(got {first.source}->{first.target} and {second.source}->{second.target})")
            elif any(p.params.startup is StartupMode.SNAPSHOT for p in pipelines):
                pipelines_field.fail(  # type: ignore[union-attr]
                    f"'start: snapshot' on a two-way channel: {TWO_WAY_COPY}")
            elif any(p.params.free_door_source for p in pipelines):
                pipelines_field.fail(  # type: ignore[union-attr]
                    f"free_door on a two-way channel: it takes no free-door request (rows "
                    f"read from the tables): {TWO_WAY_COPY}")
            for pipeline in pipelines:
                for problem in two_way_pair_problems(pipeline):
                    pipelines_field.fail(problem)  # type: ignore[union-attr]
        if name is MISSING or not pipelines:
            return None
        return Channel(name, tuple(pipelines), description,
                       json.dumps(yamlreader.plain(item.node), ensure_ascii=False))

    def pipeline(self, item: Field) -> Pipeline | None:
        entry = item.mapping()
        if entry is None:
            return None
        name = entry.get("name", lambda f: f.string(name_problem), required=True)
        source = entry.get("source", self._read_ref, required=True)
        target = entry.get("target", self._source_ref, required=True)
        nodes = tuple(entry.get("nodes", self._node_ids, ()))
        for old in ("select_nodes", "load_nodes"):  # Otter's; setl's stages share an owner
            entry.get(old, lambda f: f.fail(
                "setl has no separate Select and Load nodes: one node owns a pipeline and "
                "runs all its stages (Spark spreads Extract/Transform over its workers); "
                "list the nodes that may own it as nodes: [..]"))
        params = self.params(entry)
        if self.targets_only.get(target) == "subscription" and params is not None:
            if params.startup is StartupMode.SNAPSHOT:
                entry.field("start").fail(  # type: ignore[union-attr]
                    f"target {target} is a subscription, which carries the binlog's changes "
                    "only: nothing is copied into it; start it at latest, a position or a "
                    "GTID (its reader reads the tables itself if it needs their rows)")
            if params.dry_run:
                entry.field("dry_run").fail(  # type: ignore[union-attr]
                    f"target {target} is a subscription: its reader's acknowledgements are "
                    "its position, so a dry run would move it; leave dry_run out")
            if params.free_door_source:
                entry.field("free_door").fail(  # type: ignore[union-attr]
                    f"target {target} is a subscription, which carries the binlog's changes "
                    "only: it takes no free-door request (rows read from the tables); leave "
                    "free_door out")
        pairs_field = entry.field("pairs", required=True)
        read = []
        for pair_item in pairs_field.items() if pairs_field else ():
            pair = self.pair(pair_item, source, target)
            if pair is not None:
                read.append((pair_item, pair))
        entry.close()
        if pairs_field is not None and pairs_field.is_list() and not pairs_field.node.value:
            pairs_field.fail("a pipeline needs at least one pair (source table → target table)")
        self._check_pairs(read)
        pairs = [pair for _, pair in read]
        if MISSING in (name, source, target) or not pairs:
            return None
        return Pipeline(name, source, target, tuple(pairs), nodes, params)

    def _node_ids(self, item: Field) -> Any:
        ids = [child.integer(1) for child in item.items()]
        return MISSING if MISSING in ids else ids

    def params(self, entry: Mapping) -> PipelineParams:
        readers = {
            "parallelism": lambda f: f.integer(1, 64),
            "batch_size": lambda f: f.integer(1),
            "batch_timeout_ms": lambda f: f.integer(1),
            "load_batch_size": lambda f: f.integer(1),
            "load_data_min_rows": lambda f: f.integer(0),
            "snapshot_chunk_size": lambda f: f.integer(1, 10_000_000),
            "snapshot_parallelism": lambda f: f.integer(1, 64),
            "snapshot_skip_binlog": Field.boolean,
            "lake_compact_every": lambda f: f.integer(0),
            "lake_retain_hours": lambda f: f.integer(0),
            "ddl_sync": Field.boolean,
            "skip_load_exception": Field.boolean,
            "fire_target_triggers": Field.boolean,
            "write_non_transactional": Field.boolean,
            "dry_run": Field.boolean,
            "max_retries": lambda f: f.integer(0),
        }
        params = replace(DEFAULTS, **{key: entry.get(key, read, getattr(DEFAULTS, key))
                                      for key, read in readers.items()})
        free_door = entry.field("free_door")
        if free_door:
            params = self._free_door(free_door, params)
        start = entry.field("start")
        return self._start(start, params) if start else params

    def _free_door(self, item: Field, params: PipelineParams) -> PipelineParams:
        entry = item.mapping()
        if entry is None:
            return params
        source = entry.get("source", self._source_ref, "")
        size = entry.get("slice", lambda f: f.integer(1, 1_000_000), params.free_door_slice)
        entry.close()
        if source is MISSING or size is MISSING:
            return params
        return replace(params, free_door_source=source, free_door_slice=size)

    def _start(self, item: Field, params: PipelineParams) -> PipelineParams:
        if not item.is_mapping():
            if item.choice(["latest", "snapshot"]) == "snapshot":
                return replace(params, startup=StartupMode.SNAPSHOT)
            return params
        entry = item.mapping()
        assert entry is not None
        file = entry.get("file", Field.string, "")
        pos = entry.get("pos", lambda f: f.integer(4), 4)
        gtid = entry.get("gtid", Field.string, "")
        entry.close()
        if gtid and (file or entry.has("pos")):
            item.fail("give either file/pos or gtid, not both")
        elif gtid:
            return replace(params, startup=StartupMode.GTID,
                           start_position=BinlogPosition(gtid=gtid))
        elif file:
            return replace(params, startup=StartupMode.POSITION,
                           start_position=BinlogPosition(file, pos))
        else:
            item.fail("expected 'latest', {file: ..., pos: ...} or {gtid: ...}")
        return params

    def media(self, item: Field, default_source: Any) -> DataMedia | None:
        """A media written as ``schema.table`` or ``{datasource, namespace, table}``."""
        if item.is_mapping():
            entry = item.mapping()
            assert entry is not None
            datasource = entry.get("datasource", self._source_ref, default_source)
            namespace = entry.get("namespace", self._pattern, required=True)
            table = entry.get("table", self._pattern, required=True)
            entry.close()
        else:
            text = item.string()
            if text is MISSING:
                return None
            try:
                parts = identifiers.split_qualified(text)
            except ConfigError as exc:
                item.fail(exc.issues[0].message)
                return None
            if any(part.startswith("re:") for part in parts):
                item.fail(f"expected schema.table, got \"{text}\" (for a regular expression "
                          "write {namespace: ..., table: 're:...'})")
                return None
            datasource = default_source
            namespace, table = (self._pattern(item, part) for part in parts)
        if MISSING in (datasource, namespace, table):
            return None
        return DataMedia(datasource, namespace, table)

    def _pattern(self, item: Field, text: Any = MISSING) -> Any:
        text = item.string() if text is MISSING else text
        if text is MISSING:
            return MISSING
        try:
            return NamePattern.parse(text)
        except ConfigError as exc:
            return item.fail(exc.issues[0].message)

    def pair(self, item: Field, source: Any, target: Any) -> MediaPair | None:
        entry = item.mapping()
        if entry is None:
            return None
        source_media = self._media_at(entry, "source", source)
        target_media = self._media_at(entry, "target", target)
        options = read_pair_options(entry)
        entry.close()
        if source_media is None or target_media is None or options is None:
            return None
        pair = MediaPair(source_media, target_media, **options)
        problem = _pair_problem(pair)
        if problem:
            item.fail(problem)
            return None
        if self.targets_only.get(target_media.datasource) == "delta":
            for key, problem in lake_pair_problems(pair, target_media.datasource):
                entry.field(key).fail(problem)  # type: ignore[union-attr]
        return pair

    def _media_at(self, entry: Mapping, key: str, default_source: Any) -> DataMedia | None:
        found = entry.field(key, required=True)
        return self.media(found, default_source) if found else None

    @staticmethod
    def _check_pairs(pairs: list[tuple[Field, MediaPair]]) -> None:
        names = [item.path.rpartition(".")[2] for item, _ in pairs]
        for at, problem in pairs_problems([pair for _, pair in pairs], names):
            pairs[at][0].fail(problem)


def _pair_problem(pair: MediaPair) -> str | None:
    """What makes a pair impossible to run, or None."""
    source, target = pair.source, pair.target
    if PatternKind.WILDCARD in (target.namespace.kind, target.table.kind):
        return ("a target name cannot be a regular expression; name the table, a numbered "
                "family or a template of the source's names such as {schema} and ods_{table}")
    if PatternKind.TEMPLATE in (source.namespace.kind, source.table.kind):
        return ("a source name cannot be a template: {schema} and {table} stand for the "
                "source's names in target names")
    if retl.SCHEMA in (source.namespace.literal, target.namespace.literal):
        return (f"{retl.SCHEMA} is setl's own schema (positions, the free door, loop marks): "
                "no pair copies it or into it; name the databases to copy")
    if (source.datasource, source.namespace.literal, source.table.literal) == \
            (target.datasource, target.namespace.literal, target.table.literal):
        return f"the pair would copy {source} onto itself"
    if pair.shard is None:
        for part in ("namespace", "table"):
            src, dst = getattr(source, part), getattr(target, part)
            if dst.kind is PatternKind.MULTI and src.size != dst.size:
                return (f"target {part} {dst} has {dst.size} names but source {src} has "
                        f"{src.size or 'any number of'}; give a shard rule or matching ranges")
    elif target.namespace.kind is not PatternKind.MULTI and target.table.kind is not \
            PatternKind.MULTI:
        return "a shard rule needs a numbered target, e.g. shop_[0-1].orders_[0-3]"
    return None

