"""TensorFlow's names and sizes, as its graphs write them: devices, node inputs, data types, shapes and
constants (the step function's graphs are read by :mod:`chakra.tensorflow.graph_table`).

Devices are named as TensorFlow names them, ``/job:worker/replica:0/task:1/device:CPU:0``;
:func:`rank_order` numbers them worker-major, device-minor: by job, then task, then device type and
index, which is the order ``MultiWorkerMirroredStrategy`` lists its devices in.

Example:
    rank_order(tables)  # the devices of chakra.tensorflow.graph_table.read_step_tables, in rank order
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from chakra.schema.tensorflow.tf_subset_pb2 import NodeDef

#: Ops that do no work of their own (the converter folds them into their consumers' dependencies).
FOLDED_OPS = frozenset(
    {
        "Const", "HostConst", "Identity", "IdentityN", "NoOp", "_Arg", "_Retval", "_DeviceArg",
        "_DeviceRetval", "Placeholder", "PlaceholderWithDefault", "StopGradient", "PreventGradient",
        "Snapshot",
    }
)  # fmt: skip
#: Ops whose presence marks the step function: collectives and the transfers between devices.
COLLECTIVE_PREFIX = "Collective"
TRANSFER_OPS = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})
#: How a node names an input: "^name" for a control edge, "name:port" for an output other than 0.
CONTROL_PREFIX = "^"
#: ``/job:J/replica:R/task:T/device:TYPE:N`` (the short ``/cpu:0`` form has no job or task).
_DEVICE = re.compile(
    r"^/job:(?P<job>[^/]+)/replica:(?P<replica>\d+)/task:(?P<task>\d+)/device:(?P<type>[^:]+):(?P<index>\d+)$"
)

#: Bytes per element of TensorFlow's DataType values (tensorflow/core/framework/types.proto).
DTYPE_BYTES = {
    1: 4,  # DT_FLOAT
    2: 8,  # DT_DOUBLE
    3: 4,  # DT_INT32
    4: 1,  # DT_UINT8
    5: 2,  # DT_INT16
    6: 1,  # DT_INT8
    8: 8,  # DT_COMPLEX64
    9: 8,  # DT_INT64
    10: 1,  # DT_BOOL
    14: 2,  # DT_BFLOAT16
    17: 2,  # DT_UINT16
    18: 16,  # DT_COMPLEX128
    19: 2,  # DT_HALF
    22: 4,  # DT_UINT32
    23: 8,  # DT_UINT64
    24: 1,  # DT_FLOAT8_E5M2
    25: 1,  # DT_FLOAT8_E4M3FN
}
#: A reference type is its base type + 100 (DT_FLOAT_REF = 101).
REF_OFFSET = 100


@dataclass(frozen=True, order=True)
class Device:
    """A TensorFlow device, ordered worker-major, device-minor."""

    job: str
    task: int
    kind: str
    index: int
    name: str

    @staticmethod
    def parse(name: str) -> Device:
        match = _DEVICE.match(name)
        if match is None:
            return Device("", 0, name, 0, name)
        return Device(match["job"], int(match["task"]), match["type"], int(match["index"]), name)


def rank_order(devices: list[str]) -> list[str]:
    """``devices`` in rank order: worker-major (job, task), device-minor (type, index).

    >>> rank_order(["/job:worker/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:1",
    ...             "/job:worker/replica:0/task:0/device:CPU:0"])[0]
    '/job:worker/replica:0/task:0/device:CPU:0'
    """
    return [d.name for d in sorted(Device.parse(name) for name in devices)]


def input_name(text: str) -> tuple[str, int, bool]:
    """A NodeDef input as (node, output port, is a control edge).

    >>> input_name("^init"), input_name("split:1"), input_name("x")
    (('init', 0, True), ('split', 1, False), ('x', 0, False))
    """
    if text.startswith(CONTROL_PREFIX):
        return text[1:], 0, True
    node, _, port = text.rpartition(":")
    if node and port.isdigit():
        return node, int(port), False
    return text, 0, False


def tensor_elements(dims: list[int] | None) -> int | None:
    """Elements of a shape, ``None`` when a dimension is unknown.

    >>> tensor_elements([32, 64]), tensor_elements([]), tensor_elements([-1, 4]), tensor_elements(None)
    (2048, 1, None, None)
    """
    if dims is None or (dims and min(dims) < 0):
        return None
    return math.prod(dims)


def const_int(node: NodeDef) -> int | None:
    """The integer a scalar ``Const`` holds (a collective's ``group_size`` or ``group_key``)."""
    if node.op != "Const" or "value" not in node.attr:
        return None
    tensor = node.attr["value"].tensor
    if tensor.int_val:
        return int(tensor.int_val[0])
    if tensor.int64_val:
        return int(tensor.int64_val[0])
    if tensor.tensor_content and len(tensor.tensor_content) in (4, 8):
        return int.from_bytes(tensor.tensor_content, "little", signed=True)
    return 0  # proto3 leaves a zero out


def protobuf_fault(message: Message, data: bytes, refused: ValueError) -> str:
    """Why protobuf's parser refuses ``data`` as a ``message`` (the C readers accept what it accepts
    in the fields they read, and name less well), else what the C reader said (``refused``)."""
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        return str(exc)
    return str(refused)
