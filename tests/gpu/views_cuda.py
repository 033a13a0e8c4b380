#!/usr/bin/env python3
"""Strided views on CUDA: the *strided* cases of tests/integration/test_views.py with the
--strided-views executables on the GPU (--deterministic), where cuDNN's convolutions, the
channels-last pooling and the channels-last BatchNorm kernels write and read the pitched views
(a DenseNet block's Concats written in place, a ShuffleNet chunk read in place), against the CPU
running the --no-views plan. Exits 77 (skipped) when no GPU is usable. Run:
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
    suite = loader.loadTestsFromTestCase(test_views.ViewsTest)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
