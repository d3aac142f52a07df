# SPDX-License-Identifier: Apache-2.0
"""The package's version: the one place it is written on the Python side.

It equals the C library's: CMake's ``project(VERSION)`` in CMakeLists.txt, which
generates the build's gradsync/version.h from include/gradsync/version.h.in.
pyproject.toml reads it from here (``dynamic = ["version"]``), gradsync.__version__
is this, and _types.HEADER_VERSION is derived from it. python/tests/test_binding.py
checks it against the loaded library's gs_version_string(), so the two cannot drift.
"""

__version__ = "0.1.0"
