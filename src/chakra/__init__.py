"""chakra-et: read, write, check and explain Chakra execution traces (ETs).

The core (``chakra.io``, ``chakra.attrs``, ``chakra.trace``, ``chakra.graph``, ``chakra.validate``)
imports no front end or consumer. The most used names are re-exported here.
"""

from chakra.errors import AttrKindError, ChakraError, ChakraFormatError, ChakraInputError
from chakra.schema.protobuf.et_def_pb2 import (
    AttributeProto,
    CollectiveCommType,
    GlobalMetadata,
    IOInfo,
    Node,
    NodeType,
)
from chakra.trace import Trace, TraceSet

__version__ = "0.1.0"

__all__ = [
    "AttrKindError",
    "AttributeProto",
    "ChakraError",
    "ChakraFormatError",
    "ChakraInputError",
    "CollectiveCommType",
    "GlobalMetadata",
    "IOInfo",
    "Node",
    "NodeType",
    "Trace",
    "TraceSet",
    "__version__",
]
