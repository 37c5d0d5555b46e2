"""The compiled parts: the node table's record decoder (``src/chakra/_columns.c``, see chakra/table.py), the
producers' node encoder (``src/chakra/_encode.c``, see chakra/wire.py) and the anonymizer's rewriter and leakage
search (``src/chakra/share/_native.c``, see chakra/share/rules.py), all three reading or writing the wire format
through ``src/chakra/_wire.h``; the host trace's record splitter (``src/chakra/_host_record.c``, see
chakra/pytorch/host.py); the passes over a Kineto trace's events (``src/chakra/_kineto_events.c``, see
chakra/pytorch/kineto.py) and over a conversion's items (``src/chakra/_items.c``, see
chakra/pytorch/waits.py; ``src/chakra/_item_scans.c``, which of them a pass looks at), all through
``src/chakra/_slots.h``; and the JSON scanner that finds a file's big array a piece at a time
(``src/chakra/_json_scan.c``, see chakra/pytorch/jsonfile.py); and a profiler XSpace's host plane read
from its wire bytes (``src/chakra/_xplane.c``, through ``_wire.h``, see chakra/tensorflow/profile.py).

Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

WIRE = "src/chakra/_wire.h"
SLOTS = "src/chakra/_slots.h"
NATIVE = [
    "src/chakra/share/_native.c",
    "src/chakra/share/_fingerprints.c",
    "src/chakra/share/_rewrite.c",
    "src/chakra/share/_rewrite_attrs.c",
]

setup(
    ext_modules=[
        Extension("chakra._columns", sources=["src/chakra/_columns.c"], depends=[WIRE], extra_compile_args=["-O2"]),
        Extension(
            "chakra._encode",
            sources=["src/chakra/_encode.c", "src/chakra/_encode_columns.c", "src/chakra/_json_repr.c"],
            depends=[WIRE, SLOTS, "src/chakra/_encode.h", "src/chakra/_json_repr.h"],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "chakra._host_record",
            sources=["src/chakra/_host_record.c", "src/chakra/_host_json.c", "src/chakra/_host_scan.c"],
            depends=[SLOTS, "src/chakra/_host_record.h", "src/chakra/_text_cache.h"],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "chakra._kineto_events",
            sources=["src/chakra/_kineto_events.c"],
            depends=[SLOTS],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "chakra._kineto_view", sources=["src/chakra/_kineto_view.c"], depends=[SLOTS], extra_compile_args=["-O2"]
        ),
        Extension("chakra._link_join", sources=["src/chakra/_link_join.c"], depends=[SLOTS], extra_compile_args=["-O2"]),
        Extension("chakra._items", sources=["src/chakra/_items.c"], depends=[SLOTS], extra_compile_args=["-O2"]),
        Extension(
            "chakra._item_scans", sources=["src/chakra/_item_scans.c"], depends=[SLOTS], extra_compile_args=["-O2"]
        ),
        Extension("chakra._parts", sources=["src/chakra/_parts.c"], depends=[SLOTS], extra_compile_args=["-O2"]),
        Extension(
            "chakra._item_passes", sources=["src/chakra/_item_passes.c"], depends=[SLOTS], extra_compile_args=["-O2"]
        ),
        Extension("chakra._json_scan", sources=["src/chakra/_json_scan.c"], extra_compile_args=["-O2"]),
        Extension(
            "chakra._dot", sources=["src/chakra/_dot.c"], depends=["src/chakra/_text_cache.h"], extra_compile_args=["-O2"]
        ),
        Extension(
            "chakra._xplane",
            sources=["src/chakra/_xplane.c"],
            depends=[WIRE, "src/chakra/_op_rows.h"],
            extra_compile_args=["-O2"],
        ),
        Extension(
            "chakra._op_rows", sources=["src/chakra/_op_rows.c"], depends=["src/chakra/_op_rows.h"], extra_compile_args=["-O2"]
        ),
        Extension("chakra._tf_graph", sources=["src/chakra/_tf_graph.c"], depends=[WIRE], extra_compile_args=["-O2"]),
        Extension("chakra._fold_order", sources=["src/chakra/_fold_order.c"], extra_compile_args=["-O2"]),
        Extension("chakra._kahn", sources=["src/chakra/_kahn.c"], extra_compile_args=["-O2"]),
        Extension(
            "chakra.share._native",
            sources=NATIVE,
            depends=[WIRE, "src/chakra/share/_native.h", "src/chakra/share/_rewrite.h"],
            extra_compile_args=["-O2"],
        ),
    ]
)
