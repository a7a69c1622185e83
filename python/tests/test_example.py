"""examples/kv_connector runs (small sizes), verifies every byte, and reports
which path each class took."""

import subprocess
import sys

from conftest import HERE, child_env

RUN = HERE.parents[1] / "examples" / "kv_connector" / "run.py"


def test_kv_connector_example():
    result = subprocess.run(
        [sys.executable, str(RUN), "--requests", "2", "--layers", "4", "--blocks", "16"],
        capture_output=True, text=True, timeout=120, env=child_env())
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    fg = next(line for line in lines if line.startswith("first_layers_get foreground_get"))
    untagged = next(line for line in lines if line.startswith("first_layers_get unspec"))
    assert "direct 0/0" not in fg  # the foreground pulls tried the direct path
    assert "direct 0/0" in untagged  # the untagged ones did not
    verified = [line for line in lines if "verified" in line]
    assert len(verified) == 2 and all("KV blocks" in line for line in verified)
    assert all("0 wrong on receipt" in line and "freed on decode's notification" in line
               for line in verified)
