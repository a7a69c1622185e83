"""Mooncake's own Python engine tests (python/tests/mooncake_upstream: copies from
Mooncake's mooncake-wheel/tests with attribution) run against tent.mooncake through
`python -m tent.mooncake`, as unmodified code would: the target process and
transfer_engine_initiator_test.py's unittest cases, over protocol tcp, with the
metadata server as Mooncake's tests give it (etcd as a bare host:port; skipped without
etcd) and with P2PHANDSHAKE. Every case of the file applies; none is skipped."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

from conftest import BASE, child_env
from test_mooncake_etcd import ETCD, etcd, free_port  # noqa: F401 (etcd: the fixture)

UPSTREAM = pathlib.Path(__file__).resolve().parent / "mooncake_upstream"
CASES = ["test_random_write_circle_times", "test_batch_write_read", "test_async_batch_write_read",
         "test_async_submit_to_unknown_peer_returns_zero", "test_send_probe_reachable_peer",
         "test_send_probe_unknown_peer"]


def run_upstream(metadata_server, tmp_path):
    cfg = {k: v for k, v in BASE.items() if k != "fabric"}  # protocol tcp picks the provider
    config = tmp_path / "tent.json"  # JSON is YAML
    config.write_text(json.dumps(cfg))
    env = child_env()
    env.update({"TENT_CONFIG": str(config), "PROTOCOL": "tcp", "CIRCLE": "20",
                "MC_METADATA_SERVER": metadata_server,
                "TARGET_SERVER_NAME": f"127.0.0.1:{free_port()}",
                "INITIATOR_SERVER_NAME": f"127.0.0.1:{free_port()}"})
    log = open(tmp_path / "target.log", "w")
    target = subprocess.Popen(
        [sys.executable, "-u", "-m", "tent.mooncake", str(UPSTREAM / "transfer_engine_target.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        lines = []
        while not lines or "Target server ready" not in lines[-1]:
            lines.append(target.stdout.readline())
            assert lines[-1], f"target ended: {lines} {(tmp_path / 'target.log').read_text()}"
        out = subprocess.run(
            [sys.executable, "-m", "tent.mooncake",
             str(UPSTREAM / "transfer_engine_initiator_test.py"), "-v"],
            capture_output=True, text=True, env=env, timeout=240)
    finally:
        target.stdin.close()
        target.wait(timeout=60)
        log.close()
    report = out.stderr
    for case in CASES:
        assert f"{case} " in report, f"{case} did not run:\n{report}"
    assert out.returncode == 0, report
    assert f"Ran {len(CASES)} tests" in report and "OK" in report, report


@pytest.mark.skipif(ETCD is None, reason="etcd is not installed (apt-get install etcd-server)")
def test_upstream_initiator_tests_with_etcd_as_mooncake_names_it(etcd, tmp_path):
    run_upstream(etcd[len("etcd://"):], tmp_path)  # "127.0.0.1:2379", no scheme


def test_upstream_initiator_tests_with_p2p_handshake(tmp_path):
    run_upstream("P2PHANDSHAKE", tmp_path)
