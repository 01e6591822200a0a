from shared.rpc import model_pb2 as _model_pb2
from shared.rpc import subscription_pb2 as _subscription_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PositionsRequest(_message.Message):
    __slots__ = ("channel", "pipeline", "action", "to", "latest", "replay", "keyless_duplicates")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    REPLAY_FIELD_NUMBER: _ClassVar[int]
    KEYLESS_DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    channel: str
    pipeline: str
    action: str
    to: _model_pb2.BinlogPosition
    latest: bool
    replay: bool
    keyless_duplicates: bool
    def __init__(self, channel: _Optional[str] = ..., pipeline: _Optional[str] = ..., action: _Optional[str] = ..., to: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., latest: _Optional[bool] = ..., replay: _Optional[bool] = ..., keyless_duplicates: _Optional[bool] = ...) -> None: ...

class TargetPosition(_message.Message):
    __slots__ = ("target", "position", "process_id", "owner_epoch", "error")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    target: str
    position: _model_pb2.BinlogPosition
    process_id: int
    owner_epoch: int
    error: str
    def __init__(self, target: _Optional[str] = ..., position: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., process_id: _Optional[int] = ..., owner_epoch: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class PipelinePositions(_message.Message):
    __slots__ = ("pipeline_id", "cursor", "process_id", "source_end", "behind_bytes", "targets", "source_error")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_END_FIELD_NUMBER: _ClassVar[int]
    BEHIND_BYTES_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ERROR_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    cursor: _model_pb2.BinlogPosition
    process_id: int
    source_end: _model_pb2.BinlogPosition
    behind_bytes: int
    targets: _containers.RepeatedCompositeFieldContainer[TargetPosition]
    source_error: str
    def __init__(self, pipeline_id: _Optional[str] = ..., cursor: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., process_id: _Optional[int] = ..., source_end: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., behind_bytes: _Optional[int] = ..., targets: _Optional[_Iterable[_Union[TargetPosition, _Mapping]]] = ..., source_error: _Optional[str] = ...) -> None: ...

class PositionsResponse(_message.Message):
    __slots__ = ("pipelines", "notes")
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    pipelines: _containers.RepeatedCompositeFieldContainer[PipelinePositions]
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pipelines: _Optional[_Iterable[_Union[PipelinePositions, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class ApplyRequest(_message.Message):
    __slots__ = ("yaml", "file", "dry_run")
    YAML_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    yaml: str
    file: str
    dry_run: bool
    def __init__(self, yaml: _Optional[str] = ..., file: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class Change(_message.Message):
    __slots__ = ("kind", "name", "action", "version")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    action: str
    version: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., action: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class ApplyResponse(_message.Message):
    __slots__ = ("errors", "changes", "notes")
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedScalarFieldContainer[str]
    changes: _containers.RepeatedCompositeFieldContainer[Change]
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, errors: _Optional[_Iterable[str]] = ..., changes: _Optional[_Iterable[_Union[Change, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class GetSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[_model_pb2.DataSource]
    def __init__(self, sources: _Optional[_Iterable[_Union[_model_pb2.DataSource, _Mapping]]] = ...) -> None: ...

class DeleteSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSourceResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SwitchSourceRequest(_message.Message):
    __slots__ = ("name", "to")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    name: str
    to: str
    def __init__(self, name: _Optional[str] = ..., to: _Optional[str] = ...) -> None: ...

class SwitchSourceResponse(_message.Message):
    __slots__ = ("name", "member", "previous", "gtid")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    name: str
    member: str
    previous: str
    gtid: str
    def __init__(self, name: _Optional[str] = ..., member: _Optional[str] = ..., previous: _Optional[str] = ..., gtid: _Optional[str] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("channel", "pipeline", "action", "table", "where")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    channel: str
    pipeline: str
    action: str
    table: str
    where: str
    def __init__(self, channel: _Optional[str] = ..., pipeline: _Optional[str] = ..., action: _Optional[str] = ..., table: _Optional[str] = ..., where: _Optional[str] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("pipeline_id", "copies", "paused", "message")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    COPIES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    copies: _containers.RepeatedCompositeFieldContainer[TableCopy]
    paused: bool
    message: str
    def __init__(self, pipeline_id: _Optional[str] = ..., copies: _Optional[_Iterable[_Union[TableCopy, _Mapping]]] = ..., paused: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class ListChannelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PipelineState(_message.Message):
    __slots__ = ("pipeline_id", "state", "owner_node", "position", "delay_ms", "rows_per_second", "window_used", "window_size", "last_error", "process_id", "candidate_nodes", "window_peak", "free_door", "snapshots", "source", "switched", "switched_ms", "source_switches", "subscriber", "unacked", "rows_skipped")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OWNER_NODE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    WINDOW_USED_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SIZE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_NODES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_PEAK_FIELD_NUMBER: _ClassVar[int]
    FREE_DOOR_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SWITCHED_FIELD_NUMBER: _ClassVar[int]
    SWITCHED_MS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SWITCHES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    UNACKED_FIELD_NUMBER: _ClassVar[int]
    ROWS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    state: str
    owner_node: int
    position: _model_pb2.BinlogPosition
    delay_ms: int
    rows_per_second: float
    window_used: int
    window_size: int
    last_error: str
    process_id: int
    candidate_nodes: _containers.RepeatedScalarFieldContainer[int]
    window_peak: int
    free_door: FreeDoorStats
    snapshots: _containers.RepeatedCompositeFieldContainer[TableCopy]
    source: str
    switched: str
    switched_ms: int
    source_switches: int
    subscriber: str
    unacked: int
    rows_skipped: int
    def __init__(self, pipeline_id: _Optional[str] = ..., state: _Optional[str] = ..., owner_node: _Optional[int] = ..., position: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., delay_ms: _Optional[int] = ..., rows_per_second: _Optional[float] = ..., window_used: _Optional[int] = ..., window_size: _Optional[int] = ..., last_error: _Optional[str] = ..., process_id: _Optional[int] = ..., candidate_nodes: _Optional[_Iterable[int]] = ..., window_peak: _Optional[int] = ..., free_door: _Optional[_Union[FreeDoorStats, _Mapping]] = ..., snapshots: _Optional[_Iterable[_Union[TableCopy, _Mapping]]] = ..., source: _Optional[str] = ..., switched: _Optional[str] = ..., switched_ms: _Optional[int] = ..., source_switches: _Optional[int] = ..., subscriber: _Optional[str] = ..., unacked: _Optional[int] = ..., rows_skipped: _Optional[int] = ...) -> None: ...

class TableCopy(_message.Message):
    __slots__ = ("table", "state", "chunks_done", "chunks", "rows", "rows_estimated", "rows_per_s", "eta_s", "where", "error")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_DONE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    ROWS_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_S_FIELD_NUMBER: _ClassVar[int]
    ETA_S_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    table: str
    state: str
    chunks_done: int
    chunks: int
    rows: int
    rows_estimated: int
    rows_per_s: float
    eta_s: float
    where: str
    error: str
    def __init__(self, table: _Optional[str] = ..., state: _Optional[str] = ..., chunks_done: _Optional[int] = ..., chunks: _Optional[int] = ..., rows: _Optional[int] = ..., rows_estimated: _Optional[int] = ..., rows_per_s: _Optional[float] = ..., eta_s: _Optional[float] = ..., where: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class FreeDoorStats(_message.Message):
    __slots__ = ("requested", "loaded", "missing", "rejected", "pending")
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    requested: int
    loaded: int
    missing: int
    rejected: int
    pending: int
    def __init__(self, requested: _Optional[int] = ..., loaded: _Optional[int] = ..., missing: _Optional[int] = ..., rejected: _Optional[int] = ..., pending: _Optional[int] = ...) -> None: ...

class ChannelInfo(_message.Message):
    __slots__ = ("channel", "status", "version", "pipelines", "updated_ms")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    channel: _model_pb2.Channel
    status: _model_pb2.ChannelStatus
    version: int
    pipelines: _containers.RepeatedCompositeFieldContainer[PipelineState]
    updated_ms: int
    def __init__(self, channel: _Optional[_Union[_model_pb2.Channel, _Mapping]] = ..., status: _Optional[_Union[_model_pb2.ChannelStatus, str]] = ..., version: _Optional[int] = ..., pipelines: _Optional[_Iterable[_Union[PipelineState, _Mapping]]] = ..., updated_ms: _Optional[int] = ...) -> None: ...

class ListChannelsResponse(_message.Message):
    __slots__ = ("channels",)
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    channels: _containers.RepeatedCompositeFieldContainer[ChannelInfo]
    def __init__(self, channels: _Optional[_Iterable[_Union[ChannelInfo, _Mapping]]] = ...) -> None: ...

class GetChannelRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SetChannelStatusRequest(_message.Message):
    __slots__ = ("name", "status")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: _model_pb2.ChannelStatus
    def __init__(self, name: _Optional[str] = ..., status: _Optional[_Union[_model_pb2.ChannelStatus, str]] = ...) -> None: ...

class DeleteChannelRequest(_message.Message):
    __slots__ = ("name", "purge_positions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PURGE_POSITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    purge_positions: bool
    def __init__(self, name: _Optional[str] = ..., purge_positions: _Optional[bool] = ...) -> None: ...

class DeleteChannelResponse(_message.Message):
    __slots__ = ("name", "positions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    positions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., positions: _Optional[_Iterable[str]] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("id", "address", "pid", "started_ms", "candidate_pipelines", "running_pipelines", "host", "metrics_address")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_PIPELINES_FIELD_NUMBER: _ClassVar[int]
    RUNNING_PIPELINES_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    METRICS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    pid: int
    started_ms: int
    candidate_pipelines: _containers.RepeatedScalarFieldContainer[str]
    running_pipelines: _containers.RepeatedScalarFieldContainer[str]
    host: str
    metrics_address: str
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., started_ms: _Optional[int] = ..., candidate_pipelines: _Optional[_Iterable[str]] = ..., running_pipelines: _Optional[_Iterable[str]] = ..., host: _Optional[str] = ..., metrics_address: _Optional[str] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("manager_address", "leader", "leader_address", "channels", "nodes", "alarms", "web_url")
    MANAGER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    ALARMS_FIELD_NUMBER: _ClassVar[int]
    WEB_URL_FIELD_NUMBER: _ClassVar[int]
    manager_address: str
    leader: bool
    leader_address: str
    channels: _containers.RepeatedCompositeFieldContainer[ChannelInfo]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    alarms: _containers.RepeatedCompositeFieldContainer[Alarm]
    web_url: str
    def __init__(self, manager_address: _Optional[str] = ..., leader: _Optional[bool] = ..., leader_address: _Optional[str] = ..., channels: _Optional[_Iterable[_Union[ChannelInfo, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., alarms: _Optional[_Iterable[_Union[Alarm, _Mapping]]] = ..., web_url: _Optional[str] = ...) -> None: ...

class Alarm(_message.Message):
    __slots__ = ("rule", "when", "subject", "state", "since_ms", "resolved_ms", "message")
    RULE_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    rule: str
    when: str
    subject: str
    state: str
    since_ms: int
    resolved_ms: int
    message: str
    def __init__(self, rule: _Optional[str] = ..., when: _Optional[str] = ..., subject: _Optional[str] = ..., state: _Optional[str] = ..., since_ms: _Optional[int] = ..., resolved_ms: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class AlarmBoard(_message.Message):
    __slots__ = ("firing", "resolved")
    FIRING_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    firing: _containers.RepeatedCompositeFieldContainer[Alarm]
    resolved: _containers.RepeatedCompositeFieldContainer[Alarm]
    def __init__(self, firing: _Optional[_Iterable[_Union[Alarm, _Mapping]]] = ..., resolved: _Optional[_Iterable[_Union[Alarm, _Mapping]]] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("channel", "pipeline", "table", "where", "chunk_size", "rate", "repair", "columns", "compare", "settle_timeout_s", "shared_targets", "other_pairs")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    COMPARE_FIELD_NUMBER: _ClassVar[int]
    SETTLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    SHARED_TARGETS_FIELD_NUMBER: _ClassVar[int]
    OTHER_PAIRS_FIELD_NUMBER: _ClassVar[int]
    channel: str
    pipeline: str
    table: str
    where: str
    chunk_size: int
    rate: int
    repair: bool
    columns: _containers.RepeatedScalarFieldContainer[str]
    compare: str
    settle_timeout_s: int
    shared_targets: _containers.RepeatedScalarFieldContainer[str]
    other_pairs: _containers.RepeatedCompositeFieldContainer[_model_pb2.MediaPair]
    def __init__(self, channel: _Optional[str] = ..., pipeline: _Optional[str] = ..., table: _Optional[str] = ..., where: _Optional[str] = ..., chunk_size: _Optional[int] = ..., rate: _Optional[int] = ..., repair: _Optional[bool] = ..., columns: _Optional[_Iterable[str]] = ..., compare: _Optional[str] = ..., settle_timeout_s: _Optional[int] = ..., shared_targets: _Optional[_Iterable[str]] = ..., other_pairs: _Optional[_Iterable[_Union[_model_pb2.MediaPair, _Mapping]]] = ...) -> None: ...

class VerifyProgress(_message.Message):
    __slots__ = ("pipeline_id", "table", "phase", "chunks_done", "chunks_total", "rows_done", "rows_total", "report")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_DONE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ROWS_DONE_FIELD_NUMBER: _ClassVar[int]
    ROWS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    table: str
    phase: str
    chunks_done: int
    chunks_total: int
    rows_done: int
    rows_total: int
    report: VerifyReport
    def __init__(self, pipeline_id: _Optional[str] = ..., table: _Optional[str] = ..., phase: _Optional[str] = ..., chunks_done: _Optional[int] = ..., chunks_total: _Optional[int] = ..., rows_done: _Optional[int] = ..., rows_total: _Optional[int] = ..., report: _Optional[_Union[VerifyReport, _Mapping]] = ...) -> None: ...

class VerifyReport(_message.Message):
    __slots__ = ("pipeline_id", "tables", "skipped", "buffer", "seconds")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    BUFFER_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    tables: _containers.RepeatedCompositeFieldContainer[TableVerdict]
    skipped: _containers.RepeatedCompositeFieldContainer[SkippedTable]
    buffer: str
    seconds: float
    def __init__(self, pipeline_id: _Optional[str] = ..., tables: _Optional[_Iterable[_Union[TableVerdict, _Mapping]]] = ..., skipped: _Optional[_Iterable[_Union[SkippedTable, _Mapping]]] = ..., buffer: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class TableVerdict(_message.Message):
    __slots__ = ("table", "method", "targets", "rows", "chunks", "missing", "extra", "different", "differing_keys", "unsettled", "seconds", "rows_per_second", "differences", "notes", "repaired", "remaining", "rechecked")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    DIFFERENT_FIELD_NUMBER: _ClassVar[int]
    DIFFERING_KEYS_FIELD_NUMBER: _ClassVar[int]
    UNSETTLED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    DIFFERENCES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    RECHECKED_FIELD_NUMBER: _ClassVar[int]
    table: str
    method: str
    targets: _containers.RepeatedScalarFieldContainer[str]
    rows: int
    chunks: int
    missing: int
    extra: int
    different: int
    differing_keys: int
    unsettled: int
    seconds: float
    rows_per_second: float
    differences: _containers.RepeatedCompositeFieldContainer[KeyDifference]
    notes: _containers.RepeatedScalarFieldContainer[str]
    repaired: int
    remaining: int
    rechecked: int
    def __init__(self, table: _Optional[str] = ..., method: _Optional[str] = ..., targets: _Optional[_Iterable[str]] = ..., rows: _Optional[int] = ..., chunks: _Optional[int] = ..., missing: _Optional[int] = ..., extra: _Optional[int] = ..., different: _Optional[int] = ..., differing_keys: _Optional[int] = ..., unsettled: _Optional[int] = ..., seconds: _Optional[float] = ..., rows_per_second: _Optional[float] = ..., differences: _Optional[_Iterable[_Union[KeyDifference, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ..., repaired: _Optional[int] = ..., remaining: _Optional[int] = ..., rechecked: _Optional[int] = ...) -> None: ...

class KeyDifference(_message.Message):
    __slots__ = ("kind", "key", "target")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    kind: str
    key: str
    target: str
    def __init__(self, kind: _Optional[str] = ..., key: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class SkippedTable(_message.Message):
    __slots__ = ("table", "reason")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    table: str
    reason: str
    def __init__(self, table: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
