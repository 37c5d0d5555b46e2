"""Workload specs for ``chakra generate llm``: spec files, overrides and the one-line refusals of
bad input (``chakra.generate.spec_input``, ``chakra.generate.specs.check_spec``)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from helpers import assert_one_line_error, run_cli

from chakra import io
from chakra.errors import ChakraInputError
from chakra.generate.spec_input import DEFAULT_HARDWARE, load_spec, resolve_spec, spec_from_mapping
from chakra.generate.specs import HARDWARE_PRESETS, PRESETS, ParallelSpec, WorkloadSpec, check_spec
from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE

#: A spec small enough that the CLI writes it in well under a second.
SMALL_SPEC = "model: {preset: llama3-8b, layers: 4, seq_len: 512}\nparallel: {tp: 2, pp: 2}\n"


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def generate_from(tmp_path: Path, spec_text: str, *options: str, name: str = "spec.yaml"):
    spec = write_spec(tmp_path, spec_text, name)
    return run_cli("generate", "llm", "--spec", str(spec), *options, "-o", str(tmp_path / "w"))


# ---- reading spec files ---------------------------------------------------------------------------
def test_a_yaml_spec_file_sets_model_parallelism_and_hardware(tmp_path: Path):
    path = write_spec(
        tmp_path,
        "model: {preset: llama3-8b, layers: 4}\nparallel: {tp: 2, pp: 2, schedule: gpipe}\n"
        "hardware: a100\nglobal_batch: 4\n",
    )
    spec = load_spec(path)
    assert (spec.model.layers, spec.parallel.pp, spec.parallel.schedule, spec.hardware.name) == (4, 2, "gpipe", "a100")
    assert spec.micro_batches == 4


def test_a_json_spec_file_reads_like_the_yaml_one(tmp_path: Path):
    path = write_spec(tmp_path, json.dumps({"model": "llama3-8b", "parallel": {"tp": 2}}), "spec.json")
    assert load_spec(path) == WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(tp=2))


def test_a_model_preset_mapping_keeps_the_preset_fields_it_does_not_change():
    spec = spec_from_mapping({"model": {"preset": "llama3-70b", "seq_len": 4096}})
    assert spec.model == dataclasses.replace(PRESETS["llama3-70b"], seq_len=4096)


def test_a_model_mapping_without_a_preset_is_called_custom():
    model = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": 256, "vocab": 100, "seq_len": 32}
    assert spec_from_mapping({"model": model}).model.name == "custom"


def test_a_model_mapping_without_a_preset_names_the_sizes_it_lacks():
    with pytest.raises(ChakraInputError, match="model has no heads, kv_heads, ffn, vocab, seq_len"):
        spec_from_mapping({"model": {"layers": 2, "hidden": 64}})


def test_exponent_numbers_in_yaml_are_numbers_as_in_yaml_1_2(tmp_path: Path):
    hardware = "hardware: {name: x, peak_flops: 989e12, mem_bw_bytes_per_s: 3.35e12}\n"
    path = write_spec(tmp_path, "model: llama3-8b\n" + hardware)
    hardware = load_spec(path).hardware
    assert hardware is not None and (hardware.peak_flops, hardware.mem_bw_bytes_per_s) == (989e12, 3.35e12)


def test_a_quoted_number_is_text_and_refused_with_the_unquoted_spelling():
    with pytest.raises(ChakraInputError, match=r"parallel.tp = '2' is text, not an integer \(hint: write 2, without"):
        spec_from_mapping({"model": "llama3-8b", "parallel": {"tp": "2"}})


def test_an_integer_is_not_read_as_true():
    with pytest.raises(ChakraInputError, match=re.escape("parallel.sp = 1 is an integer, not true or false")):
        spec_from_mapping({"model": "llama3-8b", "parallel": {"sp": 1}})


# ---- resolve_spec: presets, spec files and overrides ----------------------------------------------
def test_resolve_spec_applies_overrides_to_a_preset():
    spec = resolve_spec("llama3-8b", overrides={"parallel.tp": 2, "model.seq_len": 1024, "global_batch": 8})
    model = dataclasses.replace(PRESETS["llama3-8b"], seq_len=1024)
    assert spec == WorkloadSpec(model, ParallelSpec(tp=2), HARDWARE_PRESETS[DEFAULT_HARDWARE], global_batch=8)


def test_resolve_spec_overrides_win_over_the_spec_file(tmp_path: Path):
    path = write_spec(tmp_path, SMALL_SPEC + "hardware: a100\n")
    spec = resolve_spec(spec_path=path, overrides={"parallel.pp": 1, "parallel.dp": 2, "hardware": "b200"})
    assert (spec.parallel.tp, spec.parallel.pp, spec.parallel.dp, spec.hardware) == (2, 1, 2, HARDWARE_PRESETS["b200"])


def test_resolve_spec_keeps_the_hardware_of_the_spec_file(tmp_path: Path):
    spec = resolve_spec(spec_path=write_spec(tmp_path, SMALL_SPEC + "hardware: a100\n"))
    assert spec.hardware == HARDWARE_PRESETS["a100"]


def test_resolve_spec_uses_the_default_hardware_when_none_is_named(tmp_path: Path):
    spec = resolve_spec(spec_path=write_spec(tmp_path, SMALL_SPEC))
    assert spec.hardware == HARDWARE_PRESETS[DEFAULT_HARDWARE]


@pytest.mark.parametrize(("hardware", "durations"), [("hardware: a100\n", False), ("hardware: null\n", True)])
def test_no_durations_and_a_null_hardware_leave_the_hardware_out(tmp_path: Path, hardware: str, durations: bool):
    path = write_spec(tmp_path, SMALL_SPEC + hardware)
    assert resolve_spec(spec_path=path, durations=durations).hardware is None


def test_an_override_can_change_one_field_of_the_hardware():
    spec = resolve_spec("llama3-8b", overrides={"hardware.peak_flops": 1.2e15})
    assert spec.hardware == dataclasses.replace(HARDWARE_PRESETS[DEFAULT_HARDWARE], peak_flops=1.2e15)


def test_resolve_spec_needs_exactly_one_of_a_preset_and_a_spec_file(tmp_path: Path):
    with pytest.raises(ChakraInputError, match="one of them"):
        resolve_spec()
    with pytest.raises(ChakraInputError, match="one of them"):
        resolve_spec("llama3-8b", write_spec(tmp_path, SMALL_SPEC))


def test_an_unknown_override_key_is_refused_with_the_closest_key():
    with pytest.raises(ChakraInputError, match=r"'parallel\.tpp' is not a key of the spec.*'parallel\.tp'\?"):
        resolve_spec("llama3-8b", overrides={"parallel.tpp": 2})


def test_an_override_of_the_wrong_type_is_named_as_it_was_given():
    with pytest.raises(ChakraInputError, match=r"^overrides\['micro_batch'\] = 'four' is text, not an integer"):
        resolve_spec("llama3-8b", overrides={"micro_batch": "four"})


def test_labels_name_an_impossible_override_by_its_option():
    with pytest.raises(ChakraInputError, match=r"^model\.heads = 32 do not split over --tp 3"):
        resolve_spec("llama3-8b", overrides={"parallel.tp": 3}, labels={"parallel.tp": "--tp"})


# ---- check_spec: impossible values ----------------------------------------------------------------
def test_a_parallelism_that_does_not_divide_the_heads_is_refused():
    with pytest.raises(ChakraInputError, match=r"model\.heads = 96 do not split over parallel\.tp = 5"):
        check_spec(WorkloadSpec(PRESETS["gpt3-175b"], ParallelSpec(tp=5)))


def test_a_hidden_size_that_does_not_split_into_the_heads_needs_a_head_dim():
    model = dataclasses.replace(PRESETS["llama3-8b"], hidden=4100)
    with pytest.raises(ChakraInputError, match=re.escape("model.hidden = 4100 does not split into model.heads = 32")):
        check_spec(WorkloadSpec(model))
    check_spec(WorkloadSpec(dataclasses.replace(model, head_dim=128)))


def test_hardware_without_memory_bandwidth_is_refused():
    hardware = dataclasses.replace(HARDWARE_PRESETS["h100"], mem_bw_bytes_per_s=0.0)
    with pytest.raises(ChakraInputError, match=re.escape("mem_bw_bytes_per_s = 0.0 must be a positive number")):
        check_spec(WorkloadSpec(PRESETS["llama3-8b"], hardware=hardware))


def test_a_misspelt_choice_suggests_the_spelling_regardless_of_case():
    with pytest.raises(ChakraInputError, match=r"parallel\.schedule = '1F1B' is not one of .* did you mean '1f1b'"):
        check_spec(WorkloadSpec(PRESETS["llama3-8b"], ParallelSpec(schedule="1F1B")))


# ---- the command line: one line, exit code 2, no traceback -----------------------------------------
@pytest.mark.parametrize(
    ("spec_text", "fragments"),
    [
        ('model: llama3-8b\nparallel: {tp: "2"}\n', ("parallel.tp = '2' is text, not an integer", "write 2")),
        ("model: llama3-8b\nparallel: {tp: two}\n", ("parallel.tp = 'two' is text, not an integer",)),
        ("model: {preset: llama3-8b, layers: many}\n", ("model.layers = 'many' is text, not an integer",)),
        ("model: gpt3-175b\nparallel: {pp: 2, layers_per_stage: [48, a]}\n", ("is not a list of integers",)),
    ],
)
def test_the_cli_refuses_a_value_of_the_wrong_type(tmp_path: Path, spec_text: str, fragments: tuple[str, ...]):
    assert_one_line_error(generate_from(tmp_path, spec_text), "spec.yaml", *fragments)


def test_the_cli_refuses_an_unknown_top_level_key_naming_the_known_ones(tmp_path: Path):
    result = generate_from(tmp_path, "model: llama3-8b\nglobl_batch: 8\n")
    assert_one_line_error(result, "unknown key globl_batch = 8", "takes causal, decode_steps", "mean 'global_batch'")


def test_the_cli_refuses_an_unknown_nested_key_naming_the_known_ones(tmp_path: Path):
    result = generate_from(tmp_path, '{"model": "llama3-8b", "parallel": {"tensor": 2}}', name="spec.json")
    assert_one_line_error(result, "spec.json", "unknown key parallel.tensor = 2", "parallel takes cp, dp, ep")


@pytest.mark.parametrize(
    ("spec_text", "fragments"),
    [
        ("model: llama3-8b\nparallel: {tp: 0}\n", ("parallel.tp = 0 must be at least 1",)),
        ("model: {preset: gpt3-175b, layers: -2}\n", ("model.layers = -2 must be at least 1",)),
        ("model: gpt3-175b\nparallel: {tp: 5}\n", ("model.heads = 96 do not split over parallel.tp = 5",)),
        ("model: llama3-9b\n", ("model = 'llama3-9b' is not one of gpt3-175b", "did you mean 'llama3-8b'")),
    ],
)
def test_the_cli_refuses_an_impossible_value_naming_the_key(tmp_path: Path, spec_text: str, fragments: tuple[str, ...]):
    assert_one_line_error(generate_from(tmp_path, spec_text), "spec.yaml", *fragments)


def test_the_cli_refuses_an_impossible_option_naming_the_option(tmp_path: Path):
    result = generate_from(tmp_path, SMALL_SPEC, "--tp", "0")
    assert_one_line_error(result, "spec.yaml", "--tp 0 must be at least 1")


def test_the_cli_refuses_an_option_that_does_not_fit_the_spec_file(tmp_path: Path):
    result = generate_from(tmp_path, SMALL_SPEC, "--tp", "3")
    assert_one_line_error(result, "model.heads = 32 do not split over --tp 3")


def test_the_cli_refuses_an_unknown_preset_option_with_the_presets(tmp_path: Path):
    result = run_cli("generate", "llm", "--preset", "gpt5", "-o", str(tmp_path / "x"))
    assert_one_line_error(result, "--preset 'gpt5' is not one of", "llama3-8b")


def test_the_cli_refuses_a_bad_yaml_file_with_its_line(tmp_path: Path):
    result = generate_from(tmp_path, "model: llama3-8b\nparallel: {tp: 2\n")
    assert_one_line_error(result, "spec.yaml", "not valid YAML", "at line 3")


def test_the_cli_refuses_a_bad_json_file_with_its_line(tmp_path: Path):
    result = generate_from(tmp_path, '{"model": "llama3-8b",\n "parallel": {"tp": 2,}}', name="spec.json")
    assert_one_line_error(result, "spec.json", "not valid JSON", "at line 2")


@pytest.mark.parametrize(("spec_text", "found"), [("- llama3-8b\n- tp: 2\n", "a list"), ("", "an empty file")])
def test_the_cli_refuses_a_spec_that_is_not_a_mapping(tmp_path: Path, spec_text: str, found: str):
    assert_one_line_error(generate_from(tmp_path, spec_text), "spec.yaml", f"a mapping of keys at the top, not {found}")


def test_the_cli_refuses_a_section_that_is_not_a_mapping(tmp_path: Path):
    assert_one_line_error(generate_from(tmp_path, "model: llama3-8b\nparallel: 4\n"), "parallel = 4 is not a mapping")


def test_the_cli_needs_exactly_one_model_source(tmp_path: Path):
    assert_one_line_error(run_cli("generate", "llm", "-o", str(tmp_path / "w")), "--preset or --spec")


def test_cli_options_override_the_spec_file(tmp_path: Path):
    result = generate_from(tmp_path, SMALL_SPEC, "--pp", "1", "--dp", "2")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("w.*.et")) == ["w.0.et", "w.1.et", "w.2.et", "w.3.et"]
    _, nodes = io.read(tmp_path / "w.0.et")
    assert not [n for n in nodes if n.type in (COMM_SEND_NODE, COMM_RECV_NODE)]  # one stage: no pipeline


def test_a_global_batch_of_zero_is_refused_not_read_as_unset(tmp_path):
    done = run_cli("generate", "llm", "--preset", "llama3-8b", "--global-batch", "0", "-o", str(tmp_path / "w"))
    assert done.returncode == 2 and "global-batch 0 must be at least 1" in done.stderr
