from shared.rpc import manager_pb2 as _manager_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("node_id", "pipelines")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    pipelines: _containers.RepeatedCompositeFieldContainer[_manager_pb2.PipelineState]
    def __init__(self, node_id: _Optional[int] = ..., pipelines: _Optional[_Iterable[_Union[_manager_pb2.PipelineState, _Mapping]]] = ...) -> None: ...
