#!/usr/bin/env python3
"""Batch slicing on CUDA: tests/integration/test_slicing.py with both executables on the GPU
(--device cuda --deterministic): a step split into sub-batches and pipelined over micro-batches
against the plain single-stream plan, LeNet-5 and ResNet-18 (28x28). Exits 77 (skipped) when
no GPU is usable. Run:  HGPC_BUILD=build /usr/bin/python3 tests/gpu/slicing_cuda.py
"""
import os
import sys
import tempfile
import unittest

os.environ["HGP_SLICING_DEVICE"] = "cuda"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from common import HGPC, LENET, run  # noqa: E402
import test_slicing  # noqa: E402


def cuda_unusable():
    """Why an executable cannot train on CUDA here, or None."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "probe")
        code, _, err = run([HGPC, "compile", LENET, "-o", exe, "--batch", "4"])
        if code != 0:
            return None  # let the tests report the compile failure
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1", "--device", "cuda",
                            "--progress", "none"])
        return err.strip() if code == 6 else None


def main():
    reason = cuda_unusable()
    if reason:
        print("skipped: no usable GPU:", reason)
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(test_slicing.SlicingTest)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
