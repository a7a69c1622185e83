"""Fixtures of the tent pytest suite: a peer process over the soft fabric, and
the configs every engine of this process derives from (engines alive together
in one process share the lcores, so they all take the same eal/lcores sections).
"""

import copy
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

try:
    import tent
except ImportError:  # run from the source tree without PYTHONPATH=build/python
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))
    import tent

HERE = pathlib.Path(__file__).resolve().parent
# Mooncake's own test files, run by test_mooncake_upstream.py through the launcher (they
# import mooncake.engine): not collected as tests of this suite.
collect_ignore = ["mooncake_upstream"]
PEER_SIZE = 32 << 20

# Real EAL lcores with a small idle policy, so two processes share 2 cores well.
BASE = {
    "eal": {"mode": "eal"},
    "lcores": [{
        "pollers": ["rail:*", "background"],
        "idle": {"spin_polls": 64, "pause_polls": 256, "sleep_min_us": 1, "sleep_max_us": 200},
    }],
    "fabric": {
        "provider": "soft",
        "soft": {"devices": [{"name": "soft0"}, {"name": "soft1"}], "retry_budget_ms": 50},
    },
    "bootstrap": {"listen": "127.0.0.1:0", "connect_timeout_ms": 1000, "io_timeout_ms": 1000},
    "workers": {"slice_timeout_ms": 10000},
    "timeouts": {"endpoint_destroy_ms": 100},
    "log": {"level": "error"},
}


def config(**sections):
    """BASE with whole sections replaced: config(fabric={...})."""
    c = copy.deepcopy(BASE)
    c.update(copy.deepcopy(sections))
    return c


def slow_fabric(gbps):
    """One soft device with a modeled link of `gbps` Gb/s."""
    return {"provider": "soft", "soft": {"devices": [{"name": "slow0", "link_gbps": gbps}]}}


def pattern(size, seed):
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class Peer:
    """peer.py in its own process: its segment, buffer addresses and a command pipe."""

    def __init__(self, cfg, size=PEER_SIZE):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "peer.py"), json.dumps(cfg), str(size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env())
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"peer.py did not start (exit {self.proc.returncode})")
        self.info = json.loads(line)
        self.segment = self.info["segment"]
        self.size = size

    def addr(self, name, offset=0):
        return self.info[name] + offset

    def command(self, *words):
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def sum(self, name, offset, length):
        return self.command("sum", name, offset, length)

    def stop(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def peer():
    p = Peer(config())
    yield p
    assert p.stop() == 0


@pytest.fixture(scope="session")
def engine():
    e = tent.TransferEngine(config())
    yield e
    e.close()


@pytest.fixture(scope="session")
def seg(engine, peer):
    return engine.open_segment(peer.segment)


@pytest.fixture
def local(engine):
    """A fresh registered numpy buffer of 16 MiB."""
    buf = np.zeros(16 << 20, dtype=np.uint8)
    engine.register_memory(buf)
    yield buf
    engine.unregister_memory(buf)
