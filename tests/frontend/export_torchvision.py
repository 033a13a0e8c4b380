#!/usr/bin/python3
"""Exports a torchvision classification model to ONNX in training mode, the way hgpc expects
models to arrive: opset 17, no constant folding, a symbolic batch dimension.

Usage: /usr/bin/python3 export_torchvision.py MODEL OUT.onnx [IMAGE_SIZE]

Run it with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14).
"""
import sys

import torch
import torchvision


def main():
    name, out = sys.argv[1], sys.argv[2]
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    torch.manual_seed(0)
    kwargs = {"num_classes": 10}
    if name == "googlenet":
        kwargs.update(aux_logits=True, init_weights=True)
    model = getattr(torchvision.models, name)(weights=None, **kwargs)
    model.train()
    x = torch.randn(2, 3, size, size)
    torch.onnx.export(
        model, x, out,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        opset_version=17,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
    )


if __name__ == "__main__":
    main()
