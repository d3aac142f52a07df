#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_ray.sh: test_ray_backend.py (the Ray collective backend, python/gradsync/ray) under
# the interpreter of the virtual environment scripts/install-deps.sh makes (torch 2.x and
# Ray from PyPI; --torch-venv-path says where, waiting for an install in progress), or
# GRADSYNC_RAY_PYTHON when set. The environment (GRADSYNC_LIBRARY, PYTHONPATH) comes from ctest.
# Exit status: 0 pass, 1 fail, 77 skip (no such interpreter, or no ray in it).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${GRADSYNC_RAY_PYTHON:-"$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path)/bin/python"}
if [ ! -x "$PY" ]; then
    echo "SKIPPED: no interpreter at $PY (scripts/install-deps.sh test makes the virtual" \
        "environment with torch and ray, GRADSYNC_TORCH_VENV, default" \
        "/var/cache/gradsync/torch-venv; or set GRADSYNC_RAY_PYTHON)"
    exit 77
fi
exec "$PY" "$HERE/test_ray_backend.py"
