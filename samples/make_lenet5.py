#!/usr/bin/python3
"""Writes samples/lenet5.onnx: LeNet-5 for 28x28 grayscale images (Fashion-MNIST), exported by
Debian's PyTorch in training mode at opset 17 with a symbolic batch dimension.

LeNet-5 as in LeCun et al. 1998, with ReLU and max pooling (which train faster than the original
tanh and average pooling): conv 5x5 (6, pad 2) - pool - conv 5x5 (16) - pool - fc 120 - fc 84 - fc 10.
Run: /usr/bin/python3 samples/make_lenet5.py
"""
import os
import sys

import torch
import torch.nn as nn


class LeNet5(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "lenet5.onnx")
    torch.manual_seed(0)
    model = LeNet5().train()
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), out,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=17, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    print("wrote", out)


if __name__ == "__main__":
    main()
