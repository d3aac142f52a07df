#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_netlab.sh: checks netlab.sh itself. A 3-host lab shaped to 50 Mbit/s:
# every host has its address on nl<I> and reaches the others, tbf sits on both
# ends of every link, a 6 MB transfer takes the time the rate implies, the root
# namespace's links and routes are unchanged; `down` is idempotent; a second
# `up` with the same prefix is refused; with --rails 2, the second rail's
# addresses, bridge and tbf, one TCP stream a rail (tcp_stream.py) at its
# rate, rail-rate, rail-link and lib_lab.sh's GS_SOCKET_IFNAME=nl<I>,nm<I>;
# a script that builds a lab through lib_lab.sh and then fails leaves no
# namespace behind.
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

# Two rails (--rails 2): nm<I> on 10.78.0.0/24 through br1, shaped to --rate2; one TCP stream
# a rail (tcp_stream.py) at about its rate; rail-rate and rail-link change one rail of one
# host; lib_lab.sh gives the ranks GS_SOCKET_IFNAME=nl<I>,nm<I>.
if bash "$NL" up 2 --rails 2 --rate 40mbit --rate2 10mbit --prefix "$P" 2>/dev/null; then
    ok=1
    for i in 0 1; do
        a=$(bash "$NL" exec --prefix "$P" "$i" ip -4 -br addr show dev "nm$i" | awk '{print $3}')
        [ "$a" = "10.78.0.$((i + 1))/24" ] || { ok=0; echo "host $i: rail 1 address '$a'"; }
        [ "$(bash "$NL" addr --rail 1 "$i")" = "10.78.0.$((i + 1))" ] || { ok=0; echo "addr --rail 1"; }
        [ "$(bash "$NL" ifname --prefix "$P" "$i")" = "nl$i,nm$i" ] || { ok=0; echo "ifname $i"; }
        for q in "$P"h$i:nl$i:40 "$P"br:port$i:40 "$P"h$i:nm$i:10 "$P"br:pm$i:10; do
            IFS=: read -r ns dev rate <<<"$q"
            tc -n "$ns" qdisc show dev "$dev" | grep -q "tbf.*rate ${rate}Mbit" ||
                { ok=0; echo "no tbf at ${rate}Mbit on $dev in $ns"; }
        done
    done
    ip -n "$P"br -br link show type bridge | grep -q '^br1 ' || { ok=0; echo "no br1"; }
    [ "$ok" -eq 1 ] && pass "two rails: nm<I> on 10.78.0.0/24, br1, tbf 40 and 10 Mbit/s" ||
        fail "two rails: addresses, ifname or tbf"
    if command -v python3 >/dev/null 2>&1; then
        for rail in 0 1; do
            a=$(bash "$NL" addr --rail "$rail" 1)
            bash "$NL" exec --prefix "$P" 1 timeout 30 python3 "$HERE/tcp_stream.py" server "$a" \
                5201 --timeout 20 >/dev/null 2>&1 &
            out=$(bash "$NL" exec --prefix "$P" 0 timeout 30 python3 "$HERE/tcp_stream.py" client \
                "$a" 5201 --seconds 1.5 --timeout 20)
            wait
            want=5 # MB/s: 40 Mbit/s on rail 0, 10 on rail 1
            [ "$rail" -eq 1 ] && want=1.25
            mbps=$(awk '{print $1}' <<<"$out")
            awk -v m="${mbps:-0}" -v w="$want" 'BEGIN{exit !(m > 0.85 * w && m < 1.10 * w)}' &&
                pass "one TCP stream on rail $rail: $mbps MB/s (tbf $want MB/s)" ||
                fail "one TCP stream on rail $rail: '${out}' (expected 0.85-1.10 x $want MB/s)"
        done
    else
        echo "SKIP stream checks: no python3"
    fi
    bash "$NL" rail-rate --prefix "$P" 0 1 20mbit &&
        tc -n "$P"h0 qdisc show dev nm0 | grep -q "rate 20Mbit burst 256Kb" &&
        tc -n "$P"br qdisc show dev pm0 | grep -q "rate 20Mbit burst 256Kb" &&
        tc -n "$P"h0 qdisc show dev nl0 | grep -q "rate 40Mbit" &&
        pass "rail-rate 0 1 20mbit: both ends of nm0 changed, burst kept, rail 0 unchanged" ||
        fail "rail-rate"
    bash "$NL" rail-link --prefix "$P" 1 1 down &&
        ip -n "$P"h1 -br link show nm1 | grep -q DOWN &&
        [ -z "$(ip -n "$P"h1 route show dev nm1 2>/dev/null)" ] &&
        bash "$NL" rail-link --prefix "$P" 1 1 up &&
        ip -n "$P"h1 -br addr show nm1 | grep -q "UP.*10.78.0.2/24" &&
        ip -n "$P"h1 route show dev nm1 | grep -q "10.78.0.0/24" &&
        pass "rail-link 1 1 down then up: nm1 and its route go and come back" || fail "rail-link"
    bash "$NL" rail-link --prefix "$P" 1 2 down 2>/dev/null && fail "rail-link took rail 2" ||
        pass "rail-link refuses rail 2"
    bash "$NL" down --prefix "$P"
else
    fail "up 2 --rails 2"
fi
bash "$NL" up 1 --rate2 1mbit --prefix "$P" 2>/dev/null && fail "--rate2 without --rails 2 taken" ||
    pass "--rate2 without --rails 2 refused"
bash "$NL" down --prefix "$P"
LP="gsnlr$$"
out=$(LAB_PREFIX=$LP bash -c ". '$HERE/lib_lab.sh'; lab_up 2 --rails 2 >/dev/null 2>&1
    lab_start 2 1 sh -c 'echo \$GS_SOCKET_IFNAME'; lab_wait; cat \$LAB_TMP/rank.*.log" 2>&1)
[ "$(tr '\n' ' ' <<<"$out")" = "nl0,nm0 nl1,nm1 " ] &&
    pass "lib_lab.sh with --rails 2: GS_SOCKET_IFNAME=nl<I>,nm<I>" ||
    fail "lib_lab.sh with --rails 2 gave GS_SOCKET_IFNAME '$out'"

# A failing script that built a lab through lib_lab.sh leaves nothing behind.
LP="gsnlf$$"
LAB_PREFIX=$LP bash -c ". '$HERE/lib_lab.sh'; lab_up 2; false; exit 1" >/dev/null 2>&1
[ -z "$(ip netns list | grep -E "^${LP}(h[0-9]+|br)( |\$)")" ] &&
    pass "lab removed after its script failed" || fail "namespaces of $LP left behind"

echo "test_netlab: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
