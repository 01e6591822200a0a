"""Convert model dataclasses to protobuf messages and back, field by field by name.

``proto/model.proto`` mirrors ``shared/model.py``: same field names, enums prefixed with the
enum's name (ColumnMode.INCLUDE ↔ COLUMN_MODE_INCLUDE), name patterns and secret references
stored as the text the user wrote. Serialisation is deterministic, so equal definitions give
equal bytes (applying the same file twice changes nothing).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from functools import cache
from typing import Any, TypeVar

from google.protobuf.message import Message

from shared import model
from shared.patterns import NamePattern
from shared.rpc import model_pb2
from shared.secrets import SecretRef

T = TypeVar("T")
_TEXT_TYPES = {NamePattern: NamePattern.parse, SecretRef: SecretRef}


def _enum_prefix(enum_type: type[enum.Enum]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum_type.__name__).upper() + "_"


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(model))


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return args[0], True
    return hint, False


def _is_message(hint: Any) -> bool:
    """A dataclass stored as a nested message (name patterns and secrets are stored as text)."""
    return dataclasses.is_dataclass(hint) and hint not in _TEXT_TYPES


def to_proto(value: Any, message_type: type[Message] | None = None) -> Message:
    """A dataclass instance as the protobuf message of the same name (or ``message_type``)."""
    message_type = message_type or getattr(model_pb2, type(value).__name__)
    message = message_type()
    hints = _hints(type(value))
    for field in dataclasses.fields(value):
        item = getattr(value, field.name)
        if item is None:
            continue
        hint, _ = _unwrap_optional(hints[field.name])
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            target = getattr(message, field.name)
            if _is_message(element):
                for entry in item:
                    target.append(to_proto(entry))
            else:
                target.extend(_scalar_to_proto(entry) for entry in item)
        elif _is_message(hint):
            getattr(message, field.name).CopyFrom(to_proto(item))
        else:
            setattr(message, field.name, _scalar_to_proto(item))
    return message


def _scalar_to_proto(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return _enum_prefix(type(value)) + value.name
    if isinstance(value, NamePattern | SecretRef):
        return value.text
    return value


def from_proto(message: Message, cls: type[T]) -> T:
    """The dataclass ``cls`` built from ``message``; absent optional fields become None, and
    absent fields with presence (``optional`` in proto/) their dataclass default."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint, optional = _unwrap_optional(hints[field.name])
        descriptor = message.DESCRIPTOR.fields_by_name[field.name]
        if descriptor.has_presence and not message.HasField(field.name):
            if optional:
                kwargs[field.name] = None
                continue
            if not _is_message(hint) and field.default is not dataclasses.MISSING:
                # a field added after the record was stored: its default, not the zero value
                kwargs[field.name] = field.default
                continue
        raw = getattr(message, field.name)
        if typing.get_origin(hint) is tuple:
            element = typing.get_args(hint)[0]
            kwargs[field.name] = tuple(
                from_proto(entry, element) if _is_message(element)
                else _scalar_from_proto(entry, element, descriptor) for entry in raw)
        elif _is_message(hint):
            kwargs[field.name] = from_proto(raw, hint)
        elif _is_unset_enum(hint, raw) and field.default is not dataclasses.MISSING:
            kwargs[field.name] = field.default  # an enum left at 0 (UNSPECIFIED): the default
        else:
            kwargs[field.name] = _scalar_from_proto(raw, hint, descriptor)
    return cls(**kwargs)


def _is_unset_enum(hint: Any, raw: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.Enum) and raw == 0


def _scalar_from_proto(raw: Any, hint: Any, descriptor: Any) -> Any:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        name = descriptor.enum_type.values_by_number[raw].name
        return hint[name.removeprefix(_enum_prefix(hint))]
    if hint in _TEXT_TYPES:
        return _TEXT_TYPES[hint](raw)
    return raw


def encode(value: Any, message_type: type[Message] | None = None) -> bytes:
    return to_proto(value, message_type).SerializeToString(deterministic=True)


def channel_from_bytes(data: bytes) -> model_pb2.StoredChannel:
    stored = model_pb2.StoredChannel()
    stored.ParseFromString(data)
    return stored


def source_from_bytes(data: bytes) -> model_pb2.StoredSource:
    stored = model_pb2.StoredSource()
    stored.ParseFromString(data)
    return stored
