from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Dim(_message.Message):
    __slots__ = ("size", "name")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    size: int
    name: str
    def __init__(self, size: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class TensorShapeProto(_message.Message):
    __slots__ = ("dim", "unknown_rank")
    DIM_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_RANK_FIELD_NUMBER: _ClassVar[int]
    dim: _containers.RepeatedCompositeFieldContainer[Dim]
    unknown_rank: bool
    def __init__(self, dim: _Optional[_Iterable[_Union[Dim, _Mapping]]] = ..., unknown_rank: _Optional[bool] = ...) -> None: ...

class TensorProto(_message.Message):
    __slots__ = ("dtype", "tensor_shape", "tensor_content", "int_val", "int64_val")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_SHAPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_CONTENT_FIELD_NUMBER: _ClassVar[int]
    INT_VAL_FIELD_NUMBER: _ClassVar[int]
    INT64_VAL_FIELD_NUMBER: _ClassVar[int]
    dtype: int
    tensor_shape: TensorShapeProto
    tensor_content: bytes
    int_val: _containers.RepeatedScalarFieldContainer[int]
    int64_val: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dtype: _Optional[int] = ..., tensor_shape: _Optional[_Union[TensorShapeProto, _Mapping]] = ..., tensor_content: _Optional[bytes] = ..., int_val: _Optional[_Iterable[int]] = ..., int64_val: _Optional[_Iterable[int]] = ...) -> None: ...

class ListValue(_message.Message):
    __slots__ = ("s", "i", "f", "b", "type", "shape", "tensor")
    S_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    F_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    s: _containers.RepeatedScalarFieldContainer[bytes]
    i: _containers.RepeatedScalarFieldContainer[int]
    f: _containers.RepeatedScalarFieldContainer[float]
    b: _containers.RepeatedScalarFieldContainer[bool]
    type: _containers.RepeatedScalarFieldContainer[int]
    shape: _containers.RepeatedCompositeFieldContainer[TensorShapeProto]
    tensor: _containers.RepeatedCompositeFieldContainer[TensorProto]
    def __init__(self, s: _Optional[_Iterable[bytes]] = ..., i: _Optional[_Iterable[int]] = ..., f: _Optional[_Iterable[float]] = ..., b: _Optional[_Iterable[bool]] = ..., type: _Optional[_Iterable[int]] = ..., shape: _Optional[_Iterable[_Union[TensorShapeProto, _Mapping]]] = ..., tensor: _Optional[_Iterable[_Union[TensorProto, _Mapping]]] = ...) -> None: ...

class AttrValue(_message.Message):
    __slots__ = ("list", "s", "i", "f", "b", "type", "shape", "tensor", "placeholder")
    LIST_FIELD_NUMBER: _ClassVar[int]
    S_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    F_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    PLACEHOLDER_FIELD_NUMBER: _ClassVar[int]
    list: ListValue
    s: bytes
    i: int
    f: float
    b: bool
    type: int
    shape: TensorShapeProto
    tensor: TensorProto
    placeholder: str
    def __init__(self, list: _Optional[_Union[ListValue, _Mapping]] = ..., s: _Optional[bytes] = ..., i: _Optional[int] = ..., f: _Optional[float] = ..., b: _Optional[bool] = ..., type: _Optional[int] = ..., shape: _Optional[_Union[TensorShapeProto, _Mapping]] = ..., tensor: _Optional[_Union[TensorProto, _Mapping]] = ..., placeholder: _Optional[str] = ...) -> None: ...

class NodeDef(_message.Message):
    __slots__ = ("name", "op", "input", "device", "attr")
    class AttrEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttrValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttrValue, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: str
    input: _containers.RepeatedScalarFieldContainer[str]
    device: str
    attr: _containers.MessageMap[str, AttrValue]
    def __init__(self, name: _Optional[str] = ..., op: _Optional[str] = ..., input: _Optional[_Iterable[str]] = ..., device: _Optional[str] = ..., attr: _Optional[_Mapping[str, AttrValue]] = ...) -> None: ...

class GraphDef(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _containers.RepeatedCompositeFieldContainer[NodeDef]
    def __init__(self, node: _Optional[_Iterable[_Union[NodeDef, _Mapping]]] = ...) -> None: ...

class FunctionGraphs(_message.Message):
    __slots__ = ("partition_graphs", "pre_optimization_graph", "post_optimization_graph")
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    PRE_OPTIMIZATION_GRAPH_FIELD_NUMBER: _ClassVar[int]
    POST_OPTIMIZATION_GRAPH_FIELD_NUMBER: _ClassVar[int]
    partition_graphs: _containers.RepeatedCompositeFieldContainer[GraphDef]
    pre_optimization_graph: GraphDef
    post_optimization_graph: GraphDef
    def __init__(self, partition_graphs: _Optional[_Iterable[_Union[GraphDef, _Mapping]]] = ..., pre_optimization_graph: _Optional[_Union[GraphDef, _Mapping]] = ..., post_optimization_graph: _Optional[_Union[GraphDef, _Mapping]] = ...) -> None: ...

class RunMetadata(_message.Message):
    __slots__ = ("partition_graphs", "function_graphs")
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    partition_graphs: _containers.RepeatedCompositeFieldContainer[GraphDef]
    function_graphs: _containers.RepeatedCompositeFieldContainer[FunctionGraphs]
    def __init__(self, partition_graphs: _Optional[_Iterable[_Union[GraphDef, _Mapping]]] = ..., function_graphs: _Optional[_Iterable[_Union[FunctionGraphs, _Mapping]]] = ...) -> None: ...

class XStat(_message.Message):
    __slots__ = ("metadata_id", "double_value", "uint64_value", "int64_value", "str_value", "bytes_value", "ref_value")
    METADATA_ID_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    STR_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    REF_VALUE_FIELD_NUMBER: _ClassVar[int]
    metadata_id: int
    double_value: float
    uint64_value: int
    int64_value: int
    str_value: str
    bytes_value: bytes
    ref_value: int
    def __init__(self, metadata_id: _Optional[int] = ..., double_value: _Optional[float] = ..., uint64_value: _Optional[int] = ..., int64_value: _Optional[int] = ..., str_value: _Optional[str] = ..., bytes_value: _Optional[bytes] = ..., ref_value: _Optional[int] = ...) -> None: ...

class XEvent(_message.Message):
    __slots__ = ("metadata_id", "offset_ps", "num_occurrences", "duration_ps", "stats")
    METADATA_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_PS_FIELD_NUMBER: _ClassVar[int]
    NUM_OCCURRENCES_FIELD_NUMBER: _ClassVar[int]
    DURATION_PS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    metadata_id: int
    offset_ps: int
    num_occurrences: int
    duration_ps: int
    stats: _containers.RepeatedCompositeFieldContainer[XStat]
    def __init__(self, metadata_id: _Optional[int] = ..., offset_ps: _Optional[int] = ..., num_occurrences: _Optional[int] = ..., duration_ps: _Optional[int] = ..., stats: _Optional[_Iterable[_Union[XStat, _Mapping]]] = ...) -> None: ...

class XLine(_message.Message):
    __slots__ = ("id", "name", "timestamp_ns", "events", "duration_ps", "display_id", "display_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DURATION_PS_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    timestamp_ns: int
    events: _containers.RepeatedCompositeFieldContainer[XEvent]
    duration_ps: int
    display_id: int
    display_name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., timestamp_ns: _Optional[int] = ..., events: _Optional[_Iterable[_Union[XEvent, _Mapping]]] = ..., duration_ps: _Optional[int] = ..., display_id: _Optional[int] = ..., display_name: _Optional[str] = ...) -> None: ...

class XEventMetadata(_message.Message):
    __slots__ = ("id", "name", "display_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    display_name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class XStatMetadata(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class XPlane(_message.Message):
    __slots__ = ("id", "name", "lines", "event_metadata", "stat_metadata", "stats")
    class EventMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: XEventMetadata
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[XEventMetadata, _Mapping]] = ...) -> None: ...
    class StatMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: XStatMetadata
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[XStatMetadata, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    EVENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    STAT_METADATA_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    lines: _containers.RepeatedCompositeFieldContainer[XLine]
    event_metadata: _containers.MessageMap[int, XEventMetadata]
    stat_metadata: _containers.MessageMap[int, XStatMetadata]
    stats: _containers.RepeatedCompositeFieldContainer[XStat]
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[XLine, _Mapping]]] = ..., event_metadata: _Optional[_Mapping[int, XEventMetadata]] = ..., stat_metadata: _Optional[_Mapping[int, XStatMetadata]] = ..., stats: _Optional[_Iterable[_Union[XStat, _Mapping]]] = ...) -> None: ...

class XSpace(_message.Message):
    __slots__ = ("planes", "hostnames")
    PLANES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAMES_FIELD_NUMBER: _ClassVar[int]
    planes: _containers.RepeatedCompositeFieldContainer[XPlane]
    hostnames: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, planes: _Optional[_Iterable[_Union[XPlane, _Mapping]]] = ..., hostnames: _Optional[_Iterable[str]] = ...) -> None: ...
