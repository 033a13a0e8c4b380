#!/usr/bin/env python3
"""Refills a skeleton export (tests/gpu/modern_export.py --skeletons): every initializer whose data
was dropped gets seeded Gaussian values of its recorded dims and type (weights at 0.05, integers at 0),
so the exporter's graph can be compiled on a machine whose torch cannot export it.

    python3 tests/gpu/refill_skeleton.py skeleton.onnx full.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main():
    m = onnx.load(sys.argv[1])
    rng = np.random.default_rng(0)
    for t in m.graph.initializer:
        if t.doc_string != "skeleton":
            continue
        dtype = (helper.tensor_dtype_to_np_dtype(t.data_type)
                 if hasattr(helper, "tensor_dtype_to_np_dtype")
                 else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type])
        dims = list(t.dims)
        a = (rng.standard_normal(dims) * 0.05 if np.issubdtype(dtype, np.floating)
             else np.zeros(dims)).astype(dtype)
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(m, sys.argv[2])


if __name__ == "__main__":
    main()
