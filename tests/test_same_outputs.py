"""The outputs on fixed inputs are those recorded in ``scripts/same_outputs.json`` (issue 34: a
refactoring changes no ET byte, no analysis figure, no simulated cycle). A change meant to alter an
output re-records the file (``python scripts/same_outputs.py --record``) in the same commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import require_shared

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "same_outputs.py"


def test_converters_analyses_and_the_simulator_write_what_they_wrote_before():
    require_shared("hta")
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
