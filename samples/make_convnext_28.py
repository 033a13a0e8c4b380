#!/usr/bin/python3
"""Writes a reduced ConvNeXt for 28x28 grayscale images (Fashion-MNIST): torchvision's ConvNeXt
with three stages of 2 blocks (32, 64, 128 channels), layer scale, and a 2x2 stride-2 stem taking
1 channel, so that the stages run at 14x14, 7x7 and 3x3. Exported in training mode with a
symbolic batch by the TorchScript exporter (opset 18 where torch has it, else 17).

Usage: /usr/bin/python3 samples/make_convnext_28.py OUT.onnx [--sd-prob P]

--sd-prob sets the stochastic depth probability (default 0). Debian's torch 1.13 cannot export a
training-mode Bernoulli, so P > 0 needs a newer torch (the GPU machine's 2.11 writes it as
RandomUniformLike + Less, which hgpc imports as one Bernoulli row mask)."""
import argparse

import torch
import torch.nn as nn
from torchvision.models.convnext import CNBlockConfig, ConvNeXt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="convnext_28.onnx")
    ap.add_argument("--sd-prob", type=float, default=0.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    setting = [CNBlockConfig(32, 64, 2), CNBlockConfig(64, 128, 2), CNBlockConfig(128, None, 2)]
    m = ConvNeXt(setting, stochastic_depth_prob=args.sd_prob, layer_scale=1e-6, num_classes=10)
    m.features[0][0] = nn.Conv2d(1, 32, kernel_size=2, stride=2)
    m.train()
    kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
              input_names=["input"], output_names=["logits"],
              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    try:  # torch >= 2.5 defaults to the dynamo exporter; ask for the TorchScript one
        torch.onnx.export(m, torch.zeros(2, 1, 28, 28), args.out, opset_version=18, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(m, torch.zeros(2, 1, 28, 28), args.out, opset_version=17, **kw)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
