"""An 8-rank all-reduce workload written the way scripts for upstream Chakra write ETs.

It uses only the upstream import paths (``chakra.schema.protobuf.et_def_pb2`` and
``chakra.src.third_party.utils.protolib``), so it runs unchanged against either package.
Usage: python upstream_style_allreduce.py [OUTPUT_DIR] [--npus 8] [--size BYTES]
"""

import argparse
import os

from chakra.schema.protobuf.et_def_pb2 import ALL_REDUCE, COMM_COLL_NODE, COMP_NODE, GlobalMetadata
from chakra.schema.protobuf.et_def_pb2 import AttributeProto as ChakraAttr
from chakra.schema.protobuf.et_def_pb2 import Node as ChakraNode
from chakra.src.third_party.utils.protolib import encodeMessage as encode_message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", nargs="?", default=".")
    parser.add_argument("--npus", type=int, default=8)
    parser.add_argument("--size", type=int, default=1 << 20, help="all-reduce size in bytes")
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)

    for npu in range(args.npus):
        with open(os.path.join(args.output_dir, f"all_reduce.{npu}.et"), "wb") as et:
            encode_message(et, GlobalMetadata(version="0.0.4"))

            compute = ChakraNode(id=1, name="gradient_compute", type=COMP_NODE, duration_micros=100)
            compute.attr.append(ChakraAttr(name="is_cpu_op", bool_val=False))
            encode_message(et, compute)

            allreduce = ChakraNode(id=2, name=f"all_reduce_{args.npus}npus", type=COMM_COLL_NODE)
            allreduce.data_deps.append(compute.id)
            allreduce.attr.append(ChakraAttr(name="is_cpu_op", bool_val=False))
            allreduce.attr.append(ChakraAttr(name="comm_type", int64_val=ALL_REDUCE))
            allreduce.attr.append(ChakraAttr(name="comm_size", int64_val=args.size))
            encode_message(et, allreduce)


if __name__ == "__main__":
    main()
