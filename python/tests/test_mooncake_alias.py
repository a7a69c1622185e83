"""Running unmodified `import mooncake.engine` code (python -m tent.mooncake), never
shadowing a real Mooncake silently; a second module named tent is a clear error."""

import os
import subprocess
import sys

from conftest import child_env

SCRIPT = """
import sys
import mooncake.engine
from mooncake.engine import TransferEngine, TransferOpcode
import tent.mooncake
assert mooncake.engine is tent.mooncake, mooncake.engine
assert TransferEngine.TransferOpcode.Write == TransferOpcode.Write
print("ok", sys.argv[1:])
"""


def run(args, env=None, cwd=None):
    return subprocess.run([sys.executable] + args, env=env or child_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def fake_mooncake(tmp_path):
    pkg = tmp_path / "fake" / "mooncake"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.py").write_text("REAL = True\n")
    env = child_env()
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(tmp_path / "fake")
    return env, str(pkg)


def test_launcher_answers_import_mooncake_engine(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    out = run(["-m", "tent.mooncake", str(script), "--flag", "x"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok ['--flag', 'x']"


def test_launcher_runs_a_module_as_python_m(tmp_path):
    (tmp_path / "mcapp.py").write_text(SCRIPT)
    env = child_env()
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(tmp_path)
    out = run(["-m", "tent.mooncake", "-m", "mcapp", "x"], env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok ['x']"


def test_launcher_help():
    out = run(["-m", "tent.mooncake", "--help"])
    assert out.returncode == 0
    assert "--shadow-mooncake" in out.stdout and "SCRIPT" in out.stdout
    assert run(["-m", "tent.mooncake"]).returncode == 2


def test_launcher_never_shadows_a_real_mooncake_silently(tmp_path):
    env, where = fake_mooncake(tmp_path)
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    out = run(["-m", "tent.mooncake", str(script)], env=env)
    assert out.returncode == 2, out.stdout
    assert "a real Mooncake is installed" in out.stderr and where in out.stderr, out.stderr
    assert "ok" not in out.stdout
    out = run(["-m", "tent.mooncake", "--shadow-mooncake", str(script)], env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok []"
    assert "is hidden" in out.stderr, out.stderr  # said, not silent


def test_plain_import_leaves_mooncake_alone(tmp_path):
    env, _ = fake_mooncake(tmp_path)
    out = run(["-c", "import tent.mooncake, mooncake.engine; print(mooncake.engine.REAL)"],
              env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_a_second_module_named_tent_is_a_clear_error(tmp_path):
    other = tmp_path / "other" / "tent"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("MOONCAKE_TENT = True\n")
    env = child_env()
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(tmp_path / "other")
    env.pop("TENT_CHOOSE", None)
    out = run(["-c", "import tent"], env=env)
    assert out.returncode != 0
    assert "ImportError" in out.stderr and str(other) in out.stderr, out.stderr
    assert "TENT_CHOOSE=rdma" in out.stderr
    env["TENT_CHOOSE"] = "rdma"
    out = run(["-c", "import tent; print(tent.TransferEngine.__name__, tent.__version__)"],
              env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "TransferEngine"
