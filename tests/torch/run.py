# SPDX-License-Identifier: Apache-2.0
"""ctest entry of the PyTorch tests: run one test file under pytest, or report
SKIPPED with the reason (exit 77, ctest's SKIP_RETURN_CODE) when this interpreter
lacks torch, torch.distributed with gloo, or pytest."""

import os
import sys


def missing():
    try:
        import pytest  # noqa: F401
    except ImportError as exc:
        return "pytest is not installed for %s (%s)" % (sys.executable, exc)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        return "torch is not installed for %s (%s)" % (sys.executable, exc)
    if not dist.is_available() or not dist.is_gloo_available():
        return "torch %s has no torch.distributed with gloo" % torch.__version__
    return None


def main():
    reason = missing()
    if reason:
        print("SKIPPED: %s" % reason)
        return 77
    import pytest

    here = os.path.dirname(os.path.abspath(__file__))
    return pytest.main(["-q", "-rsx", "-p", "no:cacheprovider", "--rootdir", here,
                        os.path.join(here, sys.argv[1])] + sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
