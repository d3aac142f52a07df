#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hostile_peer.py: a raw-socket client that attacks gradsync's ports
(docs/wire.md), for run_hostile.sh. Python 3 standard library only.

  hostile_peer.py boot HOST PORT            junk at the rendezvous: garbage, truncated and
                                            wrong-magic/version hellos, a huge address
                                            length, a hello without/with a wrong token
  hostile_peer.py transport HOST PORT [--token T] [--rank R]
                                            junk at a rank's transport port: garbage, a
                                            truncated handshake, wrong magic, wrong version,
                                            a HELLO of another job; then (with the job and
                                            communicator ids a rejecting ACK gives away) a
                                            HELLO without a token, a PROOF made with a wrong
                                            token, a replayed PROOF (made for another
                                            connection's nonce), a duplicate HELLO
  hostile_peer.py join HOST PORT RANK WORLD [--token T] [--job-id J] [--hold S]
                                            joins the rendezvous as RANK (the last rank, with
                                            the token and the address of a port that takes
                                            connections and never answers, held S s), then
                                            runs "transport" against every lower rank, which
                                            now waits in connection setup for RANK and
                                            answers handshakes
  hostile_peer.py ghost HOST PORT RANK WORLD [--no-ring]
                                            joins the rendezvous as RANK with the address (and
                                            bootstrap ring port) of a port nothing listens on,
                                            reads rank 0's answer and exits: a rank gone before
                                            any peer connected to it (--no-ring: no ring port,
                                            so rank 0 sends everyone the whole table and only
                                            the transport finds the rank gone)
  hostile_peer.py flood HOST PORT N SECONDS N idle connections held open for SECONDS
  hostile_peer.py rank0 PORT --total BYTES [--stream BYTES] [--hold S]
                                            plays rank 0 of a 2-rank job (rendezvous and
                                            transport, no token, no shared memory): once the
                                            real rank 1 has connected, sends it a DATA frame
                                            announcing a BYTES-long message, then --stream
                                            bytes of it (64 KiB), and holds the socket S s
  hostile_peer.py rank0 PORT --zero N [--pause-at K --pause P] [--hold S]
                                            the same fake rank 0, sending N zero-length DATA
                                            frames (messages 0..N-1 with a tag nobody receives);
                                            with --pause-at, it prints "RANK0 paused" after K
                                            of them and waits P s before the rest
  hostile_peer.py rank0 PORT --overlap [--hold S]
                                            the same, sending a 64-byte message as two chunks
                                            that both cover bytes 0..31 (a hole at 32..63)

Each mode prints "TRIED <what>" per attempt and "SUMMARY tried=N" at the end;
exit status 0 unless the client itself could not run.
"""
import array
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

HS_MAGIC = 0x53485347
FR_MAGIC = 0x52465347
BOOT_HELLO = 0x48425347
BOOT_TABLE = 0x54425347
def _header_define(rel, name):
    """A #define of the C sources, so that a protocol bump cannot leave this script behind."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", rel)
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "#define" and parts[1] == name:
                return int(parts[2].rstrip("u"), 0)
    raise SystemExit("hostile_peer: %s not found in %s" % (name, path))


PROTO = _header_define("src/transport/tcp/tcp_wire.h", "GS_TCP_PROTO_VERSION")
BOOT_VERSION = _header_define("src/core/bootstrap.h", "GS_BOOT_VERSION")
tried = 0


def note(what):
    global tried
    tried += 1
    print("TRIED " + what, flush=True)


def conn(host, port, timeout=3.0):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def send_close(host, port, data, what, read=False):
    """Send data on a fresh connection; return what came back (if read)."""
    note(what)
    try:
        s = conn(host, port)
    except OSError as e:
        print("  connect failed: %s" % e, flush=True)
        return b""
    got = b""
    try:
        s.sendall(data)
        if read:
            s.settimeout(2.0)
            try:
                while len(got) < 4096:
                    b = s.recv(4096)
                    if not b:
                        break
                    got += b
            except OSError:
                pass
    except OSError:
        pass
    finally:
        s.close()
    return got


def hs(kind, job=0, comm=0, rank=1, size=2, index=0, nsocks=2, flags=0, nonce=b"",
       mac=b"", magic=HS_MAGIC, version=PROTO, verdict=0):
    b = struct.pack("<IHBBQQIIHHI", magic, version, kind, verdict, job, comm, rank, size,
                    index, nsocks, flags)
    b += nonce.ljust(16, b"\0")[:16] + mac.ljust(32, b"\0")[:32] + b"\0" * 8
    assert len(b) == 96
    return b


def hs_decode(b):
    if len(b) < 96:
        return None
    f = struct.unpack("<IHBBQQIIHHI", b[:40])
    return {"magic": f[0], "version": f[1], "kind": f[2], "verdict": f[3], "job": f[4],
            "comm": f[5], "rank": f[6], "size": f[7], "index": f[8], "nsocks": f[9],
            "flags": f[10], "nonce": b[40:56], "mac": b[56:88]}


def frame(ftype, seq, tag, total, offset, chunk, magic=FR_MAGIC):
    return struct.pack("<IBBHQQQQQ", magic, ftype, 0, 0, seq, tag, total, offset, chunk)


def mac(token, direction, domain, nc, na):
    k = hashlib.sha256(token.encode()).digest()
    msg = ("gradsync-auth %s\0" % direction).encode() + domain.encode() + b"\0" + nc + na
    return hmac.new(k, msg, hashlib.sha256).digest()


def boot_hello(job=0, rank=1, world=2, host=0x1234, addr=b"127.0.0.1:1", flags=0,
               nonce=b"", magic=BOOT_HELLO, version=BOOT_VERSION, addr_len=None, ring_port=0):
    """A rendezvous hello; ring_port 0 (no bootstrap ring) makes rank 0 send every rank the
    whole table."""
    al = len(addr) if addr_len is None else addr_len
    return struct.pack("<IIQIIQII", magic, version, job, rank, world, host, al,
                       flags) + nonce.ljust(16, b"\0")[:16] + struct.pack("<I", ring_port) + addr


def mode_boot(host, port):
    rnd = os.urandom
    send_close(host, port, rnd(3000), "boot: 3000 random bytes")
    send_close(host, port, b"\xff" * 60, "boot: all-0xff hello")
    send_close(host, port, boot_hello()[:20], "boot: truncated hello (20 of 60 bytes)")
    send_close(host, port, boot_hello(magic=0x41414141), "boot: wrong magic", read=True)
    send_close(host, port, boot_hello(version=99), "boot: version 99", read=True)
    send_close(host, port, boot_hello(addr_len=0xFFFFFFFF), "boot: address length 2^32-1",
               read=True)
    send_close(host, port, boot_hello(addr_len=100000) + rnd(2000),
               "boot: address length 100000 with 2000 bytes", read=True)
    send_close(host, port, boot_hello(rank=99, world=2), "boot: rank 99 of 2", read=True)
    send_close(host, port, boot_hello(rank=1, world=1 << 30), "boot: world 2^30", read=True)
    send_close(host, port, boot_hello(flags=0), "boot: hello without a token flag", read=True)
    # With the auth flag and a nonce: rank 0 answers AUTH; send a PROOF made with a wrong token.
    note("boot: hello with the auth flag, then a PROOF made with a wrong token")
    try:
        s = conn(host, port)
        nc = os.urandom(16)
        s.sendall(boot_hello(flags=1, nonce=nc))
        s.settimeout(2.0)
        rec = b""
        while len(rec) < 56:
            b = s.recv(56 - len(rec))
            if not b:
                break
            rec += b
        if len(rec) == 56 and rec[:4] == b"GSBA":
            na = rec[8:24]
            s.sendall(b"GSBP" + b"\0" * 4 + mac("wrong-token", "C", "rendezvous", nc, na))
            try:
                print("  answer after the bad proof: %r" % s.recv(64)[:32], flush=True)
            except OSError:
                pass
        else:
            print("  no AUTH record (%d bytes): %r" % (len(rec), rec[:24]), flush=True)
        s.close()
    except OSError as e:
        print("  %s" % e, flush=True)


def mode_transport(host, port, token, rank):
    rnd = os.urandom
    send_close(host, port, rnd(4096), "transport: 4096 random bytes")
    send_close(host, port, hs(1)[:40], "transport: truncated handshake (40 of 96 bytes)")
    send_close(host, port, hs(1, magic=0x12345678), "transport: handshake with wrong magic",
               read=True)
    send_close(host, port, hs(1, version=PROTO - 1), "transport: handshake of an older protocol",
               read=True)
    send_close(host, port, hs(1, version=0xFFFF), "transport: handshake of protocol 65535",
               read=True)
    send_close(host, port, frame(1, 0, 0, 1 << 62, 0, 1 << 40),
               "transport: a DATA frame (huge length) instead of a handshake", read=True)
    send_close(host, port, hs(7), "transport: handshake of kind 7", read=True)
    # A HELLO of another job: the rejecting ACK carries the acceptor's version and ids
    # (an acceptor still in the rendezvous answers nothing yet: see mode "join").
    ack = hs_decode(send_close(host, port, hs(1, job=0x1111, comm=0x2222, rank=rank),
                               "transport: HELLO of another job", read=True))
    if ack is None or ack["magic"] != HS_MAGIC:
        print("  no ACK to learn the ids from; the authenticated cases are skipped", flush=True)
        return
    job, comm, size, nsocks = ack["job"], ack["comm"], ack["size"], ack["nsocks"]
    ver = ack["version"]
    print("  ACK verdict %d gave protocol %d, job %#x comm %#x size %d nsocks %d" %
          (ack["verdict"], ver, job, comm, size, nsocks), flush=True)
    if ack["verdict"] == 1:
        ack = hs_decode(send_close(host, port, hs(1, job=0x1111, comm=0x2222, rank=rank,
                                                  version=ver),
                                   "transport: HELLO of another job (its protocol)", read=True))
        if ack is not None:
            job, comm, size, nsocks = ack["job"], ack["comm"], ack["size"], ack["nsocks"]
    if rank >= size:
        rank = size - 1
    send_close(host, port, hs(1, job, comm, version=ver, rank=size + 5, size=size, nsocks=nsocks),
               "transport: HELLO with rank %d of %d" % (size + 5, size), read=True)
    send_close(host, port, hs(1, job, comm, version=ver, rank=rank, size=size, nsocks=nsocks, index=nsocks),
               "transport: HELLO with socket index %d of %d" % (nsocks, nsocks), read=True)
    send_close(host, port, hs(1, job, comm, version=ver, rank=rank, size=size, nsocks=nsocks, flags=0x80),
               "transport: HELLO with an unknown flag", read=True)
    send_close(host, port, hs(1, job, comm, version=ver, rank=rank, size=size, nsocks=nsocks),
               "transport: correct HELLO without a token", read=True)
    if not token:
        return
    # Wrong token: the acceptor's MAC_A arrives; our PROOF is made with another token.
    saved = None
    for what in ("wrong", "replay"):
        note("transport: HELLO with a token, then a PROOF made %s" %
             ("with a wrong token" if what == "wrong" else
              "for an earlier connection's nonce (replay)"))
        try:
            s = conn(host, port)
            nc = os.urandom(16)
            s.sendall(hs(1, job, comm, version=ver, rank=rank, size=size, nsocks=nsocks, flags=2, nonce=nc))
            s.settimeout(2.0)
            rec = b""
            while len(rec) < 96:
                b = s.recv(96 - len(rec))
                if not b:
                    break
                rec += b
            a = hs_decode(rec)
            if a is None or a["kind"] != 2 or a["verdict"] != 0:
                print("  no accepting ACK: %r" % (a,), flush=True)
                s.close()
                continue
            if what == "wrong":
                proof = mac("not-the-token", "C", "tcp", nc, a["nonce"])
                saved = (nc, a["nonce"])
            else:
                # A PROOF recorded from an earlier exchange: right token, earlier nonces.
                proof = mac(token, "C", "tcp", saved[0], saved[1]) if saved else os.urandom(32)
            s.sendall(hs(3, job, comm, version=ver, rank=rank, size=size, nsocks=nsocks, flags=2, mac=proof))
            # A frame behind the proof: it must never be read.
            s.sendall(frame(1, 0, 1, 1 << 40, 0, 1 << 20))
            try:
                b = s.recv(16)
                print("  connection %s after the bad PROOF" %
                      ("closed" if not b else "answered %r" % b), flush=True)
            except OSError as e:
                print("  %s after the bad PROOF" % e, flush=True)
            s.close()
        except OSError as e:
            print("  %s" % e, flush=True)


def mode_flood(host, port, n, seconds):
    socks = []
    note("flood: %d idle connections for %s s" % (n, seconds))
    for _ in range(n):
        try:
            socks.append(conn(host, port, timeout=2.0))
        except OSError as e:
            print("  connect %d failed: %s" % (len(socks), e), flush=True)
            break
    print("  %d connections open" % len(socks), flush=True)
    time.sleep(seconds)
    alive = 0
    for s in socks:
        try:
            s.setblocking(False)
            b = s.recv(1)
            if b:
                alive += 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
        s.close()
    print("  %d of %d still open after %s s (the rendezvous drops idle ones after 5 s)" %
          (alive, len(socks), seconds), flush=True)


def fnv64(data, seed):
    h = 1469598103934665603 ^ seed
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def mode_join(host, port, rank, world, token, job_id, hold):
    """Join the rendezvous as the last rank (with the token), then attack every other
    rank's transport port while it waits in connection setup for this rank."""
    note("join: rendezvous hello as rank %d of %d with the token" % (rank, world))
    # A port that takes connections and never answers: the ranks that connect to this
    # "rank" (its ring neighbours, GS_CONNECT=lazy) wait in connection setup until their
    # deadline, and answer our attacks meanwhile.
    mute = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    mute.bind(("127.0.0.1", 0))
    mute.listen(64)
    s = conn(host, port, timeout=10)
    nc = os.urandom(16)
    addr = ("127.0.0.1:%d" % mute.getsockname()[1]).encode()
    jh = fnv64(job_id.encode(), 0x67726164)
    s.sendall(boot_hello(job=jh, rank=rank, world=world, host=0x7777, addr=addr,
                         flags=1 if token else 0, nonce=nc))
    if token:
        rec = recv_exact(s, 56)
        na = rec[8:24]
        s.sendall(b"GSBP" + b"\0" * 4 + mac(token, "C", "rendezvous", nc, na))
    hdr = recv_exact(s, 24)
    magic, status, _nonce, w, msg_len = struct.unpack("<IiQII", hdr)
    if status != 0:
        print("  rendezvous refused: status %d %r" % (status, recv_exact(s, msg_len)),
              flush=True)
        return
    addrs = []
    for _ in range(w):
        alen, _hid = struct.unpack("<IQ", recv_exact(s, 12))
        addrs.append(recv_exact(s, alen).decode())
    s.close()
    print("  joined: the table has %s" % ", ".join(addrs), flush=True)
    for r, a in enumerate(addrs):
        if r >= rank:
            continue
        h, p = a.rsplit(":", 1)
        print("  attacking rank %d at %s" % (r, a), flush=True)
        mode_transport(h, int(p), token, rank)
    time.sleep(hold)
    mute.close()


def mode_ghost(host, port, rank, world, ring):
    """Join the rendezvous as RANK with a dead address (and, with ring, a dead ring port),
    then leave at once."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    dead = probe.getsockname()[1]
    addr = ("127.0.0.1:%d" % dead).encode()
    probe.close()  # bound, never listening: connects to it are refused
    note("ghost: rendezvous hello as rank %d of %d with %s" % (rank, world, addr.decode()))
    end = time.time() + 30
    while True:  # rank 0 may not listen yet
        try:
            s = conn(host, port, timeout=30)
            break
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.05)
    s.sendall(boot_hello(job=fnv64(b"", 0x67726164), rank=rank, world=world, host=0x7777,
                         addr=addr, ring_port=dead if ring else 0))
    hdr = recv_exact(s, 24)
    _magic, status, _nonce, w, msg_len = struct.unpack("<IiQII", hdr)
    if status != 0:
        recv_exact(s, msg_len)
    else:
        for _ in range(1 if msg_len == 1 else w):  # the ring's next address, or the table
            alen, _hid = struct.unpack("<IQ", recv_exact(s, 12))
            recv_exact(s, alen)
    s.close()
    print("GHOST rank=%d status=%d world=%d t_ms=%d" % (rank, status, w, int(time.time() * 1000)),
          flush=True)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise OSError("closed after %d of %d bytes" % (len(b), n))
        b += x
    return b


def zero_frames(seq0, k, tag):
    """k zero-length DATA frames, messages seq0..seq0+k-1, built at C speed: copies of one
    frame, then every byte of the sequence field written with one strided slice, so
    the sender is never what limits a flood (it sends millions a second)."""
    one = frame(1, 0, tag, 0, 0, 0)
    buf = bytearray(one * k)
    seqs = array.array("Q", range(seq0, seq0 + k))
    if sys.byteorder != "little":
        seqs.byteswap()
    raw = seqs.tobytes()
    for b in range(8):
        buf[8 + b::len(one)] = raw[b::8]
    return bytes(buf)


def send_zero_flood(s0, n, pause_at=None, pause=0.0):
    """n zero-length DATA frames, messages 0..n-1, with a point-to-point tag nobody receives;
    with pause_at, "RANK0 paused" after that many and a pause of that many seconds (rank 1
    then holds them all while it waits: what it does meanwhile is the point)."""
    note("rank0: %d zero-length DATA frames to rank 1" % n)
    tag = (1 << 63) | 0x7777
    sent = 0
    t0 = time.time()
    try:
        while sent < n:
            end = n if (pause_at is None or sent >= pause_at) else pause_at
            k = min(1 << 16, end - sent)
            s0.sendall(zero_frames(sent, k, tag))
            sent += k
            if sent == pause_at:
                print("RANK0 paused after %d frames for %.1f s" % (sent, pause), flush=True)
                time.sleep(pause)
    except OSError as e:
        print("  frames: %s after %d frames" % (e, sent), flush=True)
    print("RANK0 sent %d zero-length frames in %.1f s" % (sent, time.time() - t0), flush=True)


def send_overlap(s0):
    """A 64-byte message as two chunks that both cover [0, 32): they add up to 64."""
    note("rank0: a 64-byte message as two overlapping 32-byte chunks")
    tag = (1 << 63) | 5
    try:
        s0.sendall(frame(1, 0, tag, 64, 0, 32) + b"A" * 32)
        s0.sendall(frame(1, 0, tag, 64, 0, 32) + b"B" * 32)
    except OSError as e:
        print("  frames: %s" % e, flush=True)


def mode_rank0(port, total, hold, stream, zero=None, overlap=False, pause_at=None, pause=0.0):
    """Fake rank 0: rendezvous, then accept rank 1's sockets and send a huge DATA frame
    (or zero-length ones, or overlapping chunks)."""
    tl = socket.socket()
    tl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tl.bind(("127.0.0.1", 0))
    tl.listen(16)
    taddr = ("127.0.0.1:%d" % tl.getsockname()[1]).encode()
    bl = socket.socket()
    bl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    bl.bind(("0.0.0.0", port))
    bl.listen(4)
    print("READY fake rank 0: rendezvous on %d, transport on %s" % (port, taddr.decode()),
          flush=True)
    bl.settimeout(30)
    c, _ = bl.accept()
    c.settimeout(10)
    h = recv_exact(c, 60)
    magic, ver, job, rank, world, hostid, alen, flags = struct.unpack("<IIQIIQII", h[:40])
    addr = recv_exact(c, alen)
    print("rank %d of %d joined from %s (flags %d)" % (rank, world, addr.decode(), flags),
          flush=True)
    c.sendall(struct.pack("<IiQII", BOOT_TABLE, 0, 42, 2, 0))
    c.sendall(struct.pack("<IQ", len(taddr), 0x5151) + taddr)
    c.sendall(struct.pack("<IQ", len(addr), hostid) + addr)
    c.close()
    tl.settimeout(30)
    conns = []
    nsocks = None
    while nsocks is None or len(conns) < nsocks:
        s, _ = tl.accept()
        s.settimeout(10)
        hello = hs_decode(recv_exact(s, 96))
        nsocks = hello["nsocks"]
        s.sendall(hs(2, hello["job"], hello["comm"], rank=0, size=hello["size"],
                     index=hello["index"], nsocks=nsocks, version=hello["version"]))
        conns.append((hello["index"], s))
    conns.sort()
    s0 = conns[0][1]
    if zero is not None:
        send_zero_flood(s0, zero, pause_at, pause)
        rank0_hold(s0, hold)
        for _, s in conns:
            s.close()
        return
    if overlap:
        send_overlap(s0)
        rank0_hold(s0, hold)
        for _, s in conns:
            s.close()
        return
    note("rank0: DATA frame announcing %d bytes to rank 1" % total)
    chunk = min(total, 1 << 40)
    s0.sendall(frame(1, 0, 1, total, 0, chunk))
    sent = 0
    piece = b"\0" * (1 << 20)
    try:
        while sent < min(chunk, stream):
            n = min(len(piece), min(chunk, stream) - sent)
            s0.sendall(piece[:n])
            sent += n
    except OSError as e:
        print("  payload: %s after %d bytes" % (e, sent), flush=True)
    print("  %d payload bytes sent" % sent, flush=True)
    rank0_hold(s0, hold)
    for _, s in conns:
        s.close()


def rank0_hold(s0, hold):
    """Read (and drop) what rank 1 sends for up to hold seconds, until it closes."""
    t0 = time.time()
    closed = False
    s0.settimeout(0.2)
    while time.time() - t0 < hold:
        try:
            if s0.recv(65536) == b"":
                closed = True
                break
        except socket.timeout:
            pass
        except OSError:
            closed = True
            break
    print("RANK0 rank 1 %s the connection after %.1f s" %
          ("closed" if closed else "kept", time.time() - t0), flush=True)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    m = argv[1]
    try:
        if m == "boot":
            mode_boot(argv[2], int(argv[3]))
        elif m == "transport":
            token = None
            rank = 1
            rest = argv[4:]
            while rest:
                if rest[0] == "--token":
                    token = rest[1]
                elif rest[0] == "--rank":
                    rank = int(rest[1])
                rest = rest[2:]
            mode_transport(argv[2], int(argv[3]), token, rank)
        elif m == "join":
            token, job_id, hold = None, "", 1.0
            rest = argv[6:]
            while rest:
                if rest[0] == "--token":
                    token = rest[1]
                elif rest[0] == "--job-id":
                    job_id = rest[1]
                elif rest[0] == "--hold":
                    hold = float(rest[1])
                rest = rest[2:]
            mode_join(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), token, job_id, hold)
        elif m == "ghost":
            mode_ghost(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), "--no-ring" not in argv)
        elif m == "flood":
            mode_flood(argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
        elif m == "rank0":
            total, hold, stream, zero, overlap = 1 << 40, 5.0, 65536, None, False
            pause_at, pause = None, 0.0
            rest = argv[3:]
            while rest:
                if rest[0] == "--overlap":
                    overlap = True
                    rest = rest[1:]
                    continue
                if rest[0] == "--total":
                    total = int(rest[1])
                elif rest[0] == "--hold":
                    hold = float(rest[1])
                elif rest[0] == "--stream":
                    stream = int(rest[1])
                elif rest[0] == "--zero":
                    zero = int(rest[1])
                elif rest[0] == "--pause-at":
                    pause_at = int(rest[1])
                elif rest[0] == "--pause":
                    pause = float(rest[1])
                rest = rest[2:]
            mode_rank0(int(argv[2]), total, hold, stream, zero, overlap, pause_at, pause)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (OSError, IndexError, ValueError) as e:
        print("hostile_peer: %s" % e, flush=True)
        print("SUMMARY tried=%d" % tried, flush=True)
        return 1
    print("SUMMARY tried=%d" % tried, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
