"""Writers on a full disk and a read-only file system: one line naming the output, exit code 2, no
traceback and nothing left behind (no temporary file, no half workload, no folder the command made).

The disk is a real tmpfs, mounted small and filled up; the tests need root (CI runs as root) and
skip with the reason where mounting is not allowed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import left_files, run_cli

from chakra import io
from chakra.errors import ChakraOutputError
from chakra.schema.protobuf.et_def_pb2 import COMP_NODE, GlobalMetadata, Node

REPO = Path(__file__).resolve().parents[1]
TEXT_WORKLOAD = REPO / "tests" / "data" / "text" / "resnet50_data_excerpt.txt"
SYSTEM, NETWORK = REPO / "examples" / "astra" / "system.json", REPO / "examples" / "astra" / "ring2.yml"


@pytest.fixture(scope="module")
def micro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("micro")
    assert run_cli("generate", "micro", "ALL_REDUCE", "-o", str(folder), "--ranks", "2").returncode == 0
    return folder / "ALL_REDUCE"


def _commands(out: Path, micro: Path) -> dict[str, list[str]]:
    simulate = ["simulate", "--workload", str(micro), "--system", str(SYSTEM), "--network", str(NETWORK)]
    return {
        "generate micro": ["generate", "micro", "ALL_REDUCE", "-o", str(out / "micro"), "--ranks", "4"],
        "convert text": ["convert", "text", str(TEXT_WORKLOAD), "-o", str(out / "text" / "job"), "--num-npus", "8"],
        "generate llm": [
            "generate",
            "llm",
            "--preset",
            "llama3-8b",
            "--tp",
            "2",
            "--dp",
            "2",
            "--global-batch",
            "2",
            "-o",
            str(out / "llm"),
        ],
        "jsonize": ["jsonize", f"{micro}.0.et", str(out / "rank.json")],
        "simulate --report": [*simulate, "--report", str(out / "report.json")],
        "simulate --timeline": [*simulate, "--timeline", str(out / "timeline.json")],
    }


COMMANDS = list(_commands(Path("."), Path("m")))


@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_is_one_line_naming_the_output_and_leaves_nothing(command: str, full_disk: Path, micro: Path):
    done = run_cli(*_commands(full_disk, micro)[command])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "No space left on device" in done.stderr
    assert str(full_disk) in done.stderr
    assert left_files(full_disk) == []


@pytest.mark.parametrize("command", ["convert text", "jsonize", "simulate --report"])
def test_a_read_only_disk_is_one_line_naming_the_output(command: str, read_only_disk: Path, micro: Path):
    done = run_cli(*_commands(read_only_disk, micro)[command])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and str(read_only_disk) in done.stderr


def test_an_et_writer_on_a_full_disk_drops_its_temporary_file(full_disk: Path):
    node = Node(id=1, name="n", type=COMP_NODE)
    with pytest.raises(ChakraOutputError, match="No space left") as raised:
        io.write(full_disk / "rank.0.et", GlobalMetadata(version="0.0.4"), [node] * 20_000)
    assert str(raised.value.path) == str(full_disk / "rank.0.et")
    assert left_files(full_disk) == []


def test_an_atomic_file_whose_last_flush_fails_leaves_no_temporary_file(full_disk: Path):
    atomic = io.AtomicFile(full_disk / "out.bin")
    atomic.file.write(bytes(100))  # buffered: the disk is full when it is flushed
    atomic.abort()
    assert left_files(full_disk) == []


#: How long the interrupted command is given to start writing, and to stop once told (s): generous
#: on a loaded machine.
START_WAIT_S = 60
STOP_WAIT_S = 60
SIGTERM_EXIT = 128 + signal.SIGTERM
#: Nodes of the file jsonized while it is stopped: enough for seconds of work.
BIG_NODES = 400_000


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path: Path):
    big = tmp_path / "big.0.et"
    io.write(big, GlobalMetadata(version="0.0.4"), (Node(id=i, name=f"n{i}", type=COMP_NODE) for i in range(BIG_NODES)))
    out = tmp_path / "out" / "big.json"
    out.parent.mkdir()
    command = subprocess.Popen([sys.executable, "-m", "chakra", "jsonize", str(big), str(out)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_WAIT_S
    while not any(out.parent.iterdir()) and time.monotonic() < deadline and command.poll() is None:
        time.sleep(0.01)
    command.send_signal(signal.SIGTERM)
    assert command.wait(STOP_WAIT_S) in (SIGTERM_EXIT, 0)  # 0: it finished before the signal came
    assert sorted(p.name for p in out.parent.iterdir()) in ([], ["big.json"])


def test_a_temporary_file_never_entered_is_removed_when_the_process_exits(tmp_path: Path):
    # SIGTERM can stop a command between creating the file and entering its with-block
    script = f"from chakra import io; io.AtomicFile({str(tmp_path / 'out.bin')!r}); raise SystemExit(143)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 143, done.stderr
    assert list(tmp_path.iterdir()) == []
