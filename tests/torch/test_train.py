# SPDX-License-Identifier: Apache-2.0
"""DDP training through gradsync matches gloo (examples/torch/train_ddp.py).

Runs the example for 20 steps on 4 spawned CPU ranks three ways and compares
rank 0's per-step losses:

- "gradsync" backend vs gloo: equal within rtol 1e-5 at every step. The
  two backends add the same float32 gradients in a different order (gloo's
  ring vs the algorithm gradsync's cost model picks), so bucket sums differ
  by an ulp or so (~1e-7 relative); 20 SGD-with-momentum steps carry that
  into the loss at about 3e-7 relative (measured), so 1e-5 leaves a 30x
  margin and still fails on any real error (a wrong op, a missed bucket, a
  stale gradient changes the loss at 1e-3 or more after one step).
- gloo + gradsync_allreduce_hook (int8 codec, error feedback per bucket) vs
  gloo: the final loss within 1% relative. int8 keeps one scale per 256
  elements, an error of at most 1/254 of the block's largest gradient, and
  error feedback re-injects it the next step, so the trajectory stays close
  (measured: 1e-5 relative at step 19); 1% is the bound we promise for this
  model, loose enough for other BLAS/thread orders, tight enough that
  dropping error feedback or averaging wrongly breaks it.
"""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "torch", "train_ddp.py")
STEPS = 20
TIMEOUT_S = 180 * float(os.environ.get("GSTEST_TIMEOUT_MULT", "1"))

_runs = {}


def losses(mode):
    if mode not in _runs:
        env = dict(os.environ)
        env.setdefault("GS_TIMEOUT_MS", "30000")
        out = subprocess.run([sys.executable, EXAMPLE, "--mode", mode, "--nprocs", "4",
                              "--steps", str(STEPS), "--timeout", "60"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=TIMEOUT_S, check=False, text=True)
        assert out.returncode == 0, "train_ddp.py --mode %s failed:\n%s" % (mode, out.stdout)
        found = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", out.stdout, re.M)]
        assert len(found) == STEPS, "expected %d loss lines:\n%s" % (STEPS, out.stdout)
        _runs[mode] = found
    return _runs[mode]


def test_gradsync_backend_matches_gloo_every_step():
    ref, got = losses("gloo"), losses("gradsync")
    for step, (a, b) in enumerate(zip(ref, got)):
        assert abs(a - b) <= 1e-5 * abs(a), "step %d: gloo %.7f gradsync %.7f" % (step, a, b)
    assert ref[-1] < ref[0], "the model did not learn: %s" % ref


def test_int8_hook_final_loss_close_to_gloo():
    ref, got = losses("gloo"), losses("hook")
    assert abs(got[-1] - ref[-1]) <= 0.01 * abs(ref[-1]), \
        "final loss: gloo %.7f, gloo + int8 hook %.7f" % (ref[-1], got[-1])
    assert got[-1] < got[0], "the compressed run did not learn: %s" % got
