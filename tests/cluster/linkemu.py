"""A userspace netem for kernels without the netem qdisc: relays Ethernet
frames between two interfaces, holding each for a delay and dropping a
share of them, per direction.

    linkemu.py NODE_IF BRIDGE_IF IN_DELAY_MS IN_LOSS_PCT OUT_DELAY_MS OUT_LOSS_PCT JITTER_MS

"in" is BRIDGE_IF -> NODE_IF (frames to the node), "out" the other way.
netns.Netns.netem puts it between a node's veth and the bridge. Frames go
through AF_PACKET sockets with PACKET_VNET_HDR, so segmentation offload and
pending checksums pass through unchanged (the kernel finishes them when the
frame is sent on). Order is kept per direction (jitter never reorders); at
most QUEUE_LIMIT frames wait per direction (netem's default limit), more
are dropped. Prints "ready" once both sockets are bound; runs until killed.
"""
import collections
import random
import select
import socket
import sys
import time

ETH_P_ALL = 3
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
QUEUE_LIMIT = 1000
FRAME_MAX = 65536 + 64  # a GSO frame and its virtio-net header


def open_if(name):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((name, ETH_P_ALL))
    s.setblocking(False)
    return s


class Direction:
    def __init__(self, dst, delay_ms, loss_pct, jitter_ms):
        self.dst, self.queue = dst, collections.deque()
        self.delay, self.loss, self.jitter = delay_ms / 1000.0, loss_pct / 100.0, jitter_ms / 1000.0

    def take(self, src, now):
        for _ in range(256):  # a batch per wake-up; the rest next turn
            try:
                frame, addr = src.recvfrom(FRAME_MAX)
            except (BlockingIOError, InterruptedError):
                return
            if addr[2] == PACKET_OUTGOING or random.random() < self.loss:
                continue  # our own sends seen again, or lost
            if len(self.queue) >= QUEUE_LIMIT:
                continue
            due = now + self.delay + (random.uniform(-self.jitter, self.jitter) if self.jitter else 0)
            if self.queue and due < self.queue[-1][0]:
                due = self.queue[-1][0]
            self.queue.append((due, frame))

    def send_due(self, now):
        while self.queue and self.queue[0][0] <= now:
            try:
                self.dst.send(self.queue.popleft()[1])
            except OSError:
                pass  # a full queue below us or the link going away: a lost frame


def main(argv):
    node_if, bridge_if = argv[1], argv[2]
    in_delay, in_loss, out_delay, out_loss, jitter = (float(a) for a in argv[3:8])
    node, bridge = open_if(node_if), open_if(bridge_if)
    dirs = {node: Direction(bridge, out_delay, out_loss, jitter),
            bridge: Direction(node, in_delay, in_loss, jitter)}
    print("ready", flush=True)
    while True:
        due = [d.queue[0][0] for d in dirs.values() if d.queue]
        timeout = max(0.0, min(due) - time.monotonic()) if due else None
        readable, _, _ = select.select(list(dirs), [], [], timeout)
        now = time.monotonic()
        for s in readable:
            dirs[s].take(s, now)
        now = time.monotonic()
        for d in dirs.values():
            d.send_due(now)


if __name__ == "__main__":
    main(sys.argv)
