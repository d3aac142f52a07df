# SPDX-License-Identifier: Apache-2.0
# Stands in for an interpreter without torch (tests/python/CMakeLists.txt puts this folder first
# on PYTHONPATH): the torch-based tests must report SKIPPED with the reason, the rest still run.
raise ImportError("torch is hidden by tests/python/without_numpy (python_without_numpy test)")
