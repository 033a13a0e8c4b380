#!/usr/bin/env python3
"""--data-on-device on CUDA: tests/integration/test_data_on_device.py with both paths on the GPU
(--device cuda --deterministic): the batches DeviceBatch gathers, crops and flips inside the
captured graph must train to the same bits as the host-fed batches. Exits 77 (skipped) when no
GPU is usable. Run:  HGPC_BUILD=build /usr/bin/python3 tests/gpu/data_on_device_cuda.py
"""
import os
import sys
import unittest

os.environ["HGP_DOD_DEVICE"] = "cuda"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from slicing_cuda import cuda_unusable  # noqa: E402
import test_data_on_device  # noqa: E402


def main():
    reason = cuda_unusable()
    if reason:
        print("skipped: no usable GPU:", reason)
        return 77
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(test_data_on_device.DataOnDeviceTest)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
