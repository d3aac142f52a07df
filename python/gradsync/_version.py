# SPDX-License-Identifier: Apache-2.0
"""The package's version: the one place it is written on the Python side.

It equals the C library's: CMake's ``project(VERSION)`` in CMakeLists.txt, which
generates the build's gradsync/version.h from include/gradsync/version.h.in.
pyproject.toml reads it from here (``dynamic = ["version"]``, scikit-build-core's
regex provider), gradsync.__version__ is this, and _types.HEADER_VERSION is derived
from it. The two cannot drift: ``pip install ./python`` fails at CMake's configure
step when they differ (GS_PYTHON_WHEEL in CMakeLists.txt), and
python/tests/test_binding.py checks this against the loaded library's
gs_version_string().
"""

__version__ = "0.1.0"
