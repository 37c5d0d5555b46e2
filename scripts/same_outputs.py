"""The project's outputs on fixed inputs, fingerprinted: the check that a refactoring changed nothing.

Every case runs ``chakra`` commands on an input that does not change (the traces of ``../shared/data``,
the files of ``tests/data``, generated workloads) and fingerprints what they wrote: each ET file by
its bytes' SHA-256, each JSON report (analyses, simulated cycles) by the SHA-256 of its canonical form
(keys sorted, the output folder's path replaced by ``OUT`` and the shared folder's by ``SHARED``).

Usage:
    python scripts/same_outputs.py --record      # write the fingerprints to scripts/same_outputs.json
    python scripts/same_outputs.py               # compare with them; exit 1 naming what changed

Recorded before a refactoring, compared after it: byte-identical ETs, equal analysis JSON, equal
simulated cycles. A change meant to alter an output re-records the file in the same commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
DATA = SHARED / "data"
FINGERPRINTS = REPO / "scripts" / "same_outputs.json"
ASTRA = REPO / "examples" / "astra"
TESTS_DATA = REPO / "tests" / "data"


@dataclass(frozen=True)
class Case:
    """Commands run in order in a fresh output folder (``{out}`` in an argument is that folder)."""

    name: str
    commands: tuple[tuple[str, ...], ...]


def _analyses(prefix: str, one_rank: str) -> tuple[tuple[str, ...], ...]:
    """The analyses of a workload, each writing its JSON report into the output folder."""
    return (
        ("analyze", "summary", prefix, "--json"),
        ("analyze", "breakdown", prefix, "--json", "--workers", "1"),
        ("analyze", "critical-path", one_rank, "--json"),
        ("info", one_rank, "--json"),
        ("validate", prefix, "--json"),
    )


def _simulated(prefix: str) -> tuple[str, ...]:
    return ("simulate", "--workload", prefix, "--system", str(ASTRA / "system.json"), "--network",
            str(ASTRA / "ring2.yml"), "--json")  # fmt: skip


def cases() -> list[Case]:
    """Every case: converters on real traces, generators, and the analyses and simulation of each."""
    up, param, hta = DATA / "upstream-chakra", DATA / "param", DATA / "hta"
    return [
        Case("pytorch host only (upstream 1.0.2)", (
            ("convert", "pytorch", "--host", str(up / "1.0.2-chakra.0.0.4.json"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("pytorch host and device (HTA simple add)", (
            ("convert", "pytorch", "--host", str(hta / "benchmark_simple_add_et.json.gz"), "--device",
             str(hta / "benchmark_simple_add_trace.json.gz"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("pytorch host alone (PARAM resnet 1 GPU)", (
            ("convert", "pytorch", "--host", str(param / "resnet_1gpu_et.json.gz"), "-o", "{out}/et/job"),
        )),
        Case("pytorch host with collectives (PARAM resnet 2 GPUs)", (
            ("convert", "pytorch", "--host", str(param / "resnet_2gpu_et.json.gz"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("pytorch host and device, gloo on CPU (the recorded job, 2 ranks)", (
            ("convert", "pytorch", "--host", str(TESTS_DATA / "gloo" / "host.{{rank}}.json.gz"), "--device",
             str(TESTS_DATA / "gloo" / "device.{{rank}}.json.gz"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("kineto alone, gloo on CPU (the recorded job, 2 ranks, every step)", (
            ("convert", "kineto", str(TESTS_DATA / "gloo" / "device.0.json.gz"),
             str(TESTS_DATA / "gloo" / "device.1.json.gz"), "--step", "all", "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("kineto alone (HTA NCCL rank 0)", (
            ("convert", "kineto", str(hta / "nccl_2rank_rank0_kineto.json.gz"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("kineto alone (AMD MI250)", (
            ("convert", "kineto", str(hta / "amd_mi250_rocm62_kineto.json.gz"), "-o", "{out}/et/job"),
            *_analyses("{out}/et/job", "{out}/et/job.0.et"),
        )),
        Case("upstream ET (3,664 nodes), adapted", (
            ("adapt", str(up / "chakra.0.et.gz"), "-o", "{out}/adapted/up", "--target", "astra-sim", "--json"),
            *_analyses("{out}/adapted/up", "{out}/adapted/up.0.et"),
        )),
        Case("xla module", (
            ("convert", "xla", str(TESTS_DATA / "xla" / "tf_dense_relu.after_optimizations.hlo.pb"), "-o",
             "{out}/et/step", "--devices", "2"),
            *_analyses("{out}/et/step", "{out}/et/step.0.et"),
            _simulated("{out}/et/step"),
        )),
        Case("tensorflow recording (mirrored MLP, 2 devices)", (
            ("convert", "tensorflow", str(TESTS_DATA / "tensorflow" / "mirrored_mlp_2dev"), "-o", "{out}/et/step"),
            *_analyses("{out}/et/step", "{out}/et/step.0.et"),
        )),
        Case("flexflow task graph", (
            ("convert", "flexflow", str(TESTS_DATA / "flexflow" / "mlp2.taskgraph.dot"), "--strategy",
             str(TESTS_DATA / "flexflow" / "mlp2.strategy"), "-o", "{out}/et/mlp"),
            *_analyses("{out}/et/mlp", "{out}/et/mlp.0.et"),
        )),
        Case("text workload (resnet50 excerpt)", (
            ("convert", "text", str(TESTS_DATA / "text" / "resnet50_data_excerpt.txt"), "-o", "{out}/et/resnet",
             "--num-npus", "2"),
            *_analyses("{out}/et/resnet", "{out}/et/resnet.0.et"),
            _simulated("{out}/et/resnet"),
        )),
        Case("msccl program", (
            ("convert", "msccl", str(TESTS_DATA / "msccl" / "two_threadblocks.xml"), "-o", "{out}/et/algo", "--size",
             "1MiB"),
        )),
        Case("generated llm (tp 2)", (
            ("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--pp", "1", "--dp", "1", "--global-batch",
             "2", "-o", "{out}/et/llama"),
            *_analyses("{out}/et/llama", "{out}/et/llama.0.et"),
            _simulated("{out}/et/llama"),
            ("analyze", "ranks", "{out}/et/llama", "--json", "--workers", "1"),
        )),
        Case("synthetic sample (fitted to a generated llm, tp 2 pp 2)", (
            ("generate", "llm", "--preset", "llama3-8b", "--tp", "2", "--pp", "2", "--dp", "1", "--global-batch",
             "2", "-o", "{out}/gen/llama"),
            ("synth", "fit", "{out}/gen/llama", "-o", "{out}/llama.synth.json"),
            ("synth", "sample", "{out}/llama.synth.json", "-o", "{out}/et/synthetic", "--seed", "3"),
            ("synth", "sample", "{out}/llama.synth.json", "-o", "{out}/et/wider", "--seed", "5", "--ranks", "8"),
        )),
        Case("generated micro (2 ranks)", (
            ("generate", "micro", "-o", "{out}/et", "--ranks", "2"),
            _simulated("{out}/et/ALL_REDUCE"),
            ("adapt", "{out}/et/ALL_REDUCE", "-o", "{out}/adapted/ar", "--target", "astra-sim"),
        )),
    ]  # fmt: skip


def _canonical_json(path: Path, out: Path) -> bytes:
    text = path.read_text().replace(str(out), "OUT").replace(str(SHARED), "SHARED")
    return json.dumps(json.loads(text), sort_keys=True).encode()


def fingerprint(case: Case) -> dict[str, str]:
    """Run ``case`` in a fresh folder: every command's exit code (``exit:N``; a refusal, exit 2, is
    kept as such: its message may name whichever rank was read first), the SHA-256 of its JSON on
    stdout (``stdout:N``), and of every file the case wrote (``OUT/...``; JSON in canonical form)."""
    out = Path(tempfile.mkdtemp(prefix="same-outputs-")).resolve()
    try:
        found: dict[str, str] = {}
        for number, command in enumerate(case.commands):
            argv = [part.format(out=out) for part in command]
            done = subprocess.run([sys.executable, "-m", "chakra", *argv], capture_output=True, text=True,
                                  env={**os.environ, "COLUMNS": "200"})  # fmt: skip
            found[f"exit:{number}"] = str(done.returncode)
            if done.returncode != 2 and "--json" in argv:
                printed = Path(out / f".stdout{number}.json")
                printed.write_text(done.stdout)
                try:
                    found[f"stdout:{number}"] = hashlib.sha256(_canonical_json(printed, out)).hexdigest()
                except json.JSONDecodeError:
                    raise SystemExit(
                        f"{case.name}: chakra {' '.join(argv)} printed no JSON (exit "
                        f"{done.returncode}):\n{done.stderr[-2000:]}"
                    ) from None
                printed.unlink()
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            data = _canonical_json(path, out) if path.suffix == ".json" else path.read_bytes()
            found[f"OUT/{path.relative_to(out)}"] = hashlib.sha256(data).hexdigest()
        return found
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="write the fingerprints instead of comparing")
    parser.add_argument("--workers", type=int, default=2, help="cases run side by side")
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"the shared traces are not at {DATA}", file=sys.stderr)
        return 2
    chosen = cases()
    with ThreadPoolExecutor(args.workers) as pool:
        now = dict(zip((c.name for c in chosen), pool.map(fingerprint, chosen), strict=True))
    if args.record:
        FINGERPRINTS.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{sum(map(len, now.values()))} outputs of {len(now)} cases recorded in {FINGERPRINTS}")
        return 0
    before = json.loads(FINGERPRINTS.read_text())
    changed = []
    for case in sorted(set(before) | set(now)):
        old, new = before.get(case, {}), now.get(case, {})
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                changed.append(
                    f"{case}: {key} {'gone' if key not in new else 'added' if key not in old else 'changed'}"
                )
    for line in changed:
        print(line)
    print(f"{sum(map(len, now.values()))} outputs of {len(now)} cases: {len(changed)} differ from {FINGERPRINTS.name}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
