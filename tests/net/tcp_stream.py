#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tcp_stream.py: the rate of a single TCP stream, as iperf would measure it.

There is no iperf in the lab; this is the part of it the rail tests need
(tests/net/run_rails.sh, bench/net/bench_rails.sh): "the sum of the rails'
rates measured by a single TCP stream on each rail in the same run". Python 3
standard library only; run both ends under `ip netns exec` (netlab.sh exec).

  tcp_stream.py server ADDR PORT [--count N] [--timeout S]
  tcp_stream.py client ADDR PORT [--seconds S] [--bind ADDR] [--timeout S]

The server listens on ADDR:PORT and serves N clients (default 1), one after
the other, then exits. The client connects (from --bind's address when
given), writes as fast as the stream takes for S seconds (default 3), shuts
its sending side and waits for the server's count. The rate is measured at
the receiver, from the first byte to the end of the stream (what the
shapers' queues still held is counted in its time), leaving out the first
quarter of the time (slow start). Both ends print one line:

  9.564 MB/s 30408704 bytes 3.153 s average 9.644 MB/s

the first field is the steady rate in MB/s (10^6 bytes per second, the
first quarter left out): the number the scripts read (`awk '{print $1}'`);
then the bytes, the time from the first byte to the end, and their ratio.
At 80 Mbit/s (tbf, MTU 1500) a stream gets about 9.56 MB/s: 95.6% of
10 MB/s, the TCP/IP headers' share. Exit status 0, or 1 with a
message on an error or timeout (default 60 s), 2 on a usage error.
"""
import argparse
import socket
import sys
import time

CHUNK = 1 << 18
SKIP = 0.25  # the share of the stream's time left out of the steady rate


def receive(conn):
    """Counts bytes until EOF; returns (total, seconds, steady MB/s)."""
    marks = []  # (time, bytes so far), one per recv
    total = 0
    t0 = None
    buf = bytearray(CHUNK)
    while True:
        n = conn.recv_into(buf)
        now = time.monotonic()
        if n == 0:
            break
        if t0 is None:
            t0 = now
        total += n
        marks.append((now, total))
    if t0 is None or len(marks) < 2:
        return total, 0.0, 0.0
    t_end = marks[-1][0]
    secs = t_end - t0
    t_skip = t0 + SKIP * secs
    base = next(((t, b) for t, b in marks if t >= t_skip), marks[0])
    steady_s = t_end - base[0]
    steady = (total - base[1]) / steady_s / 1e6 if steady_s > 0 else 0.0
    return total, secs, steady


def line(total, secs, steady):
    avg = total / secs / 1e6 if secs > 0 else 0.0
    return f"{steady:.3f} MB/s {total} bytes {secs:.3f} s average {avg:.3f} MB/s"


def server(a):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((a.addr, a.port))
    lsock.listen(4)
    lsock.settimeout(a.timeout)
    for _ in range(a.count):
        conn, peer = lsock.accept()
        with conn:
            conn.settimeout(a.timeout)
            total, secs, steady = receive(conn)
            text = line(total, secs, steady)
            conn.sendall((text + "\n").encode())
            print(f"{text} from {peer[0]}", flush=True)
    lsock.close()
    return 0


def client(a):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(a.timeout)
    if a.bind:
        sock.bind((a.bind, 0))
    deadline = time.monotonic() + 10.0
    while True:  # the server may still be starting
        try:
            sock.connect((a.addr, a.port))
            break
        except (ConnectionRefusedError, OSError) as e:
            if time.monotonic() > deadline:
                raise OSError(f"cannot connect to {a.addr}:{a.port}: {e}") from e
            time.sleep(0.05)
            sock.close()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(a.timeout)
            if a.bind:
                sock.bind((a.bind, 0))
    data = memoryview(b"\0" * CHUNK)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    reply = b""
    while not reply.endswith(b"\n"):
        part = sock.recv(4096)
        if not part:
            break
        reply += part
    sock.close()
    text = reply.decode().strip()
    if not text:
        raise OSError("the server sent no count")
    print(text, flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("addr")
    s.add_argument("port", type=int)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--timeout", type=float, default=60.0)
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--seconds", type=float, default=3.0)
    c.add_argument("--bind", default=None)
    c.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    try:
        return server(a) if a.mode == "server" else client(a)
    except (OSError, socket.timeout) as e:
        print(f"tcp_stream: {a.mode}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
