"""Record TensorFlow training steps for the TensorFlow front end: the graphs that ran and a profile.

:func:`collect_tensorflow` is a context manager around the steps of one worker. Entered before the step
function's first call, it turns on TensorFlow's graph collection and run metadata (so that the
function's graphs, after Grappler and partitioning, one per device, are kept) and the profiler;
on exit it writes ``OUT/run_metadata.pb`` (what ``chakra convert tensorflow`` reads) and
``OUT/profile/`` (the profiler's ``*.xplane.pb``). Run several steps inside: the converter takes a
whole one of median span, since the first step traces and optimizes the function and the steps
at the edges of the profiling window can be cut.

The partition graphs TensorFlow keeps carry no shapes; on exit each one is imported into a
``tf.Graph`` (TensorFlow's own shape inference) and every node gets the ``_output_shapes``
attribute it computes, where known statically. Sizes known only at run time (the padded data of
``ReplicaContext.all_gather``, a batch of unknown size) stay unknown and the converter reports
them.

A multi-worker job runs one ``collect_tensorflow`` per worker process, each into its own folder
(``OUT/worker{task}``); the converter reads them together.

Example:
    with collect_tensorflow("out/worker0"):
        for _ in range(6):
            step(next(iterator))
    # chakra convert tensorflow out/worker0 -o out/et/step --check
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chakra.errors import ChakraInputError, PathLike
from chakra.io.writer import AtomicFile

#: What the collector names its files inside the worker's folder.
RUN_METADATA = "run_metadata.pb"
PROFILE_FOLDER = "profile"
#: The attribute TensorFlow itself writes for inferred shapes (GraphOptions.infer_shapes).
OUTPUT_SHAPES = "_output_shapes"


@dataclass
class CollectedRun:
    """What :func:`collect_tensorflow` wrote (filled in on exit): the run metadata, the profile folder, the
    function graphs kept and the nodes whose shapes TensorFlow could not infer statically."""

    run_metadata: Path
    profile: Path
    function_graphs: int = 0
    unshaped_nodes: int = 0


@contextmanager
def collect_tensorflow(out: PathLike) -> Iterator[CollectedRun]:
    """Record the graphs and a profile of the TensorFlow work done inside the block into ``out``."""
    import tensorflow as tf  # the caller runs TensorFlow already; importing this module needs none
    from tensorflow.python.eager import context

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    run = CollectedRun(folder / RUN_METADATA, folder / PROFILE_FOLDER)
    eager = context.context()
    eager.enable_graph_collection()
    eager.enable_run_metadata()
    tf.profiler.experimental.start(str(run.profile))
    try:
        yield run
    finally:
        tf.profiler.experimental.stop()
        metadata = eager.export_run_metadata()
        eager.disable_run_metadata()
        eager.disable_graph_collection()
    if metadata is None or not metadata.function_graphs:
        raise ChakraInputError(
            "no function graphs were recorded",
            path=folder,
            hint="enter collect_tensorflow() before the first call of the tf.function (its graphs are kept when "
            "it is built)",
        )
    run.function_graphs = len(metadata.function_graphs)
    run.unshaped_nodes = sum(
        _annotate_shapes(graph) for fg in metadata.function_graphs for graph in fg.partition_graphs
    )
    with AtomicFile(run.run_metadata) as file:
        file.write(metadata.SerializeToString())


def _annotate_shapes(graph: Any) -> int:
    """Give every node of ``graph`` (a ``tensorflow.GraphDef``) the ``_output_shapes`` TensorFlow
    infers for it; returns how many nodes have an output of unknown shape."""
    import tensorflow as tf

    imported = tf.Graph()
    try:
        with imported.as_default():
            tf.graph_util.import_graph_def(graph, name="")
    except (ValueError, tf.errors.OpError):  # an op TensorFlow cannot import here: no shapes
        return len(graph.node)
    unknown = 0
    for node in graph.node:
        outputs = imported.get_operation_by_name(node.name).outputs
        if any(not output.shape.is_fully_defined() for output in outputs):
            unknown += 1
        if OUTPUT_SHAPES in node.attr:
            continue
        shapes = node.attr[OUTPUT_SHAPES].list.shape
        for output in outputs:
            shapes.add().CopyFrom(output.shape.as_proto())
    return unknown
