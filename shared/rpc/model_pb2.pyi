from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChannelStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANNEL_STATUS_UNSPECIFIED: _ClassVar[ChannelStatus]
    CHANNEL_STATUS_START: _ClassVar[ChannelStatus]
    CHANNEL_STATUS_PAUSE: _ClassVar[ChannelStatus]
    CHANNEL_STATUS_STOP: _ClassVar[ChannelStatus]

class ColumnMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLUMN_MODE_UNSPECIFIED: _ClassVar[ColumnMode]
    COLUMN_MODE_INCLUDE: _ClassVar[ColumnMode]
    COLUMN_MODE_EXCLUDE: _ClassVar[ColumnMode]

class StartupMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STARTUP_MODE_UNSPECIFIED: _ClassVar[StartupMode]
    STARTUP_MODE_LATEST: _ClassVar[StartupMode]
    STARTUP_MODE_POSITION: _ClassVar[StartupMode]
    STARTUP_MODE_GTID: _ClassVar[StartupMode]
    STARTUP_MODE_SNAPSHOT: _ClassVar[StartupMode]

class ShardAlgorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARD_ALGORITHM_UNSPECIFIED: _ClassVar[ShardAlgorithm]
    SHARD_ALGORITHM_MODULO: _ClassVar[ShardAlgorithm]
    SHARD_ALGORITHM_QUOTIENT: _ClassVar[ShardAlgorithm]
CHANNEL_STATUS_UNSPECIFIED: ChannelStatus
CHANNEL_STATUS_START: ChannelStatus
CHANNEL_STATUS_PAUSE: ChannelStatus
CHANNEL_STATUS_STOP: ChannelStatus
COLUMN_MODE_UNSPECIFIED: ColumnMode
COLUMN_MODE_INCLUDE: ColumnMode
COLUMN_MODE_EXCLUDE: ColumnMode
STARTUP_MODE_UNSPECIFIED: StartupMode
STARTUP_MODE_LATEST: StartupMode
STARTUP_MODE_POSITION: StartupMode
STARTUP_MODE_GTID: StartupMode
STARTUP_MODE_SNAPSHOT: StartupMode
SHARD_ALGORITHM_UNSPECIFIED: ShardAlgorithm
SHARD_ALGORITHM_MODULO: ShardAlgorithm
SHARD_ALGORITHM_QUOTIENT: ShardAlgorithm

class DataSource(_message.Message):
    __slots__ = ("name", "host", "port", "user", "password", "type", "charset", "tls", "hosts", "primary", "switch_after_s", "location", "storage")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CHARSET_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    SWITCH_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    user: str
    password: str
    type: str
    charset: str
    tls: TlsOptions
    hosts: _containers.RepeatedScalarFieldContainer[str]
    primary: str
    switch_after_s: int
    location: str
    storage: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., user: _Optional[str] = ..., password: _Optional[str] = ..., type: _Optional[str] = ..., charset: _Optional[str] = ..., tls: _Optional[_Union[TlsOptions, _Mapping]] = ..., hosts: _Optional[_Iterable[str]] = ..., primary: _Optional[str] = ..., switch_after_s: _Optional[int] = ..., location: _Optional[str] = ..., storage: _Optional[_Iterable[str]] = ...) -> None: ...

class TlsOptions(_message.Message):
    __slots__ = ("ca", "cert", "key", "verify_identity")
    CA_FIELD_NUMBER: _ClassVar[int]
    CERT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERIFY_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    ca: str
    cert: str
    key: str
    verify_identity: bool
    def __init__(self, ca: _Optional[str] = ..., cert: _Optional[str] = ..., key: _Optional[str] = ..., verify_identity: _Optional[bool] = ...) -> None: ...

class DataMedia(_message.Message):
    __slots__ = ("datasource", "namespace", "table")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    namespace: str
    table: str
    def __init__(self, datasource: _Optional[str] = ..., namespace: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class ColumnPair(_message.Message):
    __slots__ = ("source", "target")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class ColumnGroup(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, columns: _Optional[_Iterable[str]] = ...) -> None: ...

class VirtualColumn(_message.Message):
    __slots__ = ("name", "value", "expression", "processor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    PROCESSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    expression: str
    processor: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., expression: _Optional[str] = ..., processor: _Optional[str] = ...) -> None: ...

class ShardRule(_message.Message):
    __slots__ = ("column", "algorithm", "table_balance_size")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    TABLE_BALANCE_SIZE_FIELD_NUMBER: _ClassVar[int]
    column: str
    algorithm: ShardAlgorithm
    table_balance_size: int
    def __init__(self, column: _Optional[str] = ..., algorithm: _Optional[_Union[ShardAlgorithm, str]] = ..., table_balance_size: _Optional[int] = ...) -> None: ...

class LookupJoin(_message.Message):
    __slots__ = ("table", "by", "key", "columns", "missing")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    table: str
    by: str
    key: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    missing: str
    def __init__(self, table: _Optional[str] = ..., by: _Optional[str] = ..., key: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., missing: _Optional[str] = ...) -> None: ...

class MediaPair(_message.Message):
    __slots__ = ("source", "target", "push_weight", "column_mode", "columns", "column_pairs", "column_groups", "processor", "virtual_columns", "shard", "key_columns", "fan_out", "joins", "merge_part", "mode", "partition_by")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PUSH_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    COLUMN_MODE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    COLUMN_PAIRS_FIELD_NUMBER: _ClassVar[int]
    COLUMN_GROUPS_FIELD_NUMBER: _ClassVar[int]
    PROCESSOR_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    FAN_OUT_FIELD_NUMBER: _ClassVar[int]
    JOINS_FIELD_NUMBER: _ClassVar[int]
    MERGE_PART_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_BY_FIELD_NUMBER: _ClassVar[int]
    source: DataMedia
    target: DataMedia
    push_weight: int
    column_mode: ColumnMode
    columns: _containers.RepeatedScalarFieldContainer[str]
    column_pairs: _containers.RepeatedCompositeFieldContainer[ColumnPair]
    column_groups: _containers.RepeatedCompositeFieldContainer[ColumnGroup]
    processor: str
    virtual_columns: _containers.RepeatedCompositeFieldContainer[VirtualColumn]
    shard: ShardRule
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    fan_out: bool
    joins: _containers.RepeatedCompositeFieldContainer[LookupJoin]
    merge_part: bool
    mode: str
    partition_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source: _Optional[_Union[DataMedia, _Mapping]] = ..., target: _Optional[_Union[DataMedia, _Mapping]] = ..., push_weight: _Optional[int] = ..., column_mode: _Optional[_Union[ColumnMode, str]] = ..., columns: _Optional[_Iterable[str]] = ..., column_pairs: _Optional[_Iterable[_Union[ColumnPair, _Mapping]]] = ..., column_groups: _Optional[_Iterable[_Union[ColumnGroup, _Mapping]]] = ..., processor: _Optional[str] = ..., virtual_columns: _Optional[_Iterable[_Union[VirtualColumn, _Mapping]]] = ..., shard: _Optional[_Union[ShardRule, _Mapping]] = ..., key_columns: _Optional[_Iterable[str]] = ..., fan_out: _Optional[bool] = ..., joins: _Optional[_Iterable[_Union[LookupJoin, _Mapping]]] = ..., merge_part: _Optional[bool] = ..., mode: _Optional[str] = ..., partition_by: _Optional[_Iterable[str]] = ...) -> None: ...

class BinlogPosition(_message.Message):
    __slots__ = ("file", "pos", "gtid", "server")
    FILE_FIELD_NUMBER: _ClassVar[int]
    POS_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    file: str
    pos: int
    gtid: str
    server: str
    def __init__(self, file: _Optional[str] = ..., pos: _Optional[int] = ..., gtid: _Optional[str] = ..., server: _Optional[str] = ...) -> None: ...

class PipelineParams(_message.Message):
    __slots__ = ("parallelism", "batch_size", "batch_timeout_ms", "load_batch_size", "ddl_sync", "skip_load_exception", "dry_run", "max_retries", "startup", "start_position", "free_door_source", "free_door_slice", "load_data_min_rows", "snapshot_chunk_size", "snapshot_parallelism", "snapshot_skip_binlog", "lake_compact_every", "lake_retain_hours", "fire_target_triggers", "write_non_transactional")
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BATCH_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    LOAD_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DDL_SYNC_FIELD_NUMBER: _ClassVar[int]
    SKIP_LOAD_EXCEPTION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    STARTUP_FIELD_NUMBER: _ClassVar[int]
    START_POSITION_FIELD_NUMBER: _ClassVar[int]
    FREE_DOOR_SOURCE_FIELD_NUMBER: _ClassVar[int]
    FREE_DOOR_SLICE_FIELD_NUMBER: _ClassVar[int]
    LOAD_DATA_MIN_ROWS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_SKIP_BINLOG_FIELD_NUMBER: _ClassVar[int]
    LAKE_COMPACT_EVERY_FIELD_NUMBER: _ClassVar[int]
    LAKE_RETAIN_HOURS_FIELD_NUMBER: _ClassVar[int]
    FIRE_TARGET_TRIGGERS_FIELD_NUMBER: _ClassVar[int]
    WRITE_NON_TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    parallelism: int
    batch_size: int
    batch_timeout_ms: int
    load_batch_size: int
    ddl_sync: bool
    skip_load_exception: bool
    dry_run: bool
    max_retries: int
    startup: StartupMode
    start_position: BinlogPosition
    free_door_source: str
    free_door_slice: int
    load_data_min_rows: int
    snapshot_chunk_size: int
    snapshot_parallelism: int
    snapshot_skip_binlog: bool
    lake_compact_every: int
    lake_retain_hours: int
    fire_target_triggers: bool
    write_non_transactional: bool
    def __init__(self, parallelism: _Optional[int] = ..., batch_size: _Optional[int] = ..., batch_timeout_ms: _Optional[int] = ..., load_batch_size: _Optional[int] = ..., ddl_sync: _Optional[bool] = ..., skip_load_exception: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., max_retries: _Optional[int] = ..., startup: _Optional[_Union[StartupMode, str]] = ..., start_position: _Optional[_Union[BinlogPosition, _Mapping]] = ..., free_door_source: _Optional[str] = ..., free_door_slice: _Optional[int] = ..., load_data_min_rows: _Optional[int] = ..., snapshot_chunk_size: _Optional[int] = ..., snapshot_parallelism: _Optional[int] = ..., snapshot_skip_binlog: _Optional[bool] = ..., lake_compact_every: _Optional[int] = ..., lake_retain_hours: _Optional[int] = ..., fire_target_triggers: _Optional[bool] = ..., write_non_transactional: _Optional[bool] = ...) -> None: ...

class Pipeline(_message.Message):
    __slots__ = ("name", "source", "target", "pairs", "nodes", "params")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: str
    target: str
    pairs: _containers.RepeatedCompositeFieldContainer[MediaPair]
    nodes: _containers.RepeatedScalarFieldContainer[int]
    params: PipelineParams
    def __init__(self, name: _Optional[str] = ..., source: _Optional[str] = ..., target: _Optional[str] = ..., pairs: _Optional[_Iterable[_Union[MediaPair, _Mapping]]] = ..., nodes: _Optional[_Iterable[int]] = ..., params: _Optional[_Union[PipelineParams, _Mapping]] = ...) -> None: ...

class Channel(_message.Message):
    __slots__ = ("name", "pipelines", "description", "definition")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    pipelines: _containers.RepeatedCompositeFieldContainer[Pipeline]
    description: str
    definition: str
    def __init__(self, name: _Optional[str] = ..., pipelines: _Optional[_Iterable[_Union[Pipeline, _Mapping]]] = ..., description: _Optional[str] = ..., definition: _Optional[str] = ...) -> None: ...

class StoredChannel(_message.Message):
    __slots__ = ("channel", "version", "updated_ms")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    version: int
    updated_ms: int
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ..., version: _Optional[int] = ..., updated_ms: _Optional[int] = ...) -> None: ...

class StoredSource(_message.Message):
    __slots__ = ("source", "version", "updated_ms")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    source: DataSource
    version: int
    updated_ms: int
    def __init__(self, source: _Optional[_Union[DataSource, _Mapping]] = ..., version: _Optional[int] = ..., updated_ms: _Optional[int] = ...) -> None: ...
