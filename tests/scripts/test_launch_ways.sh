#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_launch_ways.sh CASE ARGS...: the ways into a job work or say why (issue 25).
#   spellings GSRUN             gsrun takes torchrun's spellings of its multi-word options
#                               (--nproc_per_node, --node_rank, --master_addr, ...) and
#                               lists them in --help
#   nompi ALLREDUCE [MPIRUN]    in a build without the MPI transport, a job started by
#                               mpirun (faked with Open MPI's, PMIx's and Slurm's variables,
#                               then the real mpirun when given) with no master address
#                               fails at once with the sentence that says what to rebuild;
#                               with GS_MASTER_ADDR on one host it runs
#   info GS_INFO MPI OPENSSL ZSTD
#                               gs_info lists the transports and every optional part, on or
#                               off as the build says (each ON or OFF)
# Every run is bounded by timeout(1); nothing is left behind.
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# The launcher variables of the environment this runs in are not the test's.
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK \
  OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK PMIX_RANK SLURM_PROCID SLURM_NTASKS \
  SLURM_LOCALID PMI_RANK PMI_SIZE MPI_LOCALRANKID GS_RANK GS_WORLD_SIZE GS_MASTER_ADDR GS_MASTER_PORT GS_SOCKET_IFNAME

case "${1:-}" in
spellings)
  GSRUN=${2:?gsrun}
  "$GSRUN" --help > "$TMP/help" || fail "gsrun --help"
  for opt in --nproc_per_node --node_rank --master_addr --master_port --no_tag_output \
    --nproc-per-node --node-rank --master-addr --master-port; do
    grep -q -- "$opt" "$TMP/help" || fail "gsrun --help does not list $opt"
  done
  port=$((20000 + $$ % 20000))
  # Both spellings, with a space and with '=', give the same environment.
  for args in "--nproc_per_node=2 --nnodes 2 --node_rank=1 --master_addr 10.9.8.7 --master_port=$port" \
    "--nproc-per-node 2 --nnodes=2 --node-rank 1 --master-addr=10.9.8.7 --master-port $port"; do
    # shellcheck disable=SC2086
    timeout 30 "$GSRUN" $args --no_tag_output --timeout 20 -- \
      sh -c 'echo "rank=$RANK world=$WORLD_SIZE addr=$MASTER_ADDR port=$MASTER_PORT"' \
      > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "gsrun $args"; }
    for want in "rank=2 world=4 addr=10.9.8.7 port=$port" "rank=3 world=4 addr=10.9.8.7 port=$port"; do
      grep -qx "$want" "$TMP/out" || { cat "$TMP/out"; fail "gsrun $args: no line '$want'"; }
    done
    echo "PASS gsrun $args"
  done
  ;;
nompi)
  PROG=${2:?allreduce}
  MPIRUN=${3:-}
  want='has no MPI transport'
  check_fast() { # what, log, start time: failed at once, with the sentence
    local took=$(($(date +%s) - $3))
    grep -q "$want" "$2" || { cat "$2"; fail "$1: no '$want'"; }
    grep -q 'GS_WITH_MPI' "$2" || { cat "$2"; fail "$1: does not say what to rebuild"; }
    grep -q 'GS_MASTER_ADDR and GS_MASTER_PORT' "$2" || { cat "$2"; fail "$1: no way out named"; }
    [ "$took" -lt 10 ] || fail "$1: took ${took} s (the rendezvous deadline?), not at once"
    echo "PASS $1 fails at once (${took} s): $(grep -m1 -o 'started by [^(]*' "$2")"
  }
  # GS_TIMEOUT_MS=60000: a rank that waited for the rendezvous would take a minute.
  for vars in "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2" "PMIX_RANK=1 SLURM_NTASKS=2" \
    "SLURM_PROCID=1 SLURM_NTASKS=2" "PMI_RANK=1 PMI_SIZE=2"; do
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if env $vars GS_TIMEOUT_MS=60000 timeout 50 "$PROG" 16 > "$TMP/log" 2>&1; then
      fail "$vars: ran without a master address in a build without MPI"
    fi
    check_fast "$vars" "$TMP/log" "$t0"
  done
  if [ -n "$MPIRUN" ]; then
    mpi=("$MPIRUN" --allow-run-as-root --oversubscribe -np 2)
    t0=$(date +%s)
    if GS_TIMEOUT_MS=60000 timeout 50 "${mpi[@]}" "$PROG" 16 > "$TMP/log" 2>&1; then
      fail "mpirun -np 2: ran without a master address in a build without MPI"
    fi
    check_fast "mpirun -np 2" "$TMP/log" "$t0"
    # One host, an explicit master address: it runs.
    port=$((20000 + $$ % 20000))
    GS_MASTER_ADDR=127.0.0.1 GS_MASTER_PORT=$port GS_TIMEOUT_MS=30000 timeout 50 \
      "${mpi[@]}" -x GS_MASTER_ADDR -x GS_MASTER_PORT -x GS_TIMEOUT_MS "$PROG" 16 \
      > "$TMP/log" 2>&1 || { cat "$TMP/log"; fail "mpirun -np 2 with GS_MASTER_ADDR"; }
    echo "PASS mpirun -np 2 with GS_MASTER_ADDR=127.0.0.1 runs"
  fi
  ;;
info)
  GS_INFO=${2:?gs_info}
  "$GS_INFO" > "$TMP/info" 2>&1 || { cat "$TMP/info"; fail "gs_info"; }
  transports="transports: tcp"
  [ "${3:?MPI}" = ON ] && transports="transports: tcp, mpi"
  grep -qx "$transports" "$TMP/info" || { cat "$TMP/info"; fail "no line '$transports'"; }
  grep -qx 'built in:' "$TMP/info" || { cat "$TMP/info"; fail "no 'built in:' list"; }
  for part in "tcp ON" "shm ON" "mpi ${3}" "openssl ${4:?OPENSSL}" "zstd ${5:?ZSTD}"; do
    name=${part% *}
    on=$(tr '[:upper:]' '[:lower:]' <<< "${part#* }")
    grep -Eq "^  $name +$on " "$TMP/info" || { cat "$TMP/info"; fail "gs_info does not say $name $on"; }
    if [ "$on" = off ]; then
      grep -E "^  $name +off " "$TMP/info" | grep -q 'not built: install' ||
        fail "gs_info does not say how to build $name in"
    fi
  done
  for part in cuda nccl; do
    grep -Eq "^  $part +(on|off) " "$TMP/info" || fail "gs_info does not list $part"
  done
  echo "PASS gs_info lists the transports and the parts built in"
  cat "$TMP/info"
  ;;
*)
  fail "usage: test_launch_ways.sh spellings|nompi|info ARGS..."
  ;;
esac
