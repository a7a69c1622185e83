"""tent's log lines reach Python's logging (logger "tent.<component>"), levels mapped;
TENT_LOG_LEVEL overrides the config's levels."""

import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import tent
from conftest import child_env, config


class Collect(logging.Handler):
    """Keeps the records whose message is one of `messages` (other tests' engines may log
    at the same time)."""

    def __init__(self, *messages):
        super().__init__(logging.DEBUG)
        self.messages = set(messages)
        self.records = []
        self.changed = threading.Condition()

    def emit(self, record):
        if record.getMessage() in self.messages:
            with self.changed:
                self.records.append(record)
                self.changed.notify_all()

    def wait_for(self, message, timeout_s=60):
        """Bounded: the drain thread hands records over asynchronously."""
        with self.changed:
            return self.changed.wait_for(
                lambda: any(r.getMessage() == message for r in self.records), timeout_s)


def test_a_line_becomes_a_record_of_the_tent_logger():
    handler = Collect("scrape failed: test")
    log = logging.getLogger("tent")
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.DEBUG)
    try:
        tent._tent._log_emit_for_test("metrics", "error", "scrape failed: test")
        assert handler.wait_for("scrape failed: test"), "no record within 60 s"
        r = handler.records[0]
        assert r.name == "tent.metrics"
        assert r.levelno == logging.ERROR
        assert r.getMessage() == "scrape failed: test"
        assert r.tent_thread > 0 and r.tent_lcore == -1
    finally:
        log.removeHandler(handler)
        log.setLevel(old)


def test_python_levels_filter_what_tent_lets_through():
    handler = Collect("filtered by logging", "passes")
    log = logging.getLogger("tent")
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        tent._tent._log_emit_for_test("engine", "warn", "filtered by logging")
        tent._tent._log_emit_for_test("engine", "error", "passes")
        # In order: once "passes" arrived, the warning before it was handled too.
        assert handler.wait_for("passes")
        assert [r.getMessage() for r in handler.records] == ["passes"]
    finally:
        log.removeHandler(handler)
        log.setLevel(old)


CHILD = r"""
import json, logging, sys
import tent
got = []
class H(logging.Handler):
    def emit(self, record):
        got.append((record.name, record.levelname, record.getMessage()))
logging.getLogger("tent").addHandler(H())
logging.getLogger("tent").setLevel(logging.DEBUG)
try:
    with tent.TransferEngine(json.loads(sys.argv[1])) as e:
        name = e.segment_name
except tent.Error as err:
    print(json.dumps({"error": str(err)}))
    sys.exit(0)
tent.flush_logs(1.0)
print(json.dumps({"records": got, "name": name}))
"""


def run_child(env_level, tmp_path):
    env = child_env()
    env["TENT_LOG_LEVEL"] = env_level
    c = config(log={"level": "error"})
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(c)], env=env,
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_env_level_reaches_the_engine_and_its_lines_reach_logging(tmp_path):
    got = run_child("error,engine=info", tmp_path)
    assert "records" in got, got
    ups = [r for r in got["records"] if r[0] == "tent.engine" and " up: provider soft" in r[2]]
    assert ups, got["records"]
    assert ups[0][1] == "INFO"
    assert got["name"] in ups[0][2]


def test_bad_env_level_fails_engine_creation_naming_the_allowed_values(tmp_path):
    got = run_child("chatty", tmp_path)
    assert "error" in got, got
    assert "TENT_LOG_LEVEL" in got["error"] and "'chatty'" in got["error"], got
    assert "trace, debug, info, warn, error, off" in got["error"], got


EXIT_CHILD = r"""
import json, sys
import tent
with tent.TransferEngine(json.loads(sys.argv[1])):
    pass
print("exiting", flush=True)
"""


def test_the_interpreter_exits_while_the_drain_thread_waits(tmp_path):
    # The exit handler flushes under the drain thread's lock; a drain thread that held that
    # lock while it waited for records, and took it again at once, starved the exit for good.
    out = subprocess.run([sys.executable, "-c", EXIT_CHILD, json.dumps(config())],
                         env=child_env(), capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exiting"


def test_the_drain_thread_does_not_hold_its_lock_while_it_waits():
    # flush() and the exit handler take the lock; a waiting drain thread must leave it free
    # (it held it through each wait and took it again at once: flush() starved).
    import tent._logging as tl
    if tl._thread is None:
        pytest.skip("TENT_LOG_STDERR is set: no drain thread")
    tent.flush_logs(0.0)
    free = 0
    for _ in range(50):
        if not tl._lock.locked():
            free += 1
        time.sleep(0.01)
    assert free >= 40, free
