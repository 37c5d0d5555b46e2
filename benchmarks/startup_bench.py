"""Start-up of the ``chakra`` command: wall time of a fresh process for what users type most.

Measures, each as a fresh process run ``--repeat`` times (median and best kept), the ``chakra``
console script of this interpreter's environment (``python -m chakra`` where there is none):

* ``chakra --help`` and ``chakra simulate --help``;
* ``chakra simulate`` of a 2-rank ALL_REDUCE micro workload on ``examples/astra`` (system JSON, the
  2-NPU ring), generated once into ``--data-dir``;
* ``chakra info`` of that workload's rank 0 file (one node);
* ``python -c pass``, for reference: what the interpreter itself costs.

Every process gets ``COLUMNS=80`` and a pipe for stdout (help is laid out for 80 columns, tables
are not drawn to a terminal). Bytecode caching is on for the children (``PYTHONDONTWRITEBYTECODE``
removed) and each command runs once unmeasured first, so the figures are those of an installed
package with its ``__pycache__`` filled, not of recompiling edited sources. The runs are not pinned
to a core, as users do not pin them; the CPU time (user + system, median) is printed beside the
wall time, as it moves less on a shared machine. Target (issue 14): each command under 0.5 s
(median wall time). ``--imports`` adds, per command, the top-level packages with the most own
import time (``python -X importtime``), the costs to look at when a figure misses. Run:
``python benchmarks/startup_bench.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import verdict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "astra"
SYSTEM = EXAMPLES / "system.json"
NETWORK = EXAMPLES / "ring2.yml"

DEFAULT_DATA_DIR = Path(tempfile.gettempdir()) / "chakra-startup-bench"
DEFAULT_REPEAT = 5  # fresh runs per command (median reported: the machine may be shared)
TARGET_S = 0.5  # every command's median wall time (issue 14)
RANKS = 2  # ranks of the micro workload
FAMILY = "ALL_REDUCE"  # the micro family simulated
HELP_COLUMNS = "80"  # terminal width the help is laid out for
IMPORTS_SHOWN = 12  # packages listed per command by --imports
REFERENCE = "python -c pass"  # measured for comparison, not held to the target
US_PER_MS = 1000
#: One line of ``python -X importtime``: own and cumulative µs, then the indented module name.
IMPORTTIME_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)")


def chakra_argv() -> list[str]:
    """How this environment runs ``chakra``: its console script, else ``python -m chakra``."""
    script = Path(sys.executable).with_name("chakra")
    if script.exists():
        return [str(script)]
    found = shutil.which("chakra")
    return [found] if found else [sys.executable, "-m", "chakra"]


def ensure_workload(data_dir: Path) -> Path:
    """The 2-rank micro workload's prefix, generated unless it is there."""
    prefix = data_dir / FAMILY
    if all((data_dir / f"{FAMILY}.{rank}.et").exists() for rank in range(RANKS)):
        return prefix
    from chakra.generate.micro import MicroParams, generate

    generate(data_dir, [FAMILY], MicroParams(num_npus=RANKS))
    return prefix


def commands(prefix: Path) -> dict[str, list[str]]:
    """Each measured command's name and command line."""
    chakra = chakra_argv()
    return {
        REFERENCE: [sys.executable, "-c", "pass"],
        "chakra --help": [*chakra, "--help"],
        "chakra simulate --help": [*chakra, "simulate", "--help"],
        f"chakra simulate ({RANKS}-rank micro)": [
            *chakra,
            "simulate",
            "--workload",
            str(prefix),
            "--system",
            str(SYSTEM),
            "--network",
            str(NETWORK),
        ],
        "chakra info (1-node file)": [*chakra, "info", f"{prefix}.0.et"],
    }


def child_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["COLUMNS"] = HELP_COLUMNS
    return env


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one fresh process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_costs(argv: list[str], env: dict[str, str]) -> list[tuple[str, float]]:
    """Own import time (ms) per top-level package of one run of ``argv``, largest first."""
    python = [sys.executable, "-X", "importtime"]
    # the console script is a Python file; running it under -X importtime needs the interpreter
    target = [*python, *argv] if argv[0] != sys.executable else [*python, *argv[1:]]
    done = subprocess.run(target, env=env, capture_output=True, text=True)
    own: Counter[str] = Counter()
    for line in done.stderr.splitlines():
        match = IMPORTTIME_LINE.match(line)
        if match:
            own[match.group(3).split(".")[0]] += int(match.group(1))
    return [(package, us / US_PER_MS) for package, us in own.most_common(IMPORTS_SHOWN)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the micro workload is kept")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="fresh runs per command (median kept)")
    parser.add_argument("--imports", action="store_true", help="also list each command's top import costs")
    args = parser.parse_args()

    prefix = ensure_workload(args.data_dir)
    env = child_env()
    measured = commands(prefix)
    print(
        f"python {sys.version.split()[0]}, {' '.join(chakra_argv())}; median and best of {args.repeat} "
        f"fresh processes after one unmeasured run each"
    )
    print(f"\n{'command':<34}{'median s':>10}{'best s':>9}{'CPU s':>8}  verdict")
    missed = []
    for name, argv in measured.items():
        run_once(argv, env)  # fills __pycache__ and the file cache
        runs = [run_once(argv, env) for _ in range(args.repeat)]
        walls = [wall for wall, _ in runs]
        median = statistics.median(walls)
        # CPU time counts what the process itself ran: a steadier figure than wall time on a busy machine
        cpu = statistics.median(cpu for _, cpu in runs)
        reference = name == REFERENCE
        ok = median < TARGET_S
        if not ok and not reference:
            missed.append(name)
        shown = "(reference)" if reference else verdict(ok)
        print(f"{name:<34}{median:>10.3f}{min(walls):>9.3f}{cpu:>8.3f}  {shown}")
        if args.imports and not reference:
            costs = ", ".join(f"{package} {ms:.0f}" for package, ms in import_costs(argv, env))
            print(f"    own import ms: {costs}")
    if missed:
        print(f"\n{verdict(False)}: {', '.join(missed)} at or over {TARGET_S} s (median)")
    else:
        print(f"\n{verdict(True)}: every command under {TARGET_S} s (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
