#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_netlab.sh: checks netlab.sh itself. A 3-host lab shaped to 50 Mbit/s:
# every host has its address on nl<I> and reaches the others, tbf sits on both
# ends of every link, a 6 MB transfer takes the time the rate implies, the root
# namespace's links and routes are unchanged; `down` is idempotent; a second
# `up` with the same prefix is refused; a script that builds a lab through
# lib_lab.sh and then fails leaves no namespace behind.
# Exit status: 0 pass, 1 fail, 77 skip (not root, or no netns/bridge/tbf).
# pass and fail always return 0, so "A && pass || fail" is an if-then-else here.
# shellcheck disable=SC2015,SC2143
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NL="$HERE/netlab.sh"
P="gsnlt$$"
PASS=0
FAIL=0
pass() { echo "PASS $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $*"; FAIL=$((FAIL + 1)); }
trap 'bash "$NL" down --prefix "$P" >/dev/null 2>&1' EXIT

bash "$NL" check --prefix "$P" || exit $?
root_before=$(ip -br link; ip route; ip netns list | grep -v "^gsnl" || true)

bash "$NL" up 3 --rate 50mbit --prefix "$P" || { echo "FAIL up"; exit 1; }
n=$(ip netns list | grep -cE "^${P}(h[0-9]+|br)( |\$)")
[ "$n" -eq 4 ] && pass "up 3 made 3 host namespaces and a bridge one" || fail "up 3: $n namespaces"

ok=1
for i in 0 1 2; do
    a=$(bash "$NL" exec --prefix "$P" "$i" ip -4 -br addr show dev "nl$i" | awk '{print $3}')
    [ "$a" = "10.77.0.$((i + 1))/24" ] || { ok=0; echo "host $i: address '$a'"; }
    for q in "$P"h$i:nl$i "$P"br:port$i; do
        tc -n "${q%%:*}" qdisc show dev "${q#*:}" | grep -q "tbf.*rate 50Mbit" ||
            { ok=0; echo "no tbf on ${q#*:} in ${q%%:*}"; }
    done
done
[ "$ok" -eq 1 ] && pass "addresses on nl<I> and tbf on both veth ends" || fail "addresses/tbf"

# 6 MB from host 2 to host 0 at 50 Mbit/s: about 1 s (0.96 s at the nominal rate).
PY='import socket,sys,time
if sys.argv[1] == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.77.0.1", 5001)); s.listen(1); s.settimeout(20); c, _ = s.accept(); c.settimeout(20)
    n = 0; t0 = None
    while True:
        b = c.recv(1 << 20)
        if not b: break
        if t0 is None: t0 = time.time()
        n += len(b)
    print("%d %.3f" % (n, time.time() - t0))
else:
    c = socket.create_connection(("10.77.0.1", 5001), timeout=20); c.sendall(b"x" * 6000000); c.close()'
if command -v python3 >/dev/null 2>&1; then
    bash "$NL" exec --prefix "$P" 0 timeout 30 python3 -c "$PY" recv > "/tmp/$P.rx" 2>&1 &
    rx=$!
    sleep 0.5
    bash "$NL" exec --prefix "$P" 2 timeout 30 python3 -c "$PY" send
    wait "$rx"
    read -r bytes secs < "/tmp/$P.rx"
    rm -f "/tmp/$P.rx"
    if [ "${bytes:-0}" -eq 6000000 ] && awk -v s="${secs:-0}" 'BEGIN{exit !(s > 0.75 && s < 5)}'; then
        pass "6 MB over a 50 Mbit/s link in ${secs} s (host 2 -> host 0 through the bridge)"
    else
        fail "shaped transfer: ${bytes:-?} bytes in ${secs:-?} s (expected 6000000 in 0.75-5 s)"
    fi
else
    echo "SKIP transfer check: no python3"
fi

bash "$NL" up 2 --prefix "$P" 2>/dev/null && fail "second up with the same prefix succeeded" ||
    pass "second up with the same prefix refused"
bash "$NL" down --prefix "$P" && bash "$NL" down --prefix "$P" &&
    [ -z "$(ip netns list | grep -E "^${P}(h[0-9]+|br)( |\$)")" ] &&
    pass "down twice: no namespace left, exit 0" || fail "down"
root_after=$(ip -br link; ip route; ip netns list | grep -v "^gsnl" || true)
[ "$root_before" = "$root_after" ] && pass "root namespace links and routes unchanged" ||
    fail "root namespace changed"

# A failing script that built a lab through lib_lab.sh leaves nothing behind.
LP="gsnlf$$"
LAB_PREFIX=$LP bash -c ". '$HERE/lib_lab.sh'; lab_up 2; false; exit 1" >/dev/null 2>&1
[ -z "$(ip netns list | grep -E "^${LP}(h[0-9]+|br)( |\$)")" ] &&
    pass "lab removed after its script failed" || fail "namespaces of $LP left behind"

echo "test_netlab: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
