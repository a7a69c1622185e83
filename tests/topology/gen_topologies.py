#!/usr/bin/env python3
"""Writes the hwloc v2 XML test topologies of tests/topology/data/.

The files are checked in; re-run this script only to change them:
    python3 tests/topology/gen_topologies.py
and check each with `lstopo --if xml --input FILE`.

Shapes:
  one_numa_no_nic.xml   one socket, one NUMA node, an Ethernet NIC (no RDMA), an NVMe disk
                        and a BMC display adapter: no RDMA device, no GPU.
  two_socket.xml        two sockets; socket 0: cuda0 and mlx5_0 under one PCIe switch, mlx5_1
                        on its own root port; socket 1: cuda1 and cuda2 under a switch without
                        a NIC, dual-port mlx5_2/mlx5_3 under another switch.
  eight_gpu_node.xml    inference server: 2 sockets, 4 PCIe switches per socket, each with one
                        GPU (cuda0..7) and one NIC (mlx5_0..7); BMC VGA and a management NIC.
  two_numa_nvml_gpu.xml two NUMA nodes; mlx5_0 on node 0; on node 1 an NVIDIA GPU seen only
                        through GPU OS devices (nvml0, card1, renderD128); a BMC VGA (card0).
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")

# PCI class / vendor:device ids used below.
NIC_IB = ("0207", "15b3:1021")  # ConnectX-7, InfiniBand controller
NIC_ETH = ("0200", "8086:1521")  # Intel I350, Ethernet
GPU_3D = ("0302", "10de:2330")  # H100, 3D controller
NVME = ("0108", "144d:a80a")  # Samsung NVMe
BMC_VGA = ("0300", "1a03:2000")  # ASPEED graphics
BMC_BRIDGE = ("0604", "1a03:1150")  # ASPEED PCI bridge
ROOT_PORT = ("0604", "8086:347a")
SWITCH_PORT = ("0604", "1000:c030")  # Broadcom PEX switch ports


class Gp:
    """gp_index allocator (hwloc keeps these unique per topology)."""

    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return self.n


def bitmap(bits):
    """hwloc bitmap text: 32-bit words, most significant first."""
    value = 0
    for b in bits:
        value |= 1 << b
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if value == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def sets(cpus, nodes, allowed=False):
    text = 'cpuset="%s" complete_cpuset="%s"' % (bitmap(cpus), bitmap(cpus))
    if allowed:
        text += ' allowed_cpuset="%s"' % bitmap(cpus)
    text += ' nodeset="%s" complete_nodeset="%s"' % (bitmap(nodes), bitmap(nodes))
    if allowed:
        text += ' allowed_nodeset="%s"' % bitmap(nodes)
    return text


def busid(bus, dev=0, fn=0):
    return "0000:%02x:%02x.%x" % (bus, dev, fn)


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = Gp()

    def add(self, depth, text):
        self.lines.append("  " * depth + text)

    def osdev(self, d, name, osdev_type, infos=(), subtype=None):
        sub = ' subtype="%s"' % subtype if subtype else ""
        head = '<object type="OSDev" gp_index="%d" name="%s"%s osdev_type="%d"' % (
            self.gp(), name, sub, osdev_type)
        if not infos:
            self.add(d, head + "/>")
            return
        self.add(d, head + ">")
        for k, v in infos:
            self.add(d + 1, '<info name="%s" value="%s"/>' % (k, v))
        self.add(d, "</object>")

    def pcidev(self, d, bus, ident, osdevs, dev=0, fn=0):
        cls, ven = ident
        self.add(d, '<object type="PCIDev" gp_index="%d" pci_busid="%s" '
                 'pci_type="%s [%s] [%s] 00" pci_link_speed="0.000000">'
                 % (self.gp(), busid(bus, dev, fn), cls, ven, ven))
        for args in osdevs:
            self.osdev(d + 1, *args)
        self.add(d, "</object>")

    def bridge_open(self, d, sec, sub, at=None, ident=None, depth=0):
        """Host bridge when `at` is None, else a PCI-to-PCI bridge at bus id `at`."""
        if at is None:
            self.add(d, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" '
                     'bridge_pci="0000:[%02x-%02x]">' % (self.gp(), sec, sub))
            return
        cls, ven = ident
        self.add(d, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" '
                 'bridge_pci="0000:[%02x-%02x]" pci_busid="%s" pci_type="%s [%s] [%s] 00" '
                 'pci_link_speed="0.000000">' % (self.gp(), depth, sec, sub, at, cls, ven, ven))

    def close(self, d):
        self.add(d, "</object>")


def mlx(name, netdev):
    return [(name, 3, [("NodeGUID", "0000:0000:0000:0000")]), (netdev, 2)]


def cuda(name):
    return [(name, 5, [("CoProcType", "CUDA"), ("Backend", "CUDA")], "CUDA")]


def switch(w, d, root_bus, slots, depth=1):
    """Root port at root_bus:01.0 -> switch upstream -> one downstream port per slot.

    slots: list of (ident, osdevs) or (ident, osdevs, functions) placed on buses root_bus+3....
    """
    last = root_bus + 2 + len(slots)
    w.bridge_open(d, root_bus + 1, last, busid(root_bus, 1), ROOT_PORT, depth)
    w.bridge_open(d + 1, root_bus + 2, last, busid(root_bus + 1), SWITCH_PORT, depth + 1)
    for i, slot in enumerate(slots):
        bus = root_bus + 3 + i
        w.bridge_open(d + 2, bus, bus, busid(root_bus + 2, i), SWITCH_PORT, depth + 2)
        functions = slot[2] if len(slot) > 2 else [(0, slot[1])]
        for fn, osdevs in functions:
            w.pcidev(d + 3, bus, slot[0], osdevs, fn=fn)
        w.close(d + 2)
    w.close(d + 1)
    w.close(d)


def cpu_part(w, d, package, numa, cpus):
    """A package with one NUMA node and cores of two hyperthreads (pairs in `cpus`)."""
    flat = [c for pair in cpus for c in pair]
    w.add(d, '<object type="Package" os_index="%d" %s gp_index="%d">'
          % (package, sets(flat, [numa]), w.gp()))
    w.add(d + 1, '<object type="NUMANode" os_index="%d" %s gp_index="%d" local_memory="%d">'
          % (numa, sets(flat, [numa]), w.gp(), 64 << 30))
    w.add(d + 2, '<page_type size="4096" count="%d"/>' % ((64 << 30) // 4096))
    w.close(d + 1)
    for core, pair in enumerate(cpus):
        core_id = package * len(cpus) + core
        w.add(d + 1, '<object type="Core" os_index="%d" %s gp_index="%d">'
              % (core_id, sets(pair, [numa]), w.gp()))
        for pu in pair:
            w.add(d + 2, '<object type="PU" os_index="%d" %s gp_index="%d"/>'
                  % (pu, sets([pu], [numa]), w.gp()))
        w.close(d + 1)


def document(w, all_cpus, all_nodes, body):
    w.add(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.add(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.add(0, '<topology version="2.0">')
    w.add(1, '<object type="Machine" os_index="0" %s gp_index="%d">'
          % (sets(all_cpus, all_nodes, allowed=True), w.gp()))
    w.add(2, '<info name="Backend" value="Linux"/>')
    w.add(2, '<info name="Generator" value="tests/topology/gen_topologies.py"/>')
    body(w)
    w.close(1)
    w.add(0, "</topology>")
    return "\n".join(w.lines) + "\n"


def ht_pairs(first, count, sibling_offset):
    return [(first + i, first + i + sibling_offset) for i in range(count)]


def one_numa_no_nic():
    cpus = ht_pairs(0, 4, 4)

    def body(w):
        cpu_part(w, 2, 0, 0, cpus)
        w.bridge_open(3, 0x00, 0x03)
        w.bridge_open(4, 0x01, 0x01, busid(0, 1), ROOT_PORT, 1)
        w.pcidev(5, 0x01, NIC_ETH, [("eno1", 2, [("Address", "02:00:00:00:00:01")])])
        w.close(4)
        w.bridge_open(4, 0x02, 0x02, busid(0, 2), ROOT_PORT, 1)
        w.pcidev(5, 0x02, NVME, [("nvme0n1", 0)])
        w.close(4)
        w.bridge_open(4, 0x03, 0x03, busid(0, 0x1c), BMC_BRIDGE, 1)
        w.pcidev(5, 0x03, BMC_VGA, [("card0", 1)])
        w.close(4)
        w.close(3)
        w.close(2)

    return document(Writer(), [c for p in cpus for c in p], [0], body)


def two_socket():
    s0, s1 = ht_pairs(0, 4, 8), ht_pairs(4, 4, 8)

    def body(w):
        cpu_part(w, 2, 0, 0, s0)
        w.bridge_open(3, 0x00, 0x0f)
        switch(w, 4, 0x00, [(GPU_3D, cuda("cuda0")), (NIC_IB, mlx("mlx5_0", "ib0"))])
        w.bridge_open(4, 0x05, 0x05, busid(0, 2), ROOT_PORT, 1)
        w.pcidev(5, 0x05, NIC_IB, mlx("mlx5_1", "ib1"))
        w.close(4)
        w.close(3)
        w.close(2)
        cpu_part(w, 2, 1, 1, s1)
        w.bridge_open(3, 0x80, 0x8f)
        switch(w, 4, 0x80, [(GPU_3D, cuda("cuda1")), (GPU_3D, cuda("cuda2"))])
        # second root port of the same host bridge, at 80:02.0
        w.bridge_open(4, 0x86, 0x88, busid(0x80, 2), ROOT_PORT, 1)
        w.bridge_open(5, 0x87, 0x88, busid(0x86), SWITCH_PORT, 2)
        w.bridge_open(6, 0x88, 0x88, busid(0x87), SWITCH_PORT, 3)
        w.pcidev(7, 0x88, NIC_IB, mlx("mlx5_2", "ib2"), fn=0)
        w.pcidev(7, 0x88, NIC_IB, mlx("mlx5_3", "ib3"), fn=1)
        w.close(6)
        w.close(5)
        w.close(4)
        w.close(3)
        w.close(2)

    cpus = [c for p in s0 + s1 for c in p]
    return document(Writer(), cpus, [0, 1], body)


EIGHT_GPU_ROOT_BUSES = [0x15, 0x26, 0x37, 0x48, 0x97, 0xA8, 0xB9, 0xCA]


def eight_gpu_node():
    s0, s1 = ht_pairs(0, 8, 16), ht_pairs(8, 8, 16)

    def socket(w, package, numa, cpus, switches):
        cpu_part(w, 2, package, numa, cpus)
        if package == 0:
            w.bridge_open(3, 0x00, 0x02)
            w.pcidev(4, 0x00, NIC_ETH, [("eno1", 2)], dev=0x1f, fn=6)
            w.bridge_open(4, 0x01, 0x02, busid(0, 0x1c), ROOT_PORT, 1)
            w.bridge_open(5, 0x02, 0x02, busid(1), BMC_BRIDGE, 2)
            w.pcidev(6, 0x02, BMC_VGA, [("card0", 1)])
            w.close(5)
            w.close(4)
            w.close(3)
        for k in switches:
            root = EIGHT_GPU_ROOT_BUSES[k]
            w.bridge_open(3, root, root + 4)
            switch(w, 4, root, [(GPU_3D, cuda("cuda%d" % k)),
                                (NIC_IB, mlx("mlx5_%d" % k, "ibp%ds0" % (root + 4)))])
            w.close(3)
        w.close(2)

    def body(w):
        socket(w, 0, 0, s0, range(0, 4))
        socket(w, 1, 1, s1, range(4, 8))

    cpus = [c for p in s0 + s1 for c in p]
    return document(Writer(), cpus, [0, 1], body)


def two_numa_nvml_gpu():
    s0, s1 = ht_pairs(0, 2, 4), ht_pairs(2, 2, 4)

    def body(w):
        cpu_part(w, 2, 0, 0, s0)
        w.bridge_open(3, 0x00, 0x03)
        w.bridge_open(4, 0x01, 0x01, busid(0, 1), ROOT_PORT, 1)
        w.pcidev(5, 0x01, NIC_IB, mlx("mlx5_0", "ib0"))
        w.close(4)
        w.bridge_open(4, 0x02, 0x03, busid(0, 0x1c), ROOT_PORT, 1)
        w.bridge_open(5, 0x03, 0x03, busid(2), BMC_BRIDGE, 2)
        w.pcidev(6, 0x03, BMC_VGA, [("card0", 1)])
        w.close(5)
        w.close(4)
        w.close(3)
        w.close(2)
        cpu_part(w, 2, 1, 1, s1)
        w.bridge_open(3, 0x40, 0x43)
        switch(w, 4, 0x40, [(GPU_3D, [("card1", 1), ("renderD128", 1), ("nvml0", 1)])])
        w.close(3)
        w.close(2)

    cpus = [c for p in s0 + s1 for c in p]
    return document(Writer(), cpus, [0, 1], body)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in [("one_numa_no_nic.xml", one_numa_no_nic), ("two_socket.xml", two_socket),
                       ("eight_gpu_node.xml", eight_gpu_node),
                       ("two_numa_nvml_gpu.xml", two_numa_nvml_gpu)]:
        with open(os.path.join(OUT, name), "w") as f:
            f.write(make())
        print(os.path.join(OUT, name))


if __name__ == "__main__":
    main()
