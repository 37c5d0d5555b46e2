"""Commands named and flagged like upstream Chakra's, for scripts that call them.

* ``chakra_jsonizer --input_filename X --output_filename Y`` writes the same text as upstream
  (each message's proto3 JSON, back to back);
* ``chakra_trace_link --rank R --chakra-host-trace H --chakra-device-trace D --output-file O``
  writes the linked JSON upstream's linker writes, without HolisticTraceAnalysis or PARAM;
* ``chakra_converter [--log-filename F] PyTorch --input LINKED --output OUT.et [--simulate]``
  converts it (or a host trace alone) with :func:`chakra.pytorch.convert.convert`;
  ``chakra_converter [--log-filename F] Text --input WORKLOAD.txt --output PREFIX --num-npus N
  --num-passes N`` converts an ASTRA-sim text workload with :func:`chakra.text.convert_text`;
  ``chakra_converter FlexFlow --input_filename GRAPH --output_filename PREFIX [--npu_frequency MHZ
  --num_dims N]`` (upstream's ``et_converter --input_type FlexFlow`` flags) converts a FlexFlow task
  graph with :func:`chakra.flexflow.convert_flexflow`, reading the labelled form's times as seconds as
  upstream did and writing µs, not cycles.
* ``chakra_timeline_visualizer --input_filename LOG --output_filename OUT.json --num_npus N
  --npu_frequency MHZ`` draws a simulator's issue/callback log with :mod:`chakra.viz.astra_log`
  (times in µs where upstream writes ms; ``1.5GHz`` accepted; any node name).
* ``chakra_visualizer --input_filename X.et --output_filename Y.{dot,gv,graphml,svg,pdf,png}
  [--max_nodes N]`` draws the dependency graph with :func:`chakra.viz.graph.export_graph`
  (the first ``DEFAULT_MAX_NODES`` nodes unless ``--max_nodes 0``).
* ``chakra_generator [--num_npus 64 --default_runtime 5 --default_tensor_size 1024
  --default_comm_size 65536 --output_dir .]`` writes upstream's microbenchmark families with
  :mod:`chakra.generate.micro` (peers on send/recv; ids from 0 in every file).

Bad input gives one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import NoReturn

from chakra import jsonize as jsonize_lib
from chakra.cli.console import EXIT_BAD_INPUT
from chakra.errors import ChakraError


def _refuse(prog: str, error: ChakraError | str) -> NoReturn:
    """Bad input, in the upstream tools' argparse style: ``PROG: error: ...`` and exit code 2."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)


def jsonizer_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_jsonizer``."""
    parser = argparse.ArgumentParser(
        prog="chakra_jsonizer",
        description="Convert a Chakra .et file to JSON, exactly as upstream chakra_jsonizer writes it. "
        "Example: chakra_jsonizer --input_filename llama.0.et --output_filename llama.0.json",
    )
    parser.add_argument("--input_filename", required=True, help="input .et file")
    parser.add_argument("--output_filename", required=True, help="output JSON file")
    args = parser.parse_args(argv)
    try:
        jsonize_lib.jsonize(args.input_filename, args.output_filename, upstream=True)
    except ChakraError as error:
        _refuse("chakra_jsonizer", error)


if __name__ == "__main__":
    jsonizer_main()


def trace_link_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_trace_link``: host + Kineto trace -> linked JSON (no HTA, no PARAM)."""
    parser = argparse.ArgumentParser(
        prog="chakra_trace_link",
        description="Link a PyTorch host execution trace with its Kineto trace into one JSON file. Example: "
        "chakra_trace_link --rank 0 --chakra-host-trace host.0.json --chakra-device-trace device.0.json "
        "--output-file linked.0.json",
    )
    parser.add_argument("--rank", type=int, required=True, help="rank of the traces (kept for upstream scripts)")
    parser.add_argument("--chakra-host-trace", required=True, help="host execution trace (JSON or .gz)")
    parser.add_argument("--chakra-device-trace", required=True, help="Kineto trace (JSON or .gz)")
    parser.add_argument("--output-file", required=True, help="linked JSON to write")
    parser.add_argument("--log-level", default="INFO", help="INFO prints the link report; WARNING and up only problems")
    args = parser.parse_args(argv)
    from chakra.pytorch.host import load_host_trace
    from chakra.pytorch.kineto import load_kineto_trace
    from chakra.pytorch.link import link
    from chakra.pytorch.linked_json import write_linked_json

    try:
        device = load_kineto_trace(args.chakra_device_trace)
        if not device.distributed_info.get("rank"):
            device.distributed_info.setdefault("rank", args.rank)
        linked = link(load_host_trace(args.chakra_host_trace), device)
        count = write_linked_json(linked, args.output_file)
    except ChakraError as error:
        _refuse("chakra_trace_link", error)
    report = linked.report
    if args.log_level.upper() in ("DEBUG", "INFO"):
        print(
            f"chakra_trace_link: {report.host_matched:,} of {report.host_ops:,} host ops timed "
            f"(by {report.join_key}), {report.device_attached:,} of {report.device_activities:,} device "
            f"activities attached; wrote {count:,} nodes to {args.output_file}",
            file=sys.stderr,
        )
    for reason, n in list(report.host_unmatched.items()) + list(report.device_unattached.items()):
        print(f"chakra_trace_link: {n:,} not joined: {reason}", file=sys.stderr)


def _write_log(path: str | None, report: dict[str, object]) -> None:
    """``--log-filename``: the conversion report as JSON."""
    if path:
        with open(path, "w") as log:
            json.dump(report, log, indent=1)


def _text_converter(args: argparse.Namespace) -> None:
    """``chakra_converter Text``: :func:`chakra.text.convert_text`, the report to ``--log-filename``."""
    from chakra.text import convert_text

    try:
        conversion = convert_text(
            args.input,
            args.output,
            num_npus=args.num_npus,
            num_passes=args.num_passes,
            model_parallel_size=args.model_parallel_size,
        )
        _write_log(args.log_filename, conversion.to_dict())
    except (ChakraError, OSError) as error:
        _refuse("chakra_converter", str(error))
    _tell_converted(
        f"wrote {conversion.num_npus} files {args.output}.{{npu}}.et ({conversion.nodes_per_rank:,} nodes each)",
        conversion.notes,
    )


def _tell_converted(wrote: str, notes: list[str]) -> None:
    """What ``chakra_converter`` wrote and the notes of the conversion, on stderr."""
    print(f"chakra_converter: {wrote}", file=sys.stderr)
    for note in notes:
        print(f"chakra_converter: note: {note}", file=sys.stderr)


#: How upstream read the labelled FlexFlow form's times (as seconds, then x MHz x 1e6 into cycles).
UPSTREAM_FLEXFLOW_TIME_UNIT = "s"


def _flexflow_converter(args: argparse.Namespace) -> None:
    """``chakra_converter FlexFlow``: :func:`chakra.flexflow.convert_flexflow` with upstream's flags."""
    from chakra.flexflow import convert_flexflow

    try:
        result = convert_flexflow(
            args.input, args.output, strategy=args.strategy, compgraph=args.compgraph, time_unit=args.time_unit,
            num_devices=args.num_npus,
        )  # fmt: skip
        _write_log(args.log_filename, result.to_dict())
    except (ChakraError, OSError) as error:
        _refuse("chakra_converter", str(error))
    frequency = (
        ["durations are written in µs (duration_micros; upstream wrote seconds x --npu_frequency MHz x 1e6 "
         "cycles there): --npu_frequency is not needed"]
        if args.npu_frequency is not None
        else []
    )  # fmt: skip
    conversion = result.conversion
    _tell_converted(
        f"wrote {len(result.written.paths)} files {args.output}.{{npu}}.et ({conversion.nodes:,} nodes, "
        f"{conversion.transfers:,} transfers)",
        frequency + conversion.notes,
    )


def converter_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_converter``: ``PyTorch --input LINKED.json --output OUT.et``."""
    parser = argparse.ArgumentParser(
        prog="chakra_converter",
        description="Convert traces to Chakra ETs. Example: chakra_converter PyTorch --input linked.0.json "
        "--output chakra_trace.0.et",
    )
    parser.add_argument("--log-filename", default=None, help="write the conversion report (JSON) here")
    sub = parser.add_subparsers(dest="format", required=True)
    pytorch = sub.add_parser("PyTorch", help="linked JSON from chakra_trace_link (or a host trace alone) -> .et")
    pytorch.add_argument("--input", required=True, help="linked JSON (or a host execution trace: host-only)")
    pytorch.add_argument("--output", required=True, help="the .et file to write")
    pytorch.add_argument("--simulate", action="store_true", help="replay the result and print its predicted span")
    text = sub.add_parser("Text", help="ASTRA-sim text workload -> OUTPUT.{npu}.et for every NPU")
    text.add_argument("--input", required=True, help="the text workload")
    text.add_argument("--output", required=True, help="output prefix: writes OUTPUT.{npu}.et")
    text.add_argument("--num-npus", type=int, required=True, help="number of NPUs (one file each)")
    text.add_argument("--num-passes", type=int, default=1, help="training steps, one after the other")
    text.add_argument("--model-parallel-size", type=int, default=None, help="NPUs in the first network dimension")
    flexflow = sub.add_parser(
        "FlexFlow", help="a FlexFlow task graph (FlexFlow's, or upstream's labelled one) -> OUTPUT.{npu}.et"
    )
    flexflow.add_argument("--input", "--input_filename", dest="input", required=True, help="the task graph (.dot)")
    flexflow.add_argument("--output", "--output_filename", dest="output", required=True, help="output prefix")
    flexflow.add_argument("--strategy", default=None, help="FlexFlow's --export-strategy file (FlexFlow's form)")
    flexflow.add_argument("--compgraph", default=None, help="FlexFlow's --compgraph file (devices and bytes)")
    flexflow.add_argument(
        "--time-unit", default=UPSTREAM_FLEXFLOW_TIME_UNIT, choices=("ms", "s", "us"),
        help="unit of the labelled form's times (default s, as upstream read them; FlexFlow's simulator writes ms)",
    )  # fmt: skip
    flexflow.add_argument("--num-npus", "--num_npus", dest="num_npus", type=int, default=None, help="devices")
    flexflow.add_argument(
        "--npu-frequency", "--npu_frequency", dest="npu_frequency", type=int, default=None,
        help="accepted for upstream's command lines; not needed (durations are written in µs)",
    )  # fmt: skip
    flexflow.add_argument(
        "--num-dims", "--num_dims", dest="num_dims", type=int, default=None,
        help="accepted for upstream's command lines; unused (upstream ignored it too)",
    )  # fmt: skip
    # upstream's spelling; SUPPRESS: no default of its own, so --log-filename before FlexFlow still counts
    flexflow.add_argument("--log_filename", dest="log_filename", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.format == "Text":
        _text_converter(args)
        return
    if args.format == "FlexFlow":
        _flexflow_converter(args)
        return
    from chakra.pytorch.convert import convert_linked_file
    from chakra.schedule.rank import schedule_nodes

    try:
        conversion = convert_linked_file(args.input)
        conversion.write(args.output)
        _write_log(args.log_filename, conversion.report.to_dict())
    except (ChakraError, OSError) as error:
        _refuse("chakra_converter", str(error))
    report = conversion.report
    print(f"chakra_converter: wrote {report.node_count:,} nodes ({report.mode}) to {args.output}", file=sys.stderr)
    print(
        "chakra_converter: the file records what ran; for ASTRA-sim, which refuses some of it (METADATA nodes, "
        f"barriers, ...), adapt it: chakra adapt {args.output} -o OUT --target astra-sim",
        file=sys.stderr,
    )
    if args.simulate:
        result = schedule_nodes(conversion.nodes)
        measured = "" if result.measured_span_us is None else f", measured {result.measured_span_us:,.0f} µs"
        print(f"chakra_converter: simulated span {result.predicted_span_us:,.0f} µs{measured}", file=sys.stderr)


def timeline_visualizer_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_timeline_visualizer``: simulator issue/callback log -> Chrome trace JSON (µs)."""
    prog = "chakra_timeline_visualizer"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Draw the issue/callback lines of a simulator log (ASTRA-sim with trace-enabled) as a "
        "Chrome/Perfetto trace, in microseconds. Example: chakra_timeline_visualizer --input_filename "
        "astra.log --output_filename timeline.json --num_npus 8 --npu_frequency 1.5GHz",
    )
    parser.add_argument("--input_filename", required=True, help="simulator log with issue,... / callback,... lines")
    parser.add_argument("--output_filename", required=True, help="Chrome trace JSON to write")
    parser.add_argument("--num_npus", type=int, required=True, help="number of NPUs of the run")
    parser.add_argument("--npu_frequency", required=True, help="cycles per µs: MHz (1500) or with a unit (1.5GHz)")
    parser.add_argument("--log_filename", default=None, help="also write the command and its report to this file")
    args = parser.parse_args(argv)
    from chakra.errors import ChakraInputError
    from chakra.viz.astra_log import parse_frequency_mhz, parse_log, write_log_timeline

    try:
        if args.num_npus <= 0:
            raise ChakraInputError(f"--num_npus must be positive, not {args.num_npus}")
        mhz = parse_frequency_mhz(args.npu_frequency)
        log = parse_log(args.input_filename, num_npus=args.num_npus)
        count = write_log_timeline(log, args.output_filename, mhz, num_npus=args.num_npus)
        report = [f"{prog}: wrote {count:,} events of {len(log.npus)} NPUs at {mhz:g} MHz to {args.output_filename}"]
        if log.unmatched_issues or log.unmatched_callbacks:
            report.append(
                f"{prog}: not drawn: {log.unmatched_issues:,} issues without callback, "
                f"{log.unmatched_callbacks:,} callbacks without issue"
            )
        if args.log_filename:
            with open(args.log_filename, "w") as debug_log:
                debug_log.write("\n".join([" ".join(sys.argv), *report]) + "\n")
    except (ChakraError, OSError) as error:
        _refuse(prog, str(error))
    for line in report:
        print(line, file=sys.stderr)


def visualizer_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_visualizer``: ``--input_filename X.et --output_filename Y.{dot,pdf,graphml,...}``."""
    from chakra.viz import graph

    parser = argparse.ArgumentParser(
        prog="chakra_visualizer",
        description="Draw the dependency graph of a Chakra .et file; the format comes from the output suffix "
        f"({', '.join(graph.GRAPH_SUFFIXES)}). Example: chakra_visualizer --input_filename llama.0.et "
        "--output_filename llama.0.pdf",
    )
    parser.add_argument("--input_filename", required=True, help="input .et file")
    parser.add_argument("--output_filename", required=True, help="output .dot, .gv, .graphml, .svg, .pdf or .png")
    parser.add_argument(
        "--max_nodes",
        type=int,
        default=graph.DEFAULT_MAX_NODES,
        help=f"draw the first N nodes in dependency order (default {graph.DEFAULT_MAX_NODES}; 0: every node)",
    )
    args = parser.parse_args(argv)
    from chakra.table import load_table

    try:
        table = load_table(args.input_filename)
        view = graph.export_graph(table, args.output_filename, max_nodes=args.max_nodes or None)
    except ChakraError as error:
        _refuse("chakra_visualizer", error)
    print(
        f"chakra_visualizer: wrote {len(view.positions):,} nodes, {len(view.edges):,} edges to {args.output_filename}",
        file=sys.stderr,
    )
    for note in view.notes:
        print(f"chakra_visualizer: note: {note}", file=sys.stderr)


def generator_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_generator``: upstream's 14 microbenchmark families, one file per NPU."""
    from chakra.generate import micro

    prog = "chakra_generator"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Write upstream chakra_generator's microbenchmark ETs (<family>.<npu>.et) into the current "
        "directory, with peers on send/recv and every attribute ASTRA-sim reads. Example: chakra_generator "
        "--num_npus 8 --default_comm_size 1048576",
    )
    parser.add_argument(
        "--num_npus", type=int, default=micro.DEFAULT_NUM_NPUS, help="number of NPUs (files per family)"
    )
    parser.add_argument("--default_runtime", type=int, default=micro.DEFAULT_RUNTIME_US, help="compute time in µs")
    parser.add_argument(
        "--default_tensor_size", type=int, default=micro.DEFAULT_TENSOR_SIZE_BYTES, help="tensor size in bytes"
    )
    parser.add_argument(
        "--default_comm_size", type=int, default=micro.DEFAULT_COMM_SIZE_BYTES, help="communication size in bytes"
    )
    parser.add_argument("--output_dir", default=".", help="where to write (default: the current directory)")
    args = parser.parse_args(argv)
    try:
        params = micro.MicroParams(
            num_npus=args.num_npus,
            runtime_us=args.default_runtime,
            tensor_size_bytes=args.default_tensor_size,
            comm_size_bytes=args.default_comm_size,
        )
        written = micro.generate(args.output_dir, micro.UPSTREAM_FAMILIES, params)
    except ChakraError as error:
        _refuse(prog, error)
    files = sum(len(item.paths) for item in written)
    print(
        f"{prog}: wrote {len(written)} families x {args.num_npus} NPUs ({files} files) to {args.output_dir}",
        file=sys.stderr,
    )
    for item in written:
        for note in item.workload.notes:
            print(f"{prog}: note: {item.workload.name}: {note}", file=sys.stderr)
        for path in item.removed_stale:
            print(f"{prog}: removed {path} (an earlier run with more NPUs)", file=sys.stderr)
