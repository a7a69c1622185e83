"""Suite netns: tent engines on really separate network stacks (issue 22).

Two network namespaces, tent-nsA and tent-nsB (three for the kill case: tent-nsC),
joined by veth pairs with addresses from the benchmarking range 198.18.0.0/15 and no
other interface but their own loopback, so no route leaves them. A peer engine
(python/tests/peer.py) runs in A with `ip netns exec`; this process moves itself into
B (setns) before it builds its engine, so the initiator's sockets - control plane and
tcp queue pairs - live in B and every byte crosses the veth.

Checked, with verified bytes: the worker path, the direct path (the engine's stats say
which path served), the Mooncake shim; the veth's byte counters show the payload
crossed; a link set down in the middle of a transfer fails it (FAILED, from the
provider's retry budget) and, once the link is up, no transfer fails; a killed peer fails
its transfers and a new peer works; transfers complete and verify under 1 % and 5 % loss
and a 5 ms delay - with `tc netem` where the kernel has sch_netem, else loss from an
iptables `statistic` DROP rule and delay from delay_forwarder.py in a namespace between
two veths (this kernel and CI's have no sch_netem). Outcomes are asserted, never timings
(the 60 s waits are bounds).

Namespaces and links are removed by the fixture, also when a test fails, and stale
ones of an earlier killed run are removed at start. Skips where namespaces cannot be
created (not root, no CAP_SYS_ADMIN, no veth).
"""

import ctypes
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

try:
    import tent
except ImportError:  # run from the source tree without PYTHONPATH=build/python
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))
    import tent

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEER = ROOT / "python" / "tests" / "peer.py"
PREFIX = "tent-ns"
NS_A, NS_B, NS_C = PREFIX + "A", PREFIX + "B", PREFIX + "C"
ADDR = {NS_A: "198.18.0.1", NS_B: "198.18.0.2", NS_C: "198.18.1.1"}
PEER_SIZE = 64 << 20
RETRY_BUDGET_MS = 1000  # fabric.tcp.retry_budget_ms: how long a silent peer may stay silent
BOUND_S = 60  # a bound on waits, never an expectation
CLONE_NEWNET = 0x40000000


def run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def config(ns):
    ip = ADDR[ns]
    return {
        "eal": {"mode": "eal"},
        "lcores": [{
            "pollers": ["rail:*", "background"],
            "idle": {"spin_polls": 64, "pause_polls": 256, "sleep_min_us": 1,
                     "sleep_max_us": 200},
        }],
        "fabric": {
            "provider": "tcp",
            "tcp": {"devices": [{"name": "tcp0", "listen": f"{ip}:0"},
                                {"name": "tcp1", "listen": f"{ip}:0"}],
                    "retry_budget_ms": RETRY_BUDGET_MS},
        },
        "bootstrap": {"listen": f"{ip}:0", "connect_timeout_ms": 1000, "io_timeout_ms": 1000},
        "workers": {"slice_timeout_ms": 10000, "device_pause_ms": 200},
        "timeouts": {"endpoint_destroy_ms": 100},
        "log": {"level": "error"},
    }


# ---- namespaces -------------------------------------------------------------------


def remove_stale():
    """Namespaces of an earlier run that was killed before its teardown."""
    listed = run("ip", "netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0]
        if name.startswith(PREFIX):
            run("ip", "netns", "del", name, check=False)


class Namespaces:
    """The namespaces and veths of one test module; close() removes them all."""

    def __init__(self):
        self.names = []

    def add(self, ns):
        run("ip", "netns", "add", ns)
        self.names.append(ns)
        run("ip", "-n", ns, "link", "set", "lo", "up")

    def link(self, ns1, dev1, addr1, ns2, dev2, addr2):
        """A veth pair dev1 (in ns1, addr1) - dev2 (in ns2, addr2), both up."""
        run("ip", "-n", ns1, "link", "add", dev1, "type", "veth", "peer", "name", dev2,
            "netns", ns2)
        for ns, dev, addr in ((ns1, dev1, addr1), (ns2, dev2, addr2)):
            run("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")

    def close(self):
        for ns in reversed(self.names):
            run("ip", "netns", "del", ns, check=False)
        self.names.clear()


def rx_bytes(ns, dev):
    out = json.loads(run("ip", "-n", ns, "-s", "-j", "link", "show", dev).stdout)
    return out[0]["stats64"]["rx"]["bytes"]


def tx_bytes(ns, dev):
    out = json.loads(run("ip", "-n", ns, "-s", "-j", "link", "show", dev).stdout)
    return out[0]["stats64"]["tx"]["bytes"]


def enter(ns):
    """Moves this process's (single) thread into `ns`: threads made later inherit it."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)


def has_netem():
    """tc netem needs sch_netem, which some kernels (this CI's) do not have."""
    probe = PREFIX + "probe"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        return run("tc", "-n", probe, "qdisc", "add", "dev", "p0", "root", "netem", "delay",
                   "1ms", check=False).returncode == 0
    finally:
        run("ip", "netns", "del", probe, check=False)


# ---- peers ------------------------------------------------------------------------


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class Peer:
    """peer.py in namespace `ns`: its segment, buffer addresses and a command pipe."""

    def __init__(self, ns, size=PEER_SIZE):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, str(PEER), json.dumps(config(ns)),
             str(size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env())
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=BOUND_S)
            raise RuntimeError(f"peer.py in {ns} did not start (exit {self.proc.returncode})")
        self.info = json.loads(line)
        self.segment = self.info["segment"]
        assert self.segment.startswith(ADDR[ns] + ":"), self.segment

    def addr(self, name, offset=0):
        return self.info[name] + offset

    def command(self, *words):
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def sum(self, name, offset, length):
        return self.command("sum", name, offset, length)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=BOUND_S)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=BOUND_S)


def pattern(size, seed):
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def sha(buf):
    import hashlib
    return hashlib.sha256(buf).hexdigest()


# ---- fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def nets():
    if os.geteuid() != 0:
        pytest.skip("netns: network namespaces need root (CAP_SYS_ADMIN); not root here")
    remove_stale()
    n = Namespaces()
    try:
        n.add(NS_A)
        n.add(NS_B)
        n.link(NS_A, "vA", ADDR[NS_A] + "/24", NS_B, "vB", ADDR[NS_B] + "/24")
    except subprocess.CalledProcessError as e:
        n.close()
        pytest.skip(f"netns: cannot create network namespaces and veths here: {e.stderr.strip()}")
    try:
        yield n
    finally:
        n.close()


@pytest.fixture(scope="module")
def peer(nets):
    p = Peer(NS_A)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def engine(nets):
    enter(NS_B)
    e = tent.TransferEngine(config(NS_B))
    yield e
    e.close()


@pytest.fixture(scope="module")
def seg(engine, peer):
    return engine.open_segment(peer.segment)


@pytest.fixture
def local(engine):
    buf = np.zeros(16 << 20, dtype=np.uint8)
    engine.register_memory(buf)
    yield buf
    engine.unregister_memory(buf)


# ---- tests ------------------------------------------------------------------------


def test_the_engines_run_tcp_on_their_own_stacks(engine, peer):
    s = engine.stats()
    assert s["provider"] == "tcp", s["provider"]
    assert s["provider_choice"] == "configured (fabric.provider: tcp)"
    assert engine.segment_name.startswith(ADDR[NS_B] + ":")
    # Nothing but lo and the veth in each namespace: no route leaves them.
    for ns, dev in ((NS_A, "vA"), (NS_B, "vB")):
        links = {l["ifname"] for l in json.loads(run("ip", "-n", ns, "-j", "link").stdout)}
        assert links == {"lo", dev}, links


def test_worker_path_write_and_read_cross_the_veth(engine, peer, seg, local):
    n = 16 << 20
    local[:] = pattern(n, 11)
    before_rx, before_tx = rx_bytes(NS_A, "vA"), tx_bytes(NS_A, "vA")
    engine.transfer_sync(seg, tent.OpCode.WRITE, [local.ctypes.data], [peer.addr("alloc")], n)
    assert peer.sum("alloc", 0, n) == sha(local)
    # The payload went B -> A over the veth (headers and acks come on top).
    assert rx_bytes(NS_A, "vA") - before_rx >= n
    local[:] = 0
    engine.transfer_sync(seg, tent.OpCode.READ, [local.ctypes.data], [peer.addr("numpy")], n)
    assert sha(local) == peer.sum("numpy", 0, n)
    assert tx_bytes(NS_A, "vA") - before_tx >= n


def test_direct_path_across_namespaces(engine, peer, seg, local):
    n = 4096
    before = engine.stats()["direct"]["succeeded"]
    for i in range(16):
        local[:n] = pattern(n, 100 + i)
        engine.transfer_sync(seg, tent.OpCode.WRITE, [local.ctypes.data],
                             [peer.addr("alloc", i * n)], n,
                             intent=tent.Intent.FOREGROUND_GET, deadline_us=BOUND_S * 1000000)
        assert peer.sum("alloc", i * n, n) == sha(local[:n])
    engine.transfer_sync(seg, tent.OpCode.READ, [local.ctypes.data], [peer.addr("readonly")], n,
                         intent=tent.Intent.FOREGROUND_GET)
    assert sha(local[:n]) == peer.sum("readonly", 0, n)
    # The direct path served them (a fallback to the worker path would not count here).
    assert engine.stats()["direct"]["succeeded"] > before


def test_mooncake_shim_across_namespaces(nets, engine, peer):
    from tent.mooncake import P2PHANDSHAKE, TransferEngine
    mc = TransferEngine(config(NS_B))
    try:
        assert mc.initialize(ADDR[NS_B], P2PHANDSHAKE, "tcp", "") == 0, mc.last_error
        assert mc.get_engine().stats()["provider"] == "tcp"
        n = 1 << 20
        src = mc.allocate_managed_buffer(n)
        data = bytes(pattern(n, 5))
        assert mc.write_bytes_to_buffer(src, data, n) == 0
        assert mc.transfer_sync_write(peer.segment, src, peer.addr("alloc"), n) == 0, \
            mc.last_error
        assert peer.sum("alloc", 0, n) == sha(np.frombuffer(data, np.uint8))
    finally:
        mc.close()


def wait_terminal(engine, batch):
    end = time.monotonic() + BOUND_S
    while time.monotonic() < end:
        state, _ = engine.get_batch_status(batch)
        if state not in (tent.TransferState.PENDING, tent.TransferState.INITIAL):
            return state
        time.sleep(0.01)
    return None


def wait_link_up(ns, dev):
    end = time.monotonic() + BOUND_S
    while time.monotonic() < end:
        out = json.loads(run("ip", "-n", ns, "-j", "link", "show", dev).stdout)
        if out[0]["operstate"] == "UP":
            return
        time.sleep(0.01)
    pytest.fail(f"{dev} in {ns} is not up {BOUND_S} s after link up")


def rate_limit(ns, dev, rate):
    """sch_tbf: slow enough that a transfer is surely still running when the link drops."""
    return run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst",
               "64kb", "latency", "400ms", check=False).returncode == 0


def test_link_down_mid_transfer_fails_it_and_the_link_back_heals(engine, peer, seg):
    n = 32 << 20
    buf = np.zeros(n, dtype=np.uint8)
    buf[:] = pattern(n, 21)
    engine.register_memory(buf)
    limited = rate_limit(NS_B, "vB", "100mbit")  # ~2.7 s for 32 MiB: the drop lands inside
    try:
        for attempt in range(3):
            start = rx_bytes(NS_A, "vA")
            batch = engine.transfer_async(seg, tent.OpCode.WRITE, [buf.ctypes.data],
                                          [peer.addr("alloc")], n)
            end = time.monotonic() + BOUND_S
            while rx_bytes(NS_A, "vA") - start < (1 << 20) and time.monotonic() < end:
                time.sleep(0.002)
            running = engine.get_batch_status(batch)[0] == tent.TransferState.PENDING
            run("ip", "-n", NS_B, "link", "set", "vB", "down")
            state = wait_terminal(engine, batch)
            engine.free_batch(batch)
            run("ip", "-n", NS_B, "link", "set", "vB", "up")
            assert state is not None, f"the transfer did not end within {BOUND_S} s of link down"
            if running:
                # Failed by the provider's dead-peer detection (TCP_USER_TIMEOUT and the
                # no-progress check, both fabric.tcp.retry_budget_ms) as a NIC's retry
                # counter fails it: FAILED, long before the worker's slice_timeout_ms
                # (10 s here) could make it TIMEOUT. Never COMPLETED.
                assert state == tent.TransferState.FAILED, state
                break
            # Done before the drop (a very slow poll of this test): not what is tested; again.
        else:
            pytest.fail("the transfer completed before the link went down, three times")
    finally:
        if limited:
            run("tc", "-n", NS_B, "qdisc", "del", "dev", "vB", "root", check=False)
    # The link is back once both ends are up again (the kernel restores the routes it
    # dropped); the next transfer to that peer succeeds (the endpoint reconnects).
    wait_link_up(NS_B, "vB")
    wait_link_up(NS_A, "vA")
    # No transfer fails after the link is back: an endpoint whose connections the drop
    # broke is noticed (its QPs are in ERR) and replaced before a request uses it. While
    # the segment reconnects, submits may be refused Unavailable ("reconnecting, next
    # attempt in N ms"): refused before they start, not failed. Then a transfer succeeds.
    failures = []
    end = time.monotonic() + BOUND_S
    while True:
        try:
            engine.transfer_sync(seg, tent.OpCode.WRITE, [buf.ctypes.data], [peer.addr("alloc")],
                                 n, timeout_s=BOUND_S)
            break
        except tent.Error as e:
            failures.append((e.code, str(e)))
            if time.monotonic() > end:
                pytest.fail(f"no transfer succeeded {BOUND_S} s after the link came back: {failures}")
            if e.code == "Unavailable":
                time.sleep(0.02)
    assert [f for f in failures if f[0] != "Unavailable"] == [], failures
    assert peer.sum("alloc", 0, n) == sha(buf)
    engine.unregister_memory(buf)


def test_a_killed_peer_fails_its_transfers_and_a_new_peer_works(nets, engine, local):
    nets.add(NS_C)
    nets.link(NS_B, "vBc", "198.18.1.2/24", NS_C, "vC", ADDR[NS_C] + "/24")
    # C reaches B's listeners (198.18.0.2) through B's end of their link; nothing else.
    run("ip", "-n", NS_C, "route", "add", "198.18.0.0/24", "via", "198.18.1.2")
    victim = Peer(NS_C)
    try:
        target = engine.open_segment(victim.segment)
        n = 1 << 20
        local[:n] = pattern(n, 31)
        engine.transfer_sync(target, tent.OpCode.WRITE, [local.ctypes.data],
                             [victim.addr("alloc")], n)
        assert victim.sum("alloc", 0, n) == sha(local[:n])
        victim.kill()
        with pytest.raises(tent.Error):
            engine.transfer_sync(target, tent.OpCode.WRITE, [local.ctypes.data],
                                 [victim.addr("alloc")], n, timeout_s=BOUND_S)
        engine.close_segment(target)
        fresh = Peer(NS_C)
        try:
            target = engine.open_segment(fresh.segment)
            engine.transfer_sync(target, tent.OpCode.WRITE, [local.ctypes.data],
                                 [fresh.addr("alloc")], n, timeout_s=BOUND_S)
            assert fresh.sum("alloc", 0, n) == sha(local[:n])
        finally:
            fresh.stop()
    finally:
        victim.stop() if victim.proc.poll() is None else None


def iptables(ns):
    """The iptables that works in `ns` (nft or legacy backend); None without one."""
    for binary in ("iptables", "iptables-legacy"):
        if run("ip", "netns", "exec", ns, binary, "-S", "OUTPUT", check=False).returncode == 0:
            return binary
    return None


def write_and_read_back(engine, peer, seg, local, n, seed):
    local[:n] = pattern(n, seed)
    engine.transfer_sync(seg, tent.OpCode.WRITE, [local.ctypes.data], [peer.addr("alloc")], n,
                         timeout_s=BOUND_S)
    assert peer.sum("alloc", 0, n) == sha(local[:n])
    local[:n] = 0
    engine.transfer_sync(seg, tent.OpCode.READ, [local.ctypes.data], [peer.addr("numpy")], n,
                         timeout_s=BOUND_S)
    assert sha(local[:n]) == peer.sum("numpy", 0, n)


@pytest.mark.parametrize("percent", [1, 5])
def test_loss_transfers_complete_and_verify(engine, peer, seg, local, percent):
    """Random loss both ways. With netem where the kernel has it; else (this kernel, CI's)
    an iptables `-m statistic --mode random` DROP on each namespace's output to the veth,
    whose counters prove frames were really dropped."""
    if has_netem():
        for ns, dev in ((NS_B, "vB"), (NS_A, "vA")):
            run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "loss", f"{percent}%")
        try:
            write_and_read_back(engine, peer, seg, local, 8 << 20, 40 + percent)
        finally:
            for ns, dev in ((NS_B, "vB"), (NS_A, "vA")):
                run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
        return
    binary = iptables(NS_B)
    assert binary is not None, ("netns: neither tc netem nor iptables works here; "
                                "scripts/ensure-build.sh installs iptables")
    rule = ["OUTPUT", "-m", "statistic", "--mode", "random", "--probability",
            str(percent / 100), "-j", "DROP"]
    added = []
    try:
        for ns, dev in ((NS_B, "vB"), (NS_A, "vA")):
            run("ip", "netns", "exec", ns, binary, "-A", rule[0], "-o", dev, *rule[1:])
            added.append((ns, dev))
        write_and_read_back(engine, peer, seg, local, 8 << 20, 40 + percent)
        dropped = 0
        for ns, _ in added:
            out = run("ip", "netns", "exec", ns, binary, "-L", "OUTPUT", "-v", "-x", "-n").stdout
            dropped += sum(int(l.split()[0]) for l in out.splitlines() if "DROP" in l.split()[2:3])
        assert dropped > 0, "the loss rules dropped nothing: the test did not test loss"
    finally:
        for ns, dev in added:
            run("ip", "netns", "exec", ns, binary, "-D", rule[0], "-o", dev, *rule[1:],
                check=False)


DELAY_MS = 5


def test_delay_transfers_complete_and_verify(nets, engine, local):
    """A 5 ms one-way delay. With netem where the kernel has it; else a userspace
    forwarder (delay_forwarder.py) in a namespace M between B and a new peer in D:
    B (vBm 198.18.3.2) - M (mB, mD; no address) - D (vD 198.18.3.1)."""
    ns_m, ns_d = PREFIX + "M", PREFIX + "D"
    ADDR[ns_d] = "198.18.3.1"
    nets.add(ns_m)
    nets.add(ns_d)
    for ns1, dev1, dev2, ns2 in ((NS_B, "vBm", "mB", ns_m), (ns_d, "vD", "mD", ns_m)):
        run("ip", "-n", ns1, "link", "add", dev1, "type", "veth", "peer", "name", dev2,
            "netns", ns2)
        run("ip", "-n", ns2, "link", "set", dev2, "up")
    for ns, dev, addr in ((NS_B, "vBm", "198.18.3.2/24"), (ns_d, "vD", "198.18.3.1/24")):
        run("ip", "-n", ns, "addr", "add", addr, "dev", dev)
        run("ip", "-n", ns, "link", "set", dev, "up")
    run("ip", "-n", ns_d, "route", "add", "198.18.0.0/24", "via", "198.18.3.2")
    forwarder = None
    if has_netem():
        run("tc", "-n", ns_m, "qdisc", "add", "dev", "mB", "root", "netem", "delay",
            f"{DELAY_MS}ms")
        run("tc", "-n", ns_m, "qdisc", "add", "dev", "mD", "root", "netem", "delay",
            f"{DELAY_MS}ms")
        run("ip", "-n", ns_m, "link", "add", "br0", "type", "bridge")
        for dev in ("mB", "mD"):
            run("ip", "-n", ns_m, "link", "set", dev, "master", "br0")
        run("ip", "-n", ns_m, "link", "set", "br0", "up")
    else:
        forwarder = subprocess.Popen(
            ["ip", "netns", "exec", ns_m, sys.executable,
             str(pathlib.Path(__file__).with_name("delay_forwarder.py")), "mB", "mD",
             str(DELAY_MS)], stdout=subprocess.PIPE, text=True)
        assert forwarder.stdout.readline().strip() == "ready"
    far = None
    try:
        # The fixture's own check: a TCP handshake takes one round trip, which the delay
        # can only lengthen (a lower bound, whatever the load).
        probe = ("import socket,time; s=socket.socket(); t=time.monotonic(); "
                 "s.connect_ex(('198.18.3.2', 9)); print(time.monotonic()-t)")
        rtt = float(run("ip", "netns", "exec", ns_d, sys.executable, "-c", probe).stdout)
        assert rtt >= 2 * DELAY_MS / 1000 * 0.99, f"no delay on the path: {rtt * 1000:.2f} ms"
        far = Peer(ns_d)
        target = engine.open_segment(far.segment)
        before = rx_bytes(ns_d, "vD")
        n = 8 << 20
        write_and_read_back(engine, far, target, local, n, 51)
        assert rx_bytes(ns_d, "vD") - before >= n  # it crossed the delayed link
        engine.close_segment(target)
    finally:
        if far is not None:
            far.stop()
        if forwarder is not None:
            forwarder.kill()
            forwarder.wait(timeout=BOUND_S)
