from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Op(_message.Message):
    __slots__ = ("name", "device_type", "dims", "device_ids", "memory_types")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPES_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: int
    dims: _containers.RepeatedScalarFieldContainer[int]
    device_ids: _containers.RepeatedScalarFieldContainer[int]
    memory_types: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[int] = ..., dims: _Optional[_Iterable[int]] = ..., device_ids: _Optional[_Iterable[int]] = ..., memory_types: _Optional[_Iterable[int]] = ...) -> None: ...

class Strategy(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...
