#!/usr/bin/python3
"""Writes a ResNet-18 adapted to 28x28 grayscale images (Fashion-MNIST): torchvision's resnet18
with a 3x3 stride-1 stem taking 1 channel and no max-pool, exported in training mode at opset 17
with a symbolic batch. Usage: /usr/bin/python3 samples/make_resnet18_28.py OUT.onnx"""
import sys

import torch
import torch.nn as nn
import torchvision.models as tvm


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "resnet18_28.onnx"
    torch.manual_seed(0)
    m = tvm.resnet18(num_classes=10)
    m.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    m.maxpool = nn.Identity()
    m.train()
    kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
              input_names=["input"], output_names=["logits"],
              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    try:  # torch >= 2.5 defaults to the dynamo exporter; ask for the TorchScript one
        torch.onnx.export(m, torch.zeros(2, 1, 28, 28), out, opset_version=18, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(m, torch.zeros(2, 1, 28, 28), out, opset_version=17, **kw)
    print("wrote", out)


if __name__ == "__main__":
    main()
