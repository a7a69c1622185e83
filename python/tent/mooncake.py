"""A drop-in for ``mooncake.engine.TransferEngine`` on top of tent.

Same method names, argument order and return codes as Mooncake's Python engine
(P2P handshake metadata: targets are ``host:port`` segment names)::

    from tent.mooncake import TransferEngine   # instead of: from mooncake.engine import ...
    engine = TransferEngine()
    engine.initialize("10.0.0.1", "P2PHANDSHAKE", "rdma", "mlx5_0,mlx5_1")
    session = f"10.0.0.1:{engine.get_rpc_port()}"

Failures return Mooncake's codes (-1, or 0 for the calls that return a batch id:
the batch async calls and transfer_submit_write) and are logged on the ``tent.mooncake`` logger; ``last_error`` keeps the last message.
The transfer calls take optional keywords ``intent=`` (a ``tent.Intent`` or its
name) and ``deadline_us=`` that select tent's direct path; without them the
behaviour is Mooncake's. docs/python.md has the method-by-method table.
"""

import copy
import ctypes
import functools
import glob
import itertools
import json
import logging
import operator
import os
import socket
import threading
import time

import tent

P2PHANDSHAKE = "P2PHANDSHAKE"


class TransferOpcode:
    """Mooncake's ``TransferOpcode``: ``Read`` and ``Write`` as its binding spells them
    (also exported at module level, as Mooncake's ``export_values()`` does), plus tent's
    ``READ`` / ``WRITE``. The values are ``tent.OpCode`` members, so either spelling
    works wherever an opcode is taken."""

    Read = tent.OpCode.READ
    Write = tent.OpCode.WRITE
    READ = tent.OpCode.READ
    WRITE = tent.OpCode.WRITE


Read = TransferOpcode.Read
Write = TransferOpcode.Write

# A Mooncake notification travels as one tent notification: this marker, the name, a
# NUL, the message. get_notifies() takes it apart; a notification from tent's native
# API (no marker) comes back with the sender's segment name as its name.
_NOTIFY_MARK = b"\x00tent.mooncake\x00"


class TransferNotify:
    """Mooncake's ``TransferNotify(name, msg)``: ``notify=`` of ``transfer_sync`` and
    ``batch_transfer_sync``, and what ``get_notifies()`` returns. The target receives it
    only after every byte of the transfer landed, and none when the transfer failed."""

    __slots__ = ("name", "msg")

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __eq__(self, other):
        return isinstance(other, TransferNotify) and (self.name, self.msg) == (other.name, other.msg)

    def __repr__(self):
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"

    def _encode(self):
        name = self.name.encode() if isinstance(self.name, str) else bytes(self.name)
        msg = self.msg.encode() if isinstance(self.msg, str) else bytes(self.msg)
        if b"\x00" in name:
            raise tent.Error("InvalidArgument", "TransferNotify.name must not contain NUL")
        return _NOTIFY_MARK + name + b"\x00" + msg

    @classmethod
    def _decode(cls, sender, data):
        if data.startswith(_NOTIFY_MARK):
            name, _, msg = data[len(_NOTIFY_MARK):].partition(b"\x00")
            return cls(name.decode(errors="surrogateescape"), msg.decode(errors="surrogateescape"))
        return cls(sender, data.decode(errors="surrogateescape"))

_log = logging.getLogger("tent.mooncake")
_FAILURES = (tent.Error, TypeError, ValueError, OverflowError, KeyError, IndexError)


def _transfer_timeout_s():
    """Mooncake's MC_TRANSFER_TIMEOUT: seconds, at least 5, default 30."""
    try:
        return max(5, int(os.environ.get("MC_TRANSFER_TIMEOUT", "30")))
    except ValueError:
        return 30


def _returns(failure):
    """Runs a method, turning a failure into Mooncake's return code `failure`."""

    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except _FAILURES as e:
                self.last_error = f"{method.__name__}: {e}"
                _log.warning("%s", self.last_error)
                return failure

        return call

    return wrap


def _merge(base, override):
    """`base` with `override`'s keys put in, recursively (both dicts)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _config_dict(config):
    """A tent config (dict, YAML text or file path; None: TENT_CONFIG) as a dict."""
    if config is None:
        config = os.environ.get("TENT_CONFIG") or {}
    if isinstance(config, dict):
        return config
    import yaml  # python3-yaml; only for a config given as YAML

    text = config if "\n" in config or ": " in config else open(config).read()
    return yaml.safe_load(text) or {}


def _listen_settings(local_hostname):
    """bootstrap keys for Mooncake's local_hostname: 'host[:port]', no port = any port."""
    host, port = local_hostname, "0"
    if host.startswith("["):
        raise tent.Error("InvalidArgument", "local_hostname: IPv6 is not supported by tent's listener")
    if host.count(":") == 1:
        host, port = host.split(":")
    ip = socket.gethostbyname(host)  # the listener takes IPv4 addresses
    settings = {"listen": f"{ip}:{port}"}
    if ip != host:
        settings["advertise_host"] = host  # peers name this segment by the host they know
    return settings


def _metadata_settings(local_hostname, metadata_server):
    """metadata keys for Mooncake's metadata_server: P2PHANDSHAKE (None: p2p, segments
    named host:port) or etcd://host:port[,host:port] (segments named local_hostname,
    with or without a port, registered in etcd). As Mooncake's binding, a server without
    a scheme is etcd's: "127.0.0.1:2379" is etcd://127.0.0.1:2379."""
    if metadata_server == P2PHANDSHAKE:
        return None
    if isinstance(metadata_server, str) and "://" not in metadata_server:
        metadata_server = "etcd://" + metadata_server
    if isinstance(metadata_server, str) and metadata_server.startswith("etcd://"):
        endpoints = [e.strip() for e in metadata_server[len("etcd://"):].split(",") if e.strip()]
        if not endpoints or any(e.count(":") != 1 or "/" in e for e in endpoints):
            raise tent.Error(
                "InvalidArgument",
                f"metadata_server {metadata_server!r}: expected etcd://host:port[,host:port]")
        return {"backend": "etcd", "name": local_hostname, "etcd": {"endpoints": endpoints}}
    raise tent.Error(
        "NotSupported",
        f"metadata_server {metadata_server!r}: tent.mooncake supports {P2PHANDSHAKE!r} "
        "(peer-to-peer: segments are named host:port) and etcd://host:port[,host:port]; "
        "redis and http metadata servers are not implemented")


def _fabric_for(protocol, devices, fabric, listen):
    """The fabric keys for Mooncake's protocol and device names over the config's.

    'tcp' selects the tcp provider: its devices (the names given, else tcp0) listen on
    local_hostname's address, unless the config lists tcp devices itself. 'rdma' selects
    verbs with the named devices - a missing one fails, naming it and 'tcp' - except where
    the config chose soft (tests, benchmarks): never a silent soft device named mlx5_0."""
    if protocol == "tcp":
        out = {"provider": "tcp"}
        if not fabric.get("tcp", {}).get("devices"):
            host = listen["listen"].rsplit(":", 1)[0]
            tcp = {"devices": [{"name": d, "listen": f"{host}:0"} for d in devices or ["tcp0"]]}
            out["tcp"] = tcp
        return out
    if fabric.get("provider") == "soft":
        out = {"verbs": {"devices": devices}} if devices else {}
        if devices and not fabric.get("soft", {}).get("devices"):
            out["soft"] = {"devices": [{"name": d} for d in devices]}
        return out
    out = {"provider": "verbs"}
    if devices:
        out["verbs"] = {"devices": devices}
    return out


def _length(n):
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"length {n} is negative")
    return n


class _Batch:
    def __init__(self, batch, tasks, timeout_s):
        self.batch = batch
        self.tasks = tasks
        self.deadline = time.monotonic() + timeout_s


def _read_int(path, default):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return default


def _local_topology(device_filter):
    """Mooncake's topology matrix as JSON: {"cpu:N": [[preferred], [available]]}.

    As Mooncake's CPU entries: the RDMA devices of /sys/class/infiniband (those named in
    ``device_filter`` when it names any) on NUMA node N are preferred for cpu:N, the
    others available. tent does not report "cuda:N" entries here: GPU affinity comes
    from the CUDA driver at registration (docs/gpu.md)."""
    wanted = {d.strip() for d in (device_filter or "").split(",") if d.strip()}
    devices = []
    for path in sorted(glob.glob("/sys/class/infiniband/*")):
        name = os.path.basename(path)
        if not wanted or name in wanted:
            devices.append((name, _read_int(os.path.join(path, "device", "numa_node"), -1)))
    nodes = sorted(int(os.path.basename(p)[4:])
                   for p in glob.glob("/sys/devices/system/node/node[0-9]*")) or [0]
    matrix = {}
    for node in nodes:
        preferred = [name for name, numa in devices if numa in (node, -1)]
        available = [name for name, numa in devices if numa not in (node, -1)]
        matrix[f"cpu:{node}"] = [preferred, available]
    return json.dumps(matrix)


class TransferEngine:
    """Mooncake's Python TransferEngine, backed by a tent engine.

    ``config`` (not in Mooncake) is a tent config (dict, YAML text or path; None:
    ``TENT_CONFIG``) that initialize() completes with the listener and devices.
    """

    TransferOpcode = TransferOpcode  # Mooncake: TransferEngine.TransferOpcode.Write

    def __init__(self, config=None):
        self._config = config
        self._engine = None
        self._registered = []  # local buffers in registration order (first: Mooncake's first)
        self._batches = {}
        self._handles = itertools.count(1)
        self._lock = threading.Lock()
        self._timeout_s = _transfer_timeout_s()
        self.last_error = ""

    # ---- set-up ------------------------------------------------------------------

    @_returns(-1)
    def initialize(self, local_hostname, metadata_server, protocol, device_name):
        if self._engine is not None:
            raise tent.Error("FailedPrecondition", "already initialized")
        metadata = _metadata_settings(local_hostname, metadata_server)
        if protocol not in ("rdma", "tcp"):
            raise tent.Error(
                "NotSupported",
                f"protocol {protocol!r}: tent.mooncake supports 'rdma' (verbs on an RDMA NIC) "
                "and 'tcp' (its tcp provider, for hosts without RDMA)")
        base = _config_dict(self._config)
        listen = None
        if metadata is None:
            listen = _listen_settings(local_hostname)
            override = {"bootstrap": listen}
        else:
            # etcd: local_hostname is a name; a host that resolves is also where the
            # listener binds, otherwise the config's bootstrap.listen (127.0.0.1:0).
            override = {"metadata": metadata}
            try:
                listen = _listen_settings(local_hostname)
                override["bootstrap"] = listen
            except (OSError, UnicodeError):
                pass
        if listen is None:
            listen = {"listen": base.get("bootstrap", {}).get("listen", "127.0.0.1:0")}
        devices = [d.strip() for d in device_name.split(",") if d.strip()]
        override["fabric"] = _fabric_for(protocol, devices, base.get("fabric", {}), listen)
        self._engine = tent.TransferEngine(_merge(base, override))
        return 0

    @_returns(-1)
    def initialize_ext(self, local_hostname, metadata_server, protocol, device_name,
                       metadata_type):
        # As Mooncake: a server without a scheme takes metadata_type's ("etcd", "p2p").
        if (metadata_server != P2PHANDSHAKE and "://" not in metadata_server
                and metadata_type not in ("", "p2p")):
            metadata_server = f"{metadata_type}://{metadata_server}"
        return self.initialize(local_hostname, metadata_server, protocol, device_name)

    def get_engine(self):
        """The tent.TransferEngine underneath (Mooncake: its inner engine)."""
        return self._engine

    @_returns(-1)
    def get_rpc_port(self):
        # The listener's port, also in etcd mode where the segment name is only a name.
        return int(self._native().control_address.rsplit(":", 1)[1])

    def close(self):
        """Closes the tent engine (not in Mooncake, whose engine closes when dropped)."""
        if self._engine is not None:
            self._engine.close()

    # ---- memory ------------------------------------------------------------------

    @_returns(0)
    def allocate_managed_buffer(self, length):
        addr = self._native().allocate_local_memory(length)
        self._registered.append(addr)
        return addr

    @_returns(-1)
    def free_managed_buffer(self, buffer_addr, length):
        self._native().free_local_memory(buffer_addr)
        self._forget(buffer_addr)
        return 0

    @_returns(-1)
    def register_memory(self, buffer_addr, capacity, location="*"):
        """As Mooncake: ``location="*"`` finds GPU memory itself (the CUDA driver says
        which GPU a pointer is on), so a tensor's ``data_ptr()`` registers on its GPU.
        ``buffer_addr`` may also be the tensor itself (torch, or any object with
        ``__cuda_array_interface__``)."""
        self._native().register_memory(buffer_addr, capacity, location)
        addr = self._address_of(buffer_addr)
        if addr is not None:
            self._registered.append(addr)
        return 0

    @_returns(-1)
    def unregister_memory(self, buffer_addr):
        self._native().unregister_memory(buffer_addr)
        self._forget(self._address_of(buffer_addr))
        return 0

    @_returns(-1)
    def batch_register_memory(self, buffer_addresses, capacities, location="*"):
        if len(buffer_addresses) != len(capacities):
            raise ValueError("buffer_addresses and capacities differ in length")
        engine, done = self._native(), []
        try:
            for addr, length in zip(buffer_addresses, capacities):
                engine.register_memory(addr, length, location)
                done.append(addr)
        except _FAILURES:
            for addr in done:  # all or nothing
                engine.unregister_memory(addr)
            raise
        self._registered.extend(a for a in map(self._address_of, done) if a is not None)
        return 0

    @_returns(-1)
    def batch_unregister_memory(self, buffer_addresses):
        failed, code = [], None
        for addr in buffer_addresses:
            try:
                self._native().unregister_memory(addr)
                self._forget(self._address_of(addr))
            except tent.Error as e:
                failed.append(f"{addr:#x}: {e}")
                code = code or e.code  # memory in use: FailedPrecondition, not NotFound
        if failed:
            raise tent.Error(code, "; ".join(failed))
        return 0

    @_returns(-1)
    def write_bytes_to_buffer(self, dest_address, src_ptr, length):
        data = bytes(memoryview(src_ptr))  # bytes-like only: bytes(5) would be five zeros
        length = _length(length)
        if length > len(data):
            raise ValueError(f"length {length} is more than the {len(data)} bytes given")
        self._check_local(dest_address, length)
        ctypes.memmove(dest_address, data, length)
        return 0

    @_returns(b"")
    def read_bytes_from_buffer(self, source_address, length):
        length = _length(length)
        self._check_local(source_address, length)
        return ctypes.string_at(source_address, length)

    # ---- peers -------------------------------------------------------------------

    @_returns(0)
    def get_first_buffer_address(self, segment_name):
        """As Mooncake: the first buffer registered. For this engine's own segment that
        is the registration order this object saw; for a peer, the order its descriptor
        lists (registration order; a peer of descriptor v1/v2 does not say, and its
        lowest-addressed buffer comes first)."""
        engine = self._native()
        if segment_name == engine.segment_name and self._registered:
            return self._registered[0]
        buffers = engine.segment_buffers(engine.open_segment(segment_name))
        if not buffers and segment_name != engine.segment_name:
            buffers = engine.segment_buffers(self._reopen(segment_name))  # fetch it afresh
        return buffers[0]["addr"] if buffers else 0

    @_returns("")
    def get_local_topology(self, device_name=None):
        """Mooncake's JSON topology matrix of this node (needs no initialize())."""
        return _local_topology(device_name)

    @_returns(-1)
    def send_probe(self, peer_server_name):
        """Brings a failed session back: closes the segment and opens it again.

        Opening fetches the peer's descriptor over its control listener, so this is
        also a reachability probe: -1 when the peer does not answer. Transfers still
        in flight to that peer fail (its endpoints are reset).
        """
        self._reopen(peer_server_name)
        return 0

    # ---- transfers ---------------------------------------------------------------

    @_returns(-1)
    def transfer_sync_write(self, target_hostname, buffer, peer_buffer_address, length,
                            transport_hint="", *, intent=None, deadline_us=0):
        return self._sync(target_hostname, tent.OpCode.WRITE, [buffer], [peer_buffer_address],
                          [length], intent, deadline_us)

    @_returns(-1)
    def transfer_sync_read(self, target_hostname, buffer, peer_buffer_address, length,
                           transport_hint="", *, intent=None, deadline_us=0):
        return self._sync(target_hostname, tent.OpCode.READ, [buffer], [peer_buffer_address],
                          [length], intent, deadline_us)

    @_returns(-1)
    def transfer_sync(self, target_hostname, buffer, peer_buffer_address, length, opcode,
                      notify=None, transport_hint="", *, intent=None, deadline_us=0):
        return self._sync(target_hostname, opcode, [buffer], [peer_buffer_address], [length],
                          intent, deadline_us, notify)

    @_returns(-1)
    def batch_transfer_sync_write(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint="", *, intent=None, deadline_us=0):
        return self._sync(target_hostname, tent.OpCode.WRITE, buffers, peer_buffer_addresses,
                          lengths, intent, deadline_us)

    @_returns(-1)
    def batch_transfer_sync_read(self, target_hostname, buffers, peer_buffer_addresses,
                                 lengths, transport_hint="", *, intent=None, deadline_us=0):
        return self._sync(target_hostname, tent.OpCode.READ, buffers, peer_buffer_addresses,
                          lengths, intent, deadline_us)

    @_returns(-1)
    def batch_transfer_sync(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                            opcode, notify=None, transport_hint="", *, intent=None,
                            deadline_us=0):
        return self._sync(target_hostname, opcode, buffers, peer_buffer_addresses, lengths,
                          intent, deadline_us, notify)

    @_returns(0)
    def batch_transfer_async_write(self, target_hostname, buffers, peer_buffer_addresses,
                                   lengths, transport_hint="", *, intent=None, deadline_us=0):
        return self._async(target_hostname, tent.OpCode.WRITE, buffers, peer_buffer_addresses,
                           lengths, intent, deadline_us)

    @_returns(0)
    def batch_transfer_async_read(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint="", *, intent=None, deadline_us=0):
        return self._async(target_hostname, tent.OpCode.READ, buffers, peer_buffer_addresses,
                           lengths, intent, deadline_us)

    @_returns(0)
    def batch_transfer_async(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                             opcode, transport_hint="", *, intent=None, deadline_us=0):
        return self._async(target_hostname, opcode, buffers, peer_buffer_addresses, lengths,
                           intent, deadline_us)

    @_returns(0)
    def transfer_submit_write(self, target_hostname, buffer, peer_buffer_address, length,
                              transport_hint="", *, intent=None, deadline_us=0):
        return self._async(target_hostname, tent.OpCode.WRITE, [buffer], [peer_buffer_address],
                           [length], intent, deadline_us)

    @_returns(-1)
    def get_batch_transfer_status(self, batch_ids):
        """Waits for the batches: 0 when every one completed, -1 otherwise (all freed)."""
        batches = [self._take(b) for b in batch_ids]
        ok = all(b is not None for b in batches)
        for b in batches:
            if b is None:
                continue
            if ok:
                remaining = max(0.0, b.deadline - time.monotonic())
                try:
                    state, _ = self._native().wait_batch(b.batch, remaining)
                    ok = state == tent.TransferState.COMPLETED
                except tent.Error as e:
                    self.last_error = f"get_batch_transfer_status: {e}"
                    ok = False
            self._native().free_batch(b.batch)
        return 0 if ok else -1

    @_returns(-1)
    def transfer_check_status(self, batch_id):
        """1 completed, 0 running, -1 failed (or unknown batch), -2 timed out."""
        with self._lock:
            b = self._batches.get(batch_id)
        if b is None:
            raise tent.Error("NotFound", f"batch {batch_id} is unknown or already finished")
        state, _ = self._native().get_transfer_status(b.batch, 0)
        if state == tent.TransferState.PENDING:
            return 0
        self._take(batch_id)
        self._native().free_batch(b.batch)
        if state == tent.TransferState.COMPLETED:
            return 1
        return -2 if state == tent.TransferState.TIMEOUT else -1

    # ---- helpers -----------------------------------------------------------------

    @staticmethod
    def _address_of(buf):
        """The address register_memory took `buf` at (None when it cannot be told)."""
        try:
            if hasattr(buf, "data_ptr"):
                return buf.data_ptr()
            if hasattr(buf, "__cuda_array_interface__"):
                return buf.__cuda_array_interface__["data"][0]
            if hasattr(buf, "ctypes"):  # numpy
                return buf.ctypes.data
            if isinstance(buf, (bytearray, memoryview)):
                return ctypes.addressof(ctypes.c_char.from_buffer(buf))
            return operator.index(buf)
        except (TypeError, ValueError, AttributeError):
            return None

    def _forget(self, addr):
        if addr in self._registered:
            self._registered.remove(addr)

    def _native(self):
        if self._engine is None:
            raise tent.Error("FailedPrecondition", "not initialized: call initialize() first")
        return self._engine

    def _timeout_for(self, lengths):
        # Mooncake: MC_TRANSFER_TIMEOUT plus one second per GiB.
        total = int(lengths.sum()) if hasattr(lengths, "sum") else sum(lengths)
        return self._timeout_s + total / 2**30

    def _sync(self, target, opcode, local, remote, lengths, intent, deadline_us, notify=None):
        message = None
        if notify is not None:
            if not isinstance(notify, TransferNotify):
                raise tent.Error("InvalidArgument",
                                 f"notify: expected a TransferNotify, got {type(notify).__name__}")
            message = notify._encode()
        self._native().transfer_sync(target, opcode, local, remote, lengths, intent=intent,
                                     deadline_us=deadline_us,
                                     timeout_s=self._timeout_for(lengths), notify=message)
        return 0

    def get_notifies(self):
        """Mooncake's ``get_notifies()``: the notifications received since the last call, as
        ``TransferNotify`` objects, in arrival order per sender ([] on failure)."""
        try:
            got = self._native().get_notifications()
        except _FAILURES as e:
            self.last_error = f"get_notifies: {e}"
            _log.error("%s", self.last_error)
            return []
        return [TransferNotify._decode(sender, data) for sender, data in got]

    def _async(self, target, opcode, local, remote, lengths, intent, deadline_us):
        batch = self._native().transfer_async(target, opcode, local, remote, lengths,
                                              intent=intent, deadline_us=deadline_us)
        handle = next(self._handles)
        with self._lock:
            self._batches[handle] = _Batch(batch, len(local), self._timeout_for(lengths))
        return handle

    def _take(self, handle):
        with self._lock:
            return self._batches.pop(handle, None)

    def _reopen(self, name):
        engine = self._native()
        engine.close_segment(engine.open_segment(name))
        return engine.open_segment(name)

    def _check_local(self, addr, length):
        """Raw reads and writes only inside this engine's registered memory."""
        addr = operator.index(addr)
        for b in self._native().segment_buffers(tent.LOCAL_SEGMENT_ID):
            if b["addr"] <= addr and addr + length <= b["addr"] + b["length"]:
                return
        raise tent.Error("InvalidArgument",
                         f"[{addr:#x}, +{length}) is not inside memory registered with this engine")


# ---- running unmodified `import mooncake.engine` code (opt-in) --------------------


def install_alias(shadow=False):
    """Makes ``import mooncake.engine`` (and ``from mooncake.engine import ...``) give
    this module, for code that cannot be edited. Opt-in only: nothing calls it on import.

    A real Mooncake install on ``sys.path`` is never shadowed silently: without
    ``shadow=True`` this raises tent.Error (FailedPrecondition) naming where it is; with
    it, a warning on the ``tent.mooncake`` logger says which one is hidden."""
    import importlib.util
    import sys
    import types

    here = sys.modules[__name__]
    if sys.modules.get("mooncake.engine") is here:
        return
    loaded = sys.modules.get("mooncake")
    real = loaded if loaded is not None else None
    if real is None:
        try:
            spec = importlib.util.find_spec("mooncake")
        except (ImportError, ValueError):
            spec = None
        real = spec
    if real is not None:
        where = getattr(real, "origin", None) or getattr(real, "__file__", None) or str(
            list(getattr(real, "submodule_search_locations", None) or []))
        if not shadow:
            raise tent.Error(
                "FailedPrecondition",
                f"a real Mooncake is installed ({where}): not aliasing mooncake.engine to "
                "tent.mooncake; import tent.mooncake explicitly, or pass shadow=True "
                "(python -m tent.mooncake --shadow-mooncake) to hide it on purpose")
        _log.warning("mooncake.engine now means tent.mooncake; the Mooncake at %s is hidden",
                     where)
    package = types.ModuleType("mooncake", "tent's alias of Mooncake (tent.mooncake.install_alias)")
    package.__path__ = []  # a package: `import mooncake.engine` looks in sys.modules first
    package.engine = here
    package.__tent_alias__ = True
    sys.modules["mooncake"] = package
    sys.modules["mooncake.engine"] = here


_USAGE = """usage: python -m tent.mooncake [--shadow-mooncake] (SCRIPT | -m MODULE) [ARGS...]

Runs SCRIPT (or MODULE) with `import mooncake.engine` answered by tent.mooncake, for
code written against Mooncake's Python engine that cannot be edited. If a real Mooncake
is installed this refuses, naming it, unless --shadow-mooncake hides it on purpose."""


def _main(argv):
    import runpy
    import sys

    shadow = False
    if argv and argv[0] == "--shadow-mooncake":
        shadow, argv = True, argv[1:]
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(_USAGE, file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else 2
    try:
        install_alias(shadow=shadow)
    except tent.Error as e:
        print(f"tent.mooncake: {e}", file=sys.stderr)
        return 2
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    import sys as _sys

    import tent.mooncake as _shim  # the importable module, not this __main__ copy

    _sys.exit(_shim._main(_sys.argv[1:]))
