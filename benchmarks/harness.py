"""What the benchmark scripts share: one measurement per fresh process, pinned to one core, with
its peak RSS; py-spy lookup; PASS/MISS verdicts. Imported by the scripts in this folder (which
run as ``python benchmarks/NAME.py``, so this folder is on ``sys.path``)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

#: ``ru_maxrss`` is in KiB on Linux.
KIB = 1024
#: How often :func:`run_measured` reads the process tree's RSS (s).
TREE_SAMPLE_S = 0.02


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far: Linux's ``VmHWM``, which starts again at the
    exec that made the process (``ru_maxrss`` keeps the high-water mark of the forked parent's
    pages too: a benchmark that built its input in memory before spawning the case saw it added)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * KIB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB


def pin_to_one_core() -> int | None:
    """Pin this process to the first CPU it may run on; the CPU, or None where unsupported."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def child_argv(script: str, extra: list[str]) -> list[str]:
    """The command line running ``script`` again with ``extra`` arguments."""
    return [sys.executable, str(Path(script).resolve()), *extra]


def spawn_json(script: str, extra: list[str]) -> dict:
    """Run ``script`` with ``extra`` arguments in a new process; its JSON answer (last line)."""
    out = subprocess.run(child_argv(script, extra), check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def pyspy() -> str | None:
    """py-spy of this interpreter's environment, else on PATH, else None."""
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


class Ran(NamedTuple):
    """One finished process: its output, wall time and peak memory (bytes)."""

    returncode: int
    output: str  # stdout then stderr
    stdout: str
    wall_s: float
    peak_rss: int  # its own ru_maxrss (wait4), the largest of it and the children it waited for
    tree_rss: int  # the peak of its and its descendants' RSS summed, sampled every TREE_SAMPLE_S


def run_measured(argv: list[str], *, cwd: Path | None = None, timeout_s: float | None = None) -> Ran:
    """Run ``argv`` to its end, measuring its wall time and memory (a timeout kills it: returncode -9)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd)
        peak = [0]
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak, stop), daemon=True)
        sampler.start()
        killer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
        if killer:
            killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - t0
        if killer:
            killer.cancel()
        stop.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return Ran(proc.returncode, stdout + stderr, stdout, wall_s, usage.ru_maxrss * KIB, peak[0])


def _sample_tree(root: int, peak: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], tree_rss_bytes(root))
        stop.wait(TREE_SAMPLE_S)


def tree_rss_bytes(root: int) -> int:
    """RSS of process ``root`` and all its descendants, summed (0 without ``/proc``)."""
    children: dict[int, list[int]] = {}
    pages: dict[int, int] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 0
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(b")") + 2 :].split()  # from the state on: ppid is 1, rss 21
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        pages[pid] = int(fields[21])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += pages.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total * PAGE_BYTES


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def compile_bytecode() -> None:
    """Compile the package's modules to bytecode, as installing it does: a CLI's start-up is then
    what a user's copy sees, also where ``PYTHONDONTWRITEBYTECODE`` is set (every run would
    otherwise compile the package again: 0.15 s of a 0.4 s start-up here)."""
    import compileall

    import chakra

    compileall.compile_dir(Path(chakra.__file__).parent, quiet=1)


def best_of(argv: list[str], repeat: int) -> Ran:
    """The fastest of ``repeat`` runs of ``argv`` (:func:`run_measured`), the package's bytecode
    compiled first (:func:`compile_bytecode`); a failed run ends the benchmark with its output."""
    compile_bytecode()
    best: Ran | None = None
    for _ in range(max(1, repeat)):
        ran = run_measured(argv)
        if ran.returncode != 0:
            raise SystemExit(ran.output)
        if best is None or ran.wall_s < best.wall_s:
            best = ran
    assert best is not None
    return best


def layers_arguments(doc: str, default_layers: int) -> tuple[int, int]:
    """``--layers`` and ``--repeat`` of the front-end benchmarks, which record an example model
    of that many layers and time its conversion."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--layers", type=int, default=default_layers)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    return args.layers, args.repeat
