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
from pathlib import Path

#: ``ru_maxrss`` is in KiB on Linux.
KIB = 1024


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far."""
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
