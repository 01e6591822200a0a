from shared.rpc import manager_pb2 as _manager_pb2
from shared.rpc import subscription_pb2 as _subscription_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
