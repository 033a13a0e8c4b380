#!/usr/bin/env python3
"""Strided views on CUDA: the *strided* cases of tests/integration/test_views.py with the
strided-view executables (the default) on the GPU, once with --deterministic and once without,
where cuDNN's
convolutions (every phase: test_convs_strided_* gives each of forward, backward-data and
backward-filter pitched operands; a phase cuDNN has no algorithm for is staged through dense
copies, and --verbose says which), the channels-last pooling and BatchNorm kernels and Sum write
and read the pitched views (a DenseNet block's Concats written in place, a ShuffleNet chunk read
in place), against the CPU running the --no-views plan. Exits 77 (skipped) when no GPU is
usable. Run:
  HGPC_BUILD=build /usr/bin/python3 tests/gpu/views_cuda.py
"""
import os
import sys
import unittest

os.environ["HGP_VIEWS_DEVICE"] = "cuda"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_views  # noqa: E402
from slicing_cuda import cuda_unusable  # noqa: E402


def main():
    reason = cuda_unusable()
    if reason:
        print("skipped: no usable GPU:", reason)
        return 77
    loader = unittest.defaultTestLoader
    loader.testNamePatterns = ["*strided*"]
    ok = True
    for deterministic in (True, False):
        print("--- CUDA %s" % ("--deterministic" if deterministic else "without --deterministic"),
              flush=True)
        test_views.DETERMINISTIC = deterministic
        suite = loader.loadTestsFromTestCase(test_views.ViewsTest)
        ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
