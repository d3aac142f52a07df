#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the Debian packages gradsync needs to build, test and bench.
# Idempotent: a no-op when everything is present. Runs without a terminal.
set -euo pipefail

PKGS="cmake make gcc g++ libzstd-dev libcmocka-dev libopenmpi-dev openmpi-bin iproute2
      python3 libgloo-dev binutils"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then
  exit 0
fi
echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
