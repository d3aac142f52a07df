#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# netns_agent.sh: Open MPI launch agent (--mca plm_rsh_agent) for the
# multi-host lab of netlab.sh, where the "hosts" are network namespaces and
# there is no sshd. mpirun calls it as it would call ssh:
#
#   netns_agent.sh HOST ORTED_COMMAND...
#
# HOST is a hostfile entry, which must be the name of a namespace (netlab.sh
# ns I prints it). The command runs as ssh would run it (joined, through
# sh -c), in that namespace and in a UTS namespace of its own whose host name
# is HOST, so that Open MPI and gradsync's log prefixes see one host name per
# "host". mpirun itself should run the same way in host 0's namespace (see
# tests/net/test_mpi_lab.sh and docs/cluster.md), so that every daemon
# reaches it over the lab's subnet. Needs root (ip netns exec, unshare).
# Used by tests/net/test_mpi_lab.sh and bench/net/bench_net.sh.
set -u
if [ $# -lt 2 ]; then
    echo "netns_agent.sh: usage: netns_agent.sh HOST COMMAND..." >&2
    exit 2
fi
h=$1
shift
if ! ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$h"; then
    echo "netns_agent.sh: no network namespace named '$h' (hostfile entries must be" \
        "namespace names, see netlab.sh ns I)" >&2
    exit 1
fi
# shellcheck disable=SC2016 # $0 and $1 are expanded by the inner sh
exec ip netns exec "$h" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$h" "$*"
