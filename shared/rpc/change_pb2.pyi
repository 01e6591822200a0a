from shared.rpc import model_pb2 as _model_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChangeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANGE_TYPE_UNSPECIFIED: _ClassVar[ChangeType]
    CHANGE_TYPE_INSERT: _ClassVar[ChangeType]
    CHANGE_TYPE_UPDATE: _ClassVar[ChangeType]
    CHANGE_TYPE_DELETE: _ClassVar[ChangeType]
    CHANGE_TYPE_DDL: _ClassVar[ChangeType]
CHANGE_TYPE_UNSPECIFIED: ChangeType
CHANGE_TYPE_INSERT: ChangeType
CHANGE_TYPE_UPDATE: ChangeType
CHANGE_TYPE_DELETE: ChangeType
CHANGE_TYPE_DDL: ChangeType

class Value(_message.Message):
    __slots__ = ("is_null", "int_value", "uint_value", "float_value", "text_value", "bytes_value", "decimal_value", "temporal_value")
    IS_NULL_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEXT_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEMPORAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    is_null: bool
    int_value: int
    uint_value: int
    float_value: float
    text_value: str
    bytes_value: bytes
    decimal_value: str
    temporal_value: str
    def __init__(self, is_null: _Optional[bool] = ..., int_value: _Optional[int] = ..., uint_value: _Optional[int] = ..., float_value: _Optional[float] = ..., text_value: _Optional[str] = ..., bytes_value: _Optional[bytes] = ..., decimal_value: _Optional[str] = ..., temporal_value: _Optional[str] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "mysql_type", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MYSQL_TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    mysql_type: str
    value: Value
    def __init__(self, name: _Optional[str] = ..., mysql_type: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class RowChange(_message.Message):
    __slots__ = ("schema", "table", "type", "key_columns", "before", "after", "ddl", "position", "commit_ts_ms")
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    DDL_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_MS_FIELD_NUMBER: _ClassVar[int]
    schema: str
    table: str
    type: ChangeType
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    before: _containers.RepeatedCompositeFieldContainer[Column]
    after: _containers.RepeatedCompositeFieldContainer[Column]
    ddl: str
    position: _model_pb2.BinlogPosition
    commit_ts_ms: int
    def __init__(self, schema: _Optional[str] = ..., table: _Optional[str] = ..., type: _Optional[_Union[ChangeType, str]] = ..., key_columns: _Optional[_Iterable[str]] = ..., before: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., after: _Optional[_Iterable[_Union[Column, _Mapping]]] = ..., ddl: _Optional[str] = ..., position: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., commit_ts_ms: _Optional[int] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("pipeline_id", "process_id", "changes", "start", "end")
    PIPELINE_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    pipeline_id: str
    process_id: int
    changes: _containers.RepeatedCompositeFieldContainer[RowChange]
    start: _model_pb2.BinlogPosition
    end: _model_pb2.BinlogPosition
    def __init__(self, pipeline_id: _Optional[str] = ..., process_id: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[RowChange, _Mapping]]] = ..., start: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ..., end: _Optional[_Union[_model_pb2.BinlogPosition, _Mapping]] = ...) -> None: ...
