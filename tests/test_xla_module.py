"""Reading XLA HLO modules (the start of the XLA front end, issue 16): a live JAX program compiled
for 8 forced host devices, its collectives' device groups, and bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_allreduce_workload

from chakra.errors import ChakraFormatError
from chakra.xla.hlo import load_module, replica_groups, shape_bytes

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jax_sharded_mlp.py"
DEVICES = 8
#: The example's mesh: devices 0-7 as a 4 (data) x 2 (model) grid, model the minor axis.
MODEL_GROUPS = {(0, 1), (2, 3), (4, 5), (6, 7)}
DATA_GROUPS = {(0, 2, 4, 6), (1, 3, 5, 7)}
#: Compiling the step takes a few seconds; generous for a loaded machine.
COMPILE_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def sharded_mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("jax")
    subprocess.run([sys.executable, str(EXAMPLE), str(out)], check=True, capture_output=True, timeout=COMPILE_TIMEOUT_S)
    return out


def test_a_compiled_jax_step_reads_as_a_scheduled_module(sharded_mlp: Path):
    module = load_module(sharded_mlp / "step.hlo.pb")
    assert module.is_scheduled
    text = (sharded_mlp / "step.hlo.txt").read_text()
    entry_lines = text.split("ENTRY")[1].split("\n}")[0].count(" = ")
    assert len(module.scheduled()) == entry_lines  # every instruction of the entry computation


def test_the_collectives_run_in_the_groups_of_the_mesh(sharded_mlp: Path):
    module = load_module(sharded_mlp / "step.hlo.pb")
    groups = {
        frozenset(replica_groups(i, DEVICES)) for i in module.scheduled() if i.opcode in ("all-reduce", "all-gather")
    }
    assert frozenset(MODEL_GROUPS) in groups and frozenset(DATA_GROUPS) in groups
    sizes = [shape_bytes(i.shape) for i in module.scheduled() if i.opcode == "all-reduce"]
    assert all(size > 0 for size in sizes)


def test_a_truncated_module_is_refused_naming_the_file(sharded_mlp: Path, tmp_path: Path):
    cut = tmp_path / "cut.pb"
    cut.write_bytes((sharded_mlp / "step.hlo.pb").read_bytes()[:-100])
    with pytest.raises(ChakraFormatError, match=r"cut\.pb"):
        load_module(cut)


def test_a_file_of_another_kind_is_refused_naming_the_file(tmp_path: Path):
    prefix = write_allreduce_workload(tmp_path, "job", 1)
    with pytest.raises(ChakraFormatError, match=r"job\.0\.et.*not a serialized XLA HloModuleProto"):
        load_module(f"{prefix}.0.et")


def test_hlo_text_is_refused_with_how_to_save_the_proto(sharded_mlp: Path):
    with pytest.raises(ChakraFormatError, match="is HLO text"):
        load_module(sharded_mlp / "step.hlo.txt")
