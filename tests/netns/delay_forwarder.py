"""A link with a fixed one-way delay, for kernels without sch_netem (suite netns).

Run inside a namespace that holds two interfaces and no address (`ip netns exec M
delay_forwarder.py IF1 IF2 DELAY_MS`): every frame that arrives on one interface leaves
on the other DELAY_MS later, in arrival order, both ways - what `tc qdisc add ... netem
delay DELAY_MS` does on each end. Frames are read and written with AF_PACKET sockets and
PACKET_VNET_HDR, so the kernel's segmentation and checksum offload state travels with
each frame (a veth hands over 64 KiB TSO frames with partial checksums; written back
without that header they would be too long for the link or fail their checksum).

Prints "ready" once both sockets are bound, then runs until killed. Nothing leaves the
two interfaces it is given.
"""

import collections
import socket
import sys
import threading
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
FRAME_MAX = 65536 + 64


def open_socket(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.bind((ifname, 0))
    return s


def direction(rx, tx, delay_s):
    """Frames from rx leave on tx delay_s after they arrived, in order."""
    queue = collections.deque()
    cond = threading.Condition()

    def receive():
        while True:
            data, addr = rx.recvfrom(FRAME_MAX)
            if addr[2] == PACKET_OUTGOING:  # our own writes on this interface
                continue
            with cond:
                queue.append((time.monotonic() + delay_s, data))
                cond.notify()

    def send():
        while True:
            with cond:
                while not queue:
                    cond.wait()
                due, data = queue[0]
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            with cond:
                queue.popleft()
            try:
                tx.send(data)
            except OSError:
                pass  # the link is down or the frame was refused: a lost frame

    for fn in (receive, send):
        threading.Thread(target=fn, daemon=True).start()


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: delay_forwarder.py IF1 IF2 DELAY_MS")
    a, b = open_socket(sys.argv[1]), open_socket(sys.argv[2])
    delay_s = float(sys.argv[3]) / 1000.0
    direction(a, b, delay_s)
    direction(b, a, delay_s)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
