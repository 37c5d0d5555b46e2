"""chakra-et: read, write, check and explain Chakra execution traces (ETs).

The core (``chakra.io``, ``chakra.attrs``, ``chakra.trace``, ``chakra.graph``, ``chakra.validate``)
imports no front end or consumer. The most used names are re-exported here, imported on first use
(PEP 562): ``import chakra`` (and so every ``chakra`` command) does not pay for protobuf and numpy
until a name that needs them is read.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chakra.errors import AttrKindError, ChakraError, ChakraFormatError, ChakraInputError
    from chakra.groups import CommGroups
    from chakra.schema.protobuf.et_def_pb2 import (
        AttributeProto,
        CollectiveCommType,
        GlobalMetadata,
        IOInfo,
        Node,
        NodeType,
    )
    from chakra.table import NodeTable
    from chakra.trace import Trace
    from chakra.workload import RankResults, Workload
    from chakra.workload import open_workload as open

__version__ = "0.1.0"

_PROTOBUF = "chakra.schema.protobuf.et_def_pb2"
#: Each re-exported name and the module it comes from.
_EXPORTS = {
    "AttrKindError": "chakra.errors",
    "ChakraError": "chakra.errors",
    "ChakraFormatError": "chakra.errors",
    "ChakraInputError": "chakra.errors",
    "AttributeProto": _PROTOBUF,
    "CollectiveCommType": _PROTOBUF,
    "GlobalMetadata": _PROTOBUF,
    "IOInfo": _PROTOBUF,
    "Node": _PROTOBUF,
    "NodeType": _PROTOBUF,
    "Trace": "chakra.trace",
    "CommGroups": "chakra.groups",
    "NodeTable": "chakra.table",
    "Workload": "chakra.workload",
    "RankResults": "chakra.workload",
    "open": "chakra.workload",
}
#: Re-exported names that their module defines under another name.
_RENAMED = {"open": "open_workload"}

__all__ = [
    "AttrKindError",
    "AttributeProto",
    "ChakraError",
    "ChakraFormatError",
    "ChakraInputError",
    "CollectiveCommType",
    "CommGroups",
    "GlobalMetadata",
    "IOInfo",
    "Node",
    "NodeTable",
    "NodeType",
    "RankResults",
    "Trace",
    "Workload",
    "__version__",
    "open",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chakra' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    # cached: later reads are plain attribute reads
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
