#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_without_numpy.sh LOG COMMAND...: run COMMAND (pytest under gsrun) with its output
# copied to LOG, then require that the numpy and torch tests said SKIPPED with their reason
# and that some tests passed. The caller puts without_numpy/ first on PYTHONPATH.
set -uo pipefail
log=$1
shift
"$@" 2>&1 | tee "$log"
rc=$?
for want in 'SKIPPED.*numpy is not installed' 'SKIPPED.*torch is not installed' ' passed'; do
  if ! grep -q "$want" "$log"; then
    echo "run_without_numpy: missing from the output: $want"
    rc=1
  fi
done
exit $rc
