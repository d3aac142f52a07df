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
# With --rails 2, every host also gets a second rail: a second veth (nm<I>,
# address 10.78.0.<I+1>/24 by default, --subnet2; its bridge end pm<I>) on
# a second bridge (br1) in the same bridge namespace, shaped like the first
# (--rate2, default --rate). Multi-rail TCP pairs the rails by subnet
# (docs/design.md "Several rails per peer"); rail-rate and rail-link change
# one rail of one host while a job runs.
#
#   netlab.sh check                        exit 0 when the lab can be built, 77 (skip) otherwise
#   netlab.sh up N [--rate 1gbit] [--burst 256kb] [--latency 50ms] [--prefix P] [--subnet A.B.C]
#                  [--rails 1|2] [--rate2 R] [--subnet2 A.B.C]
#   netlab.sh down [--prefix P]            idempotent; removes every namespace of the lab
#   netlab.sh exec [--prefix P] I CMD...   runs CMD in host I's namespace
#   netlab.sh addr [--prefix P] [--rail R] I  prints host I's address (on rail R: 0 nl, 1 nm)
#   netlab.sh ifname [--prefix P] I        prints host I's interface list (nl<I>; nl<I>,nm<I> with 2 rails)
#   netlab.sh rail-rate [--prefix P] I RAIL RATE  tc change of both ends of host I's rail (0 or 1)
#   netlab.sh rail-link [--prefix P] I RAIL up|down  ip link set on the host end of that rail
#   netlab.sh ns [--prefix P] I            prints host I's namespace name
#   netlab.sh show [--prefix P]            namespaces, addresses and qdiscs
#
# Names: namespaces <P>h<I> (hosts) and <P>br (bridge); P defaults to
# $NETLAB_PREFIX or "gsnl"; the second rail's subnet to $NETLAB_SUBNET2 or
# 10.78.0. Several labs with different prefixes can exist at once: they
# share no namespace, so they may reuse the same subnets.
# Exit status: 0 success, 77 not root or no netns/veth/bridge/tbf support,
# 2 usage error, 1 other failures (a failed `up` removes what it made).
# Callers that build a lab should `trap 'netlab.sh down --prefix P' EXIT`.
set -u

PREFIX=${NETLAB_PREFIX:-gsnl}
SUBNET=${NETLAB_SUBNET:-10.77.0}
SUBNET2=${NETLAB_SUBNET2:-10.78.0}
RATE=
RATE2=
RAILS=1
RAIL=0
BURST=256kb
LATENCY=50ms
SKIP=77

die() { echo "netlab: $*" >&2; exit 1; }
usage() {
    sed -n '/^#   netlab.sh check/,/^#$/{/^#$/d;s/^#   //p;}' "$0" >&2
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

# shape NS IFACE [RATE]: tbf on IFACE's egress.
shape() {
    tc -n "$1" qdisc replace dev "$2" root tbf rate "${3:-$RATE}" burst "$BURST" latency "$LATENCY"
}

# rail_ifs I RAIL: "HOST_IFACE BRIDGE_PORT" of host I's rail RAIL.
rail_ifs() {
    case "$2" in
    0) echo "nl$1 port$1" ;;
    1) echo "nm$1 pm$1" ;;
    *) echo "netlab: bad rail '$2' (0 or 1)" >&2; usage ;;
    esac
}

# rail_rate I RAIL RATE: changes the tbf rate on both ends of host I's rail (tc qdisc
# change, as an operator would mid-run); burst and latency stay what they were unless
# --burst/--latency are given. A rail that was not shaped gets tbf (replace).
rail_rate() {
    local i=$1 rail=$2 rate=$3 ifs q ns dev cur b l
    host_index "$i"
    [ -n "$rate" ] || usage
    ifs=$(rail_ifs "$i" "$rail") || exit 2
    for q in "$(host_ns "$i"):${ifs% *}" "$(bridge_ns):${ifs#* }"; do
        ns=${q%%:*}
        dev=${q#*:}
        ip -n "$ns" link show "$dev" >/dev/null 2>&1 || die "no $dev in namespace $ns"
        cur=$(tc -n "$ns" qdisc show dev "$dev" root 2>/dev/null | grep -m1 ' tbf ')
        b=$BURST_OPT
        l=$LATENCY_OPT
        if [ -n "$cur" ]; then
            [ -n "$b" ] || b=$(sed -n 's/.* burst \([^ ]*\).*/\1/p' <<<"$cur")
            [ -n "$l" ] || l=$(sed -n 's/.* lat \([^ ]*\).*/\1/p' <<<"$cur")
            tc -n "$ns" qdisc change dev "$dev" root tbf rate "$rate" burst "${b:-$BURST}" \
                latency "${l:-$LATENCY}" || die "tc qdisc change on $dev ($ns) failed"
        else
            tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "${b:-$BURST}" \
                latency "${l:-$LATENCY}" || die "tc qdisc replace on $dev ($ns) failed"
        fi
    done
}

# rail_link I RAIL up|down: the host end of host I's rail goes up or down (its address
# and subnet route go with it; the bridge end stays up).
rail_link() {
    local i=$1 rail=$2 state=$3 ifs
    host_index "$i"
    case "$state" in up|down) ;; *) echo "netlab: rail-link takes up or down" >&2; usage ;; esac
    ifs=$(rail_ifs "$i" "$rail") || exit 2
    ip -n "$(host_ns "$i")" link set "${ifs% *}" "$state" ||
        die "ip link set ${ifs% *} $state in $(host_ns "$i") failed"
}

# has_rail2 I: host I of the lab has a second rail (nm<I>).
has_rail2() {
    [ "$RAILS" = 2 ] && return 0
    ip -n "$(host_ns "$1")" link show "nm$1" >/dev/null 2>&1
}

up() {
    local n=$1 i ns br
    case "$n" in ''|*[!0-9]*) echo "netlab: up needs a host count" >&2; usage ;; esac
    if [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then die "host count must be 1..250"; fi
    case "$RAILS" in 1|2) ;; *) die "--rails takes 1 or 2" ;; esac
    [ "$RAILS" = 2 ] || [ -z "$RATE2" ] || die "--rate2 needs --rails 2"
    [ "$RAILS" = 1 ] || [ "$SUBNET2" != "$SUBNET" ] || die "the two rails need different subnets"
    [ -n "$RATE2" ] || RATE2=$RATE
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
    if [ "$RAILS" = 2 ]; then
        ip -n "$br" link add br1 type bridge stp_state 0 forward_delay 0
        ip -n "$br" link set br1 up
    fi
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
        if [ "$RAILS" = 2 ]; then
            ip -n "$br" link add "pm$i" type veth peer name "nm$i" netns "$ns"
            ip -n "$br" link set "pm$i" master br1
            ip -n "$br" link set "pm$i" up
            ip -n "$ns" addr add "$SUBNET2.$((i + 1))/24" dev "nm$i"
            ip -n "$ns" link set "nm$i" up
            if [ -n "$RATE2" ]; then
                shape "$ns" "nm$i" "$RATE2"
                shape "$br" "pm$i" "$RATE2"
            fi
        fi
    done
    set +eE
    trap - ERR
    echo "netlab: up $n hosts ($PREFIX h0..h$((n - 1)), $SUBNET.1..$SUBNET.$n)${RATE:+, tbf rate $RATE burst $BURST}" >&2
    if [ "$RAILS" = 2 ]; then
        echo "netlab: rail 1 on nm<I> ($SUBNET2.1..$SUBNET2.$n, bridge br1)${RATE2:+, tbf rate $RATE2 burst $BURST}" >&2
    fi
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
BURST_OPT=
LATENCY_OPT=
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --burst) BURST=$2; BURST_OPT=$2; shift 2 ;;
    --latency) LATENCY=$2; LATENCY_OPT=$2; shift 2 ;;
    --subnet) SUBNET=$2; shift 2 ;;
    --subnet2) SUBNET2=$2; shift 2 ;;
    --rails) RAILS=$2; shift 2 ;;
    --rate2) RATE2=$2; shift 2 ;;
    --rail) RAIL=$2; shift 2 ;;
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
addr)
    host_index "${ARGS[0]:-}"
    case "$RAIL" in
    0) echo "$SUBNET.$((ARGS[0] + 1))" ;;
    1) echo "$SUBNET2.$((ARGS[0] + 1))" ;;
    *) echo "netlab: bad rail '$RAIL' (0 or 1)" >&2; usage ;;
    esac
    ;;
ifname)
    host_index "${ARGS[0]:-}"
    if has_rail2 "${ARGS[0]}"; then echo "nl${ARGS[0]},nm${ARGS[0]}"; else echo "nl${ARGS[0]}"; fi
    ;;
rail-rate) [ ${#ARGS[@]} -eq 3 ] || usage; rail_rate "${ARGS[@]}" ;;
rail-link) [ ${#ARGS[@]} -eq 3 ] || usage; rail_link "${ARGS[@]}" ;;
ns) host_index "${ARGS[0]:-}"; host_ns "${ARGS[0]}" ;;
show) show ;;
*) usage ;;
esac
