"""Regenerate the checked-in protobuf modules (and their ``.pyi``): ``schema/protobuf/et_def_pb2.py``
from ``et_def.proto`` (the Chakra format) and ``schema/xla/hlo_subset_pb2.py`` from
``hlo_subset.proto`` (the part of XLA's HloModuleProto the XLA front end reads) and
``schema/tensorflow/tf_subset_pb2.py`` from ``tf_subset.proto`` (the TensorFlow front end's part
of RunMetadata, GraphDef and the profiler's XSpace) and ``schema/flexflow/strategy_pb2.py`` from
``strategy.proto`` (FlexFlow's protobuf strategy file).

Run with ``make proto`` (needs the ``dev`` extra, which brings grpcio-tools).

protoc stamps generated modules with a check that refuses to import under an older protobuf
runtime than the one it was generated for. That check is the most common way upstream Chakra
installs break (generated code and runtime from different protobuf releases), and the module
uses nothing beyond the ``builder`` API that every protobuf since 3.20 has, so the script strips
the check. The committed module therefore imports under any protobuf the package declares.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCHEMA = Path(__file__).resolve().parent.parent / "src" / "chakra" / "schema"
#: Each proto and the folder it lives (and its module is written) in.
PROTOS = (
    (SCHEMA / "protobuf", "et_def.proto"),
    (SCHEMA / "xla", "hlo_subset.proto"),
    (SCHEMA / "tensorflow", "tf_subset.proto"),
    (SCHEMA / "flexflow", "strategy.proto"),
)

_VERSION_CHECK = re.compile(
    r"^from google\.protobuf import runtime_version as _runtime_version\n"
    r"|^_runtime_version\.ValidateProtobufRuntimeVersion\(\n(?:.*\n)*?\)\n",
    re.MULTILINE,
)


def main() -> int:
    for folder, proto in PROTOS:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{folder}",
                f"--python_out={folder}",
                f"--pyi_out={folder}",
                str(folder / proto),
            ],
            check=True,
        )
        module = folder / proto.replace(".proto", "_pb2.py")
        text = _VERSION_CHECK.sub("", module.read_text())
        text = text.replace(
            "# NO CHECKED-IN PROTOBUF GENCODE\n",
            "# Checked in on purpose; regenerate with scripts/gen_proto.py (runtime version check removed).\n",
        )
        module.write_text(text)
        print(f"wrote {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
