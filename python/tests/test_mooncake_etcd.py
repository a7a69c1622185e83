"""tent.mooncake in etcd mode against a real etcd (one member on loopback ports; skipped
where the etcd binary is not installed): segments are names without a port, each
engine picks its port and get_rpc_port() returns it, peers find each other through
etcd and move verified bytes; a peer restarted under the same name on another port is
found again."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import pytest

from conftest import config, pattern
from tent.mooncake import TransferEngine

ETCD = shutil.which("etcd") or next(
    (p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(ETCD is None,
                                reason="etcd is not installed (apt-get install etcd-server)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(endpoint):
    req = urllib.request.Request(f"http://{endpoint}/v3/kv/range", data=b'{"key":"AA=="}',
                                 method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        return opener.open(req, timeout=2).status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def etcd():
    data = tempfile.mkdtemp(prefix="tent-py-etcd-")
    client, peer = free_port(), free_port()
    endpoint = f"127.0.0.1:{client}"
    with open(os.path.join(data, "etcd.log"), "w") as log:
        proc = subprocess.Popen(
            [ETCD, "--name", "m0", "--data-dir", os.path.join(data, "m0"),
             "--listen-client-urls", f"http://{endpoint}",
             "--advertise-client-urls", f"http://{endpoint}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{peer}", "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not answers(endpoint):
            assert time.monotonic() < deadline and proc.poll() is None, "etcd did not start"
            time.sleep(0.05)
        yield f"etcd://{endpoint}"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


def fleet_config():
    # A short lease: a peer gone without closing disappears within seconds.
    return config(metadata={"backend": "etcd", "etcd": {
        "prefix": f"/tent-py-{os.getpid()}/", "lease_ttl_s": 2, "request_timeout_ms": 1000,
        "retry_initial_ms": 50, "retry_max_ms": 400}})


def registered(engine, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine.get_engine().stats()["fleet"]["store_up"]:
            return True
        time.sleep(0.05)
    return False


def started(name, metadata_server):
    e = TransferEngine(fleet_config())
    assert e.initialize(name, metadata_server, "rdma", "") == 0, e.last_error
    port = e.get_rpc_port()
    assert port > 0 and e.get_engine().control_address.endswith(f":{port}")
    assert e.get_engine().segment_name == name
    return e


def test_names_without_a_port_find_each_other_and_move_bytes(etcd):
    prefill, decode = started("prefill-0", etcd), started("decode-0", etcd)
    try:
        size = 1 << 20
        src = prefill.allocate_managed_buffer(size)
        dst = decode.allocate_managed_buffer(size)
        data = bytes(pattern(size, 5))
        assert prefill.write_bytes_to_buffer(src, data, size) == 0
        # Both registered with their buffers: the entries hold them.
        assert registered(prefill) and registered(decode)
        deadline = time.monotonic() + 30
        while decode.get_first_buffer_address("prefill-0") != src:
            assert time.monotonic() < deadline, "prefill-0's entry never showed its buffer"
            time.sleep(0.05)
        assert decode.transfer_sync_read("prefill-0", dst, src, size) == 0, decode.last_error
        assert decode.read_bytes_from_buffer(dst, size) == data
        assert decode.get_engine().stats()["fleet"]["lookups"] >= 1
    finally:
        prefill.close()
        decode.close()


def test_restarted_peer_on_another_port_is_found_again(etcd):
    decode = started("decode-1", etcd)
    prefill = started("prefill-1", etcd)
    try:
        size = 1 << 16
        first_port = prefill.get_rpc_port()
        dst = decode.allocate_managed_buffer(size)
        src = prefill.allocate_managed_buffer(size)
        assert prefill.write_bytes_to_buffer(src, bytes(pattern(size, 1)), size) == 0
        assert registered(prefill)
        deadline = time.monotonic() + 30
        while decode.get_first_buffer_address("prefill-1") != src:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert decode.transfer_sync_read("prefill-1", dst, src, size) == 0, decode.last_error
        prefill.close()
        # The same name again, another engine on another port.
        prefill = started("prefill-1", etcd)
        assert prefill.get_rpc_port() != first_port
        src = prefill.allocate_managed_buffer(size)
        data = bytes(pattern(size, 2))
        assert prefill.write_bytes_to_buffer(src, data, size) == 0
        # decode's watch sees the new instance under the name and re-resolves it. The new
        # buffer may sit at the old one's address (same process): wait for the new
        # entry's buffer, then read and compare (bounded).
        stats = lambda: decode.get_engine().stats()["fleet"]
        deadline = time.monotonic() + 30
        while stats()["peers_readdressed"] < 1:
            assert time.monotonic() < deadline, "the restarted peer was not re-resolved"
            time.sleep(0.05)
        while not (decode.get_first_buffer_address("prefill-1") == src
                   and decode.transfer_sync_read("prefill-1", dst, src, size) == 0
                   and decode.read_bytes_from_buffer(dst, size) == data):
            assert time.monotonic() < deadline, "the restarted peer was not found again"
            time.sleep(0.05)
    finally:
        prefill.close()
        decode.close()
