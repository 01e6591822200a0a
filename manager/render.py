"""How the CLI prints answers: aligned tables for people, JSON or YAML for scripts."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import yaml
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from shared.rpc import manager_pb2, model_pb2


def as_data(message: Message) -> dict[str, Any]:
    """The message as JSON/YAML data, spelled as the definitions are: numbers as numbers
    (protobuf's JSON writes 64-bit integers as strings), enum values by their name without
    the enum's prefix (``START``, not ``CHANNEL_STATUS_START``); fields at their default
    left out."""
    return {field.name: _field_data(field, value) for field, value in message.ListFields()}


def _field_data(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry = field.message_type.fields_by_name["value"]
        return {key: _one(entry, item) for key, item in value.items()}
    if field.is_repeated:
        return [_one(field, item) for item in value]
    return _one(field, value)


def _one(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return as_data(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        name = field.enum_type.values_by_number[value].name if \
            value in field.enum_type.values_by_number else str(value)
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", field.enum_type.name).upper() + "_"
        return name.removeprefix(prefix)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value


def structured(message: Message | dict[str, Any], fmt: str) -> str:
    data = as_data(message) if isinstance(message, Message) else message
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    return yaml.safe_dump(data, sort_keys=False).rstrip()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(header), *(len(row[i]) for row in cells)) if cells else len(header)
              for i, header in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]
    return "\n".join(lines)


def status_name(value: int) -> str:
    return model_pb2.ChannelStatus.Name(value).removeprefix("CHANNEL_STATUS_")


def position_text(position: model_pb2.BinlogPosition) -> str:
    if not position.file and not position.gtid:
        return "-"
    text = f"{position.file}:{position.pos}" if position.file else ""
    return f"{text} {position.gtid}".strip()


def positions(found: Sequence[manager_pb2.PipelinePositions]) -> str:
    """Per pipeline: the cursor, the source's end and how far behind, each target's row."""
    rows = []
    for pipeline in found:
        behind = f"{pipeline.behind_bytes} bytes" if pipeline.behind_bytes >= 0 else "?"
        rows.append((pipeline.pipeline_id, "cursor (ZooKeeper)",
                     position_text(pipeline.cursor), pipeline.process_id or "-",
                     f"source end {position_text(pipeline.source_end)}, {behind} behind"
                     if not pipeline.source_error else pipeline.source_error))
        for target in pipeline.targets:
            rows.append((pipeline.pipeline_id, f"target {target.target}",
                         position_text(target.position), target.process_id or "-",
                         target.error or f"owner epoch {target.owner_epoch}"))
    return table(["PIPELINE", "WHERE", "POSITION", "PROCESS_ID", "NOTE"], rows)


def channels(infos: Sequence[manager_pb2.ChannelInfo]) -> str:
    rows = [(info.channel.name, status_name(info.status), info.version,
             ", ".join(f"{p.name} ({p.source}->{p.target})" for p in info.channel.pipelines))
            for info in infos]
    return table(["CHANNEL", "STATUS", "VERSION", "PIPELINES"], rows) if rows else \
        "no channels; define one in YAML and run: setl apply -f FILE"


def pipelines(infos: Sequence[manager_pb2.ChannelInfo]) -> str:
    rows = []
    for info in infos:
        for state in info.pipelines:
            window = f"{state.window_used}/{state.window_size}" if state.window_size else "-"
            rows.append((state.pipeline_id, status_name(info.status), state.state or "-",
                         state.owner_node or "-", position_text(state.position),
                         state.delay_ms if state.owner_node else "-",
                         f"{state.rows_per_second:.0f}" if state.owner_node else "-", window,
                         state.last_error.splitlines()[0] if state.last_error else ""))
    headers = ["PIPELINE", "CHANNEL", "STATE", "OWNER", "POSITION", "DELAY_MS", "ROWS/S",
               "WINDOW", "LAST ERROR"]
    text = table(headers, rows) if rows else "no pipelines"
    switched = [(state.pipeline_id, state.source, state.switched) for info in infos
                for state in info.pipelines if state.switched]
    if switched:  # replica-set sources: the member read, and the last switch
        text += "\n\n" + table(["PIPELINE", "READS", "LAST SOURCE SWITCH"], switched)
    skipped = [(state.pipeline_id, f"{state.rows_skipped:,}") for info in infos
               for state in info.pipelines if state.rows_skipped]
    if skipped:  # skip_load_exception: rows the target refused, logged as event=row_skipped
        text += "\n\n" + table(["PIPELINE", "ROWS SKIPPED (see event=row_skipped in its "
                                 "node's log)"], skipped)
    reading = [(state.pipeline_id, state.subscriber or "-", state.unacked, state.delay_ms)
               for info in infos for state in info.pipelines
               if state.subscriber or state.unacked]
    if reading:  # change subscriptions: who reads them, and what waits for their acks
        text += "\n\n" + table(["SUBSCRIPTION", "READER", "UNACKED BATCHES", "DELAY_MS"],
                                reading)
    copying = [(state.pipeline_id, copy) for info in infos for state in info.pipelines
               for copy in _shown_copies(state.snapshots)]
    if copying:  # copies under way, and failed ones, table by table
        text += "\n\n" + table(
            ["PIPELINE", "COPY", "STATE", "CHUNKS", "ROWS", "ROWS/S", "ETA", "ERROR"],
            [(pid, c.table, c.state, f"{c.chunks_done}/{c.chunks}", f"{c.rows:,}",
              f"{c.rows_per_s:,.0f}" if c.state == "copying" else "-",
              _duration(c.eta_s) if c.eta_s else "-",
              c.error.splitlines()[0] if c.error else "") for pid, c in copying])
    return text


def _shown_copies(found: Sequence[manager_pb2.TableCopy]) -> list[manager_pb2.TableCopy]:
    """The copies status lists: those under way, and those that failed and whose table was
    not copied again since (``setl snapshot status`` lists them all)."""
    shown = []
    for index, copy in enumerate(found):
        later = {other.table for other in found[index + 1:]}
        if copy.state == "copying" or (copy.state == "failed" and copy.table not in later):
            shown.append(copy)
    return shown


def copies(pipeline_id: str, found: Sequence[manager_pb2.TableCopy], paused: bool) -> str:
    """A pipeline's table copies (setl snapshot status)."""
    if not found:
        return f"pipeline {pipeline_id}: no table copied yet" + (" (paused)" if paused else "")
    rows = [(c.table, c.state + (" (paused)" if paused and c.state == "copying" else ""),
             f"{c.chunks_done}/{c.chunks}", f"{c.rows:,}", f"{c.rows_estimated:,}",
             f"{c.rows_per_s:,.0f}" if c.state == "copying" else "-",
             _duration(c.eta_s) if c.state == "copying" and c.eta_s else "-",
             c.where or "", c.error.splitlines()[0] if c.error else "") for c in found]
    return f"pipeline {pipeline_id}\n" + table(
        ["TABLE", "STATE", "CHUNKS", "ROWS", "ESTIMATED", "ROWS/S", "ETA", "WHERE", "ERROR"],
        rows)


def copy_bar(active: Sequence[manager_pb2.TableCopy], width: int = 30) -> str:
    """One line of progress for the copies under way."""
    done = sum(c.chunks_done for c in active)
    total = sum(c.chunks for c in active) or 1
    filled = int(width * done / total)
    rate = sum(c.rows_per_s for c in active) / max(len(active), 1)
    eta = max((c.eta_s for c in active), default=0.0)
    return (f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} chunks, "
            f"{sum(c.rows for c in active):,} rows, {rate:,.0f} rows/s, ETA "
            f"{_duration(eta) if eta else '-'}   ")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def alarms(found: Sequence[manager_pb2.Alarm]) -> str:
    """Firing alarms, then the latest resolved (as the manager sends them)."""
    def when(ms: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"
    rows = [(a.state.upper(), a.rule, a.subject, when(a.since_ms), when(a.resolved_ms),
             a.message) for a in found]
    return table(["ALARM", "RULE", "SUBJECT", "SINCE", "RESOLVED", "MESSAGE"], rows)


def channel_document(info: manager_pb2.ChannelInfo) -> dict[str, Any]:
    """A channel as a definitions file (``channels:``, as its YAML said it: ``setl apply``
    takes it again) with what setl reports of it under ``status:`` (apply passes it over),
    as kubectl's ``get -o yaml`` does."""
    state = as_data(info)
    state.pop("channel", None)
    state["status"] = status_name(info.status)
    document: dict[str, Any] = {}
    if info.channel.definition:
        document["channels"] = [json.loads(info.channel.definition)]
    else:  # stored by a setl that did not keep it
        state["note"] = "the definition as written was not kept: apply it again to keep it"
    document["status"] = state
    return document


def channel_detail(info: manager_pb2.ChannelInfo) -> str:
    channel = info.channel
    lines = [f"channel:     {channel.name}", f"status:      {status_name(info.status)}",
             f"version:     {info.version}"]
    if channel.description:
        lines.append(f"description: {channel.description}")
    for pipeline, state in zip(channel.pipelines, info.pipelines, strict=False):
        params = pipeline.params
        lines += [
            f"pipeline {pipeline.name}: {pipeline.source} -> {pipeline.target}",
            f"  state: {state.state or '-'}   owner node: {state.owner_node or '-'}   "
            f"candidates: {', '.join(map(str, state.candidate_nodes)) or 'none alive'}",
            f"  position: {position_text(state.position)}   processId: {state.process_id}",
            f"  parallelism={params.parallelism} batch_size={params.batch_size} "
            f"batch_timeout_ms={params.batch_timeout_ms} ddl_sync={params.ddl_sync} "
            f"dry_run={params.dry_run}",
        ]
        if state.last_error:
            lines.append(f"  last error: {state.last_error}")
        for pair in pipeline.pairs:
            lines.append(f"  pair: {_media(pair.source)} -> {_media(pair.target)}"
                         f" (push_weight {pair.push_weight})")
    return "\n".join(lines)


def _media(media: model_pb2.DataMedia) -> str:
    return f"{media.datasource}:{media.namespace}.{media.table}"


def source_data(source: model_pb2.DataSource) -> dict[str, Any]:
    """A source as its definition spells it: a replica set by its hosts only (the member read
    now is in the ZooKeeper record, not the definition), so the output applies again."""
    data = as_data(source)
    if data.get("hosts"):
        data.pop("host", None)
        data.pop("port", None)
    return data


def sources(found: Sequence[model_pb2.DataSource]) -> str:
    """Sources with their password reference (never a value: only references are stored)."""
    rows = [(s.name, s.type or "mysql", s.location if s.type == "delta" else
             "setl subscribe" if s.type == "subscription" else
             f"{s.host}:{s.port}" + (f" (primary of {', '.join(s.hosts)})" if s.hosts else ""),
             s.user or "-", s.password or "-", s.charset or "-") for s in found]
    return table(["SOURCE", "TYPE", "ADDRESS", "USER", "PASSWORD REFERENCE", "CHARSET"], rows) \
        if rows else "no sources; define them under 'sources:' and run: setl apply -f FILE"


def nodes(infos: Sequence[manager_pb2.NodeInfo]) -> str:
    rows = [(n.id, n.address, n.host, n.pid, n.metrics_address or "-",
             ", ".join(n.candidate_pipelines) or "-", ", ".join(n.running_pipelines) or "-")
            for n in infos]
    return table(["NODE", "ADDRESS", "HOST", "PID", "METRICS", "CANDIDATE PIPELINES",
                  "RUNNING"], rows) \
        if rows else "no nodes registered; start one with: setl-node --id 1"
