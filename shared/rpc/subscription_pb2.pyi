from shared.rpc import model_pb2 as _model_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubscribeRequest(_message.Message):
    __slots__ = ("start", "ack", "rollback")
    START_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    start: SubscribeStart
    ack: SubscribeAck
    rollback: SubscribeRollback
    def __init__(self, start: _Optional[_Union[SubscribeStart, _Mapping]] = ..., ack: _Optional[_Union[SubscribeAck, _Mapping]] = ..., rollback: _Optional[_Union[SubscribeRollback, _Mapping]] = ...) -> None: ...

class SubscribeStart(_message.Message):
    __slots__ = ("channel", "pipeline", "look", "reader")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    LOOK_FIELD_NUMBER: _ClassVar[int]
    READER_FIELD_NUMBER: _ClassVar[int]
    channel: str
    pipeline: str
    look: bool
    reader: str
    def __init__(self, channel: _Optional[str] = ..., pipeline: _Optional[str] = ..., look: _Optional[bool] = ..., reader: _Optional[str] = ...) -> None: ...

class SubscribeAck(_message.Message):
    __slots__ = ("batch_id", "stream", "generation")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    stream: int
    generation: int
    def __init__(self, batch_id: _Optional[int] = ..., stream: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class SubscribeRollback(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Value(_message.Message):
    __slots__ = ("null", "int", "uint", "decimal", "float", "double", "text", "binary", "date", "datetime", "timestamp", "time")
    NULL_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    UINT_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    DATE_FIELD_NUMBER: _ClassVar[int]
    DATETIME_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    null: bool
    int: int
    uint: int
    decimal: str
    float: float
    double: float
    text: str
    binary: bytes
    date: str
    datetime: str
    timestamp: str
    time: str
    def __init__(self, null: _Optional[bool] = ..., int: _Optional[int] = ..., uint: _Optional[int] = ..., decimal: _Optional[str] = ..., float: _Optional[float] = ..., double: _Optional[float] = ..., text: _Optional[str] = ..., binary: _Optional[bytes] = ..., date: _Optional[str] = ..., datetime: _Optional[str] = ..., timestamp: _Optional[str] = ..., time: _Optional[str] = ...) -> None: ...

class Field(_message.Message):
    __slots__ = ("name", "value", "charset")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CHARSET_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    charset: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., charset: _Optional[str] = ...) -> None: ...

class RowChange(_message.Message):
    __slots__ = ("op", "schema", "table", "index", "before", "after", "keys")
    OP_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    op: str
    schema: str
    table: str
    index: int
    before: _containers.RepeatedCompositeFieldContainer[Field]
    after: _containers.RepeatedCompositeFieldContainer[Field]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, op: _Optional[str] = ..., schema: _Optional[str] = ..., table: _Optional[str] = ..., index: _Optional[int] = ..., before: _Optional[_Iterable[_Union[Field, _Mapping]]] = ..., after: _Optional[_Iterable[_Union[Field, _Mapping]]] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Transaction(_message.Message):
    __slots__ = ("id", "position", "commit_ts_ms", "changes", "ddl", "ddl_schema")
    ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_MS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    DDL_FIELD_NUMBER: _ClassVar[int]
    DDL_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    id: str
    position: _model_pb2.BinlogPosition
    commit_ts_ms: int
    changes: _containers.RepeatedCompositeFieldContainer[RowChange]
    ddl: str
    ddl_schema: str
    def __init__(self, id: _Optional[str] = ..., position: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., commit_ts_ms: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[RowChange, _Mapping]]] = ..., ddl: _Optional[str] = ..., ddl_schema: _Optional[str] = ...) -> None: ...

class ChangeBatch(_message.Message):
    __slots__ = ("batch_id", "end", "transactions", "run", "epoch", "stream", "generation")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    end: _model_pb2.BinlogPosition
    transactions: _containers.RepeatedCompositeFieldContainer[Transaction]
    run: str
    epoch: int
    stream: int
    generation: int
    def __init__(self, batch_id: _Optional[int] = ..., end: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., transactions: _Optional[_Iterable[_Union[Transaction, _Mapping]]] = ..., run: _Optional[str] = ..., epoch: _Optional[int] = ..., stream: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...
