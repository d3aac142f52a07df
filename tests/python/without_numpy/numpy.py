# SPDX-License-Identifier: Apache-2.0
# Stands in for an interpreter without numpy (tests/python/CMakeLists.txt puts this folder first
# on PYTHONPATH): the numpy-based tests must report SKIPPED with the reason, the rest still run.
raise ImportError("numpy is hidden by tests/python/without_numpy (python_without_numpy test)")
