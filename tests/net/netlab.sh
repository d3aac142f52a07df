#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# netlab.sh: a multi-host network lab on one machine. Each "host" is a
# network namespace with loopback and one veth (nl<I>, address 10.77.0.<I+1>/24
# by default); the other end of every veth (port<I>) sits on a Linux bridge
# (br0) in a namespace of its own, so the lab never creates, changes or
# routes anything in the root namespace: the host's interfaces, routes and
# firewall are left alone, and no packet can leave the lab (the bridge has
# no uplink and no address; the hosts have no default route). A bridge in
# its own namespace also keeps the root namespace's firewall (e.g. a
# FORWARD DROP policy applied to bridged frames through br_netfilter) out of
# the data path. With --rate, every link is shaped on egress of both veth
# ends with tc tbf (netem is not available on every kernel): a burst of
# about 256 KB, because with small bursts the shaper's timer fires late when
# the cores are busy and every library loses half its throughput.
#
#   netlab.sh check                        exit 0 when the lab can be built, 77 (skip) otherwise
#   netlab.sh up N [--rate 1gbit] [--burst 256kb] [--latency 50ms] [--prefix P] [--subnet A.B.C]
#   netlab.sh down [--prefix P]            idempotent; removes every namespace of the lab
#   netlab.sh exec [--prefix P] I CMD...   runs CMD in host I's namespace
#   netlab.sh addr [--prefix P] I          prints host I's address
#   netlab.sh ifname I                     prints host I's interface name (nl<I>)
#   netlab.sh ns [--prefix P] I            prints host I's namespace name
#   netlab.sh show [--prefix P]            namespaces, addresses and qdiscs
#
# Names: namespaces <P>h<I> (hosts) and <P>br (bridge); P defaults to
# $NETLAB_PREFIX or "gsnl". Several labs with different prefixes can exist
# at once: they share no namespace, so they may reuse the same subnet.
# Exit status: 0 success, 77 not root or no netns/veth/bridge/tbf support,
# 2 usage error, 1 other failures (a failed `up` removes what it made).
# Callers that build a lab should `trap 'netlab.sh down --prefix P' EXIT`.
set -u

PREFIX=${NETLAB_PREFIX:-gsnl}
SUBNET=${NETLAB_SUBNET:-10.77.0}
RATE=
BURST=256kb
LATENCY=50ms
SKIP=77

die() { echo "netlab: $*" >&2; exit 1; }
usage() {
    sed -n '/^#   netlab.sh/s/^#   //p' "$0" >&2
    exit 2
}
skip() { echo "netlab: SKIP: $*" >&2; exit $SKIP; }

host_ns() { echo "${PREFIX}h$1"; }
bridge_ns() { echo "${PREFIX}br"; }

# check: every capability the lab needs, tried for real in a throw-away namespace.
check() {
    local probe="${PREFIX}probe$$" t
    [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veth, bridge, tc)"
    for t in ip tc; do
        command -v "$t" >/dev/null 2>&1 || skip "'$t' not found (install iproute2)"
    done
    ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace (ip netns add)"
    if ! ip -n "$probe" link add br0 type bridge 2>/dev/null; then
        ip netns del "$probe" 2>/dev/null
        skip "no Linux bridge support (ip link add type bridge)"
    fi
    if ! ip -n "$probe" link add p0 type veth peer name h0 2>/dev/null; then
        ip netns del "$probe" 2>/dev/null
        skip "no veth support (ip link add type veth)"
    fi
    if ! tc -n "$probe" qdisc add dev p0 root tbf rate 1gbit burst 256kb latency 50ms \
        2>/dev/null; then
        ip netns del "$probe" 2>/dev/null
        skip "no tc tbf support (sch_tbf)"
    fi
    ip netns del "$probe" 2>/dev/null
    return 0
}

# All namespaces of the lab with prefix PREFIX (hosts and bridge).
lab_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' |
        grep -E "^${PREFIX}(h[0-9]+|br)\$" | sort -V || true
}

down() {
    local ns
    for ns in $(lab_namespaces); do
        ip netns del "$ns" 2>/dev/null || echo "netlab: could not delete namespace $ns" >&2
    done
    [ -z "$(lab_namespaces)" ] || die "namespaces left: $(lab_namespaces | tr '\n' ' ')"
    return 0
}

# shape NS IFACE: tbf on IFACE's egress.
shape() {
    tc -n "$1" qdisc replace dev "$2" root tbf rate "$RATE" burst "$BURST" latency "$LATENCY"
}

up() {
    local n=$1 i ns br
    case "$n" in ''|*[!0-9]*) echo "netlab: up needs a host count" >&2; usage ;; esac
    if [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then die "host count must be 1..250"; fi
    check
    [ -z "$(lab_namespaces)" ] ||
        die "a lab with prefix '$PREFIX' already exists (netlab.sh down --prefix $PREFIX)"
    br=$(bridge_ns)
    trap 'down; exit 1' ERR
    set -eE
    ip netns add "$br"
    ip netns exec "$br" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
    ip -n "$br" link set lo up
    ip -n "$br" link add br0 type bridge stp_state 0 forward_delay 0
    ip -n "$br" link set br0 up
    for ((i = 0; i < n; i++)); do
        ns=$(host_ns "$i")
        ip netns add "$ns"
        # No IPv6 (no router solicitations, DAD or MLD chatter); IPv4 only.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
            net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
        ip -n "$ns" link set lo up
        # Both ends are created directly in their namespaces: nothing appears in the root one.
        ip -n "$br" link add "port$i" type veth peer name "nl$i" netns "$ns"
        ip -n "$br" link set "port$i" master br0
        ip -n "$br" link set "port$i" up
        ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev "nl$i"
        ip -n "$ns" link set "nl$i" up
        if [ -n "$RATE" ]; then
            shape "$ns" "nl$i"
            shape "$br" "port$i"
        fi
    done
    set +eE
    trap - ERR
    echo "netlab: up $n hosts ($PREFIX h0..h$((n - 1)), $SUBNET.1..$SUBNET.$n)${RATE:+, tbf rate $RATE burst $BURST}" >&2
}

show() {
    local ns
    for ns in $(lab_namespaces); do
        echo "== $ns"
        ip -n "$ns" -br addr show
        tc -n "$ns" qdisc show | grep -v "noqueue\|pfifo_fast" || true
    done
}

# Parse options that may appear anywhere after the command word; positional words
# are collected into ARGS (everything after the first positional of `exec` is kept as is).
[ $# -ge 1 ] || usage
cmd=$1
shift
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --burst) BURST=$2; shift 2 ;;
    --latency) LATENCY=$2; shift 2 ;;
    --subnet) SUBNET=$2; shift 2 ;;
    -h|--help) usage ;;
    *)
        if [ "$cmd" = exec ]; then
            ARGS=("$@")
            break
        fi
        ARGS+=("$1")
        shift
        ;;
    esac
done
case "$PREFIX" in ''|*[!a-zA-Z0-9_-]*) die "bad prefix '$PREFIX'" ;; esac
[ ${#PREFIX} -le 20 ] || die "prefix '$PREFIX' is too long (20 characters at most)"

host_index() {
    case "${1:-}" in ''|*[!0-9]*) echo "netlab: bad host index '${1:-}'" >&2; usage ;; esac
}

case "$cmd" in
check) check ;;
up) up "${ARGS[0]:-}" ;;
down) down ;;
exec)
    host_index "${ARGS[0]:-}"
    [ ${#ARGS[@]} -ge 2 ] || usage
    exec ip netns exec "$(host_ns "${ARGS[0]}")" "${ARGS[@]:1}"
    ;;
addr) host_index "${ARGS[0]:-}"; echo "$SUBNET.$((ARGS[0] + 1))" ;;
ifname) host_index "${ARGS[0]:-}"; echo "nl${ARGS[0]}" ;;
ns) host_index "${ARGS[0]:-}"; host_ns "${ARGS[0]}" ;;
show) show ;;
*) usage ;;
esac
