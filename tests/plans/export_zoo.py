#!/usr/bin/python3
"""Exports the public zoo models of the parity and zoo tests (tests/parity/parity.py MODELS) in
training mode, for the golden plans. Only the graph and shapes matter to `hgpc plan`, so the
models keep their random initial weights.

    /usr/bin/python3 tests/plans/export_zoo.py OUT_DIR MODEL...
"""
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import parity  # noqa: E402


def main():
    out, names = sys.argv[1], sys.argv[2:]
    warnings.filterwarnings("ignore")
    for name in names:
        make, shape, _ = parity.MODELS[name]
        torch.manual_seed(0)
        model = make().train()
        torch.onnx.export(model, torch.zeros(2, *shape), os.path.join(out, name + ".onnx"),
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], dynamic_axes={"input": {0: "N"}}, opset_version=17)


if __name__ == "__main__":
    main()
