"""Convolution epilogues (docs/fusion.md): with fuse-conv-epilogue a convolution's Relu
runs as part of the convolution (Conv {activation="relu"}), and a training step trains exactly
like the unfused one (`--no-fuse`) on the CPU backend.

The model has no BatchNorm, like AlexNet and VGG: a biased 3x3 convolution + ReLU + max pool, a
bias-free one + ReLU (both fused), a third whose result is read by its ReLU and by an Add (left
alone: the pre-activation value is needed), global pooling, and a classifier Linear + ReLU +
Dropout + Linear. Each precision compiles it twice, trains 3 steps of the same data and compares
the per-step losses, the evaluation and every saved tensor. Relu is exact, so the fused op
computes the unfused chain's values: fp32, bf16 and fp16 must be bit-identical on the CPU.

HGP_FUSION_DEVICE=cuda runs both on CUDA with --deterministic. There the fused convolution may
run as one cuDNN graph (convolution, bias and Relu, rounded once) instead of the convolution
followed by hgpc's epilogue kernel (which rounds the convolution, then the biased value), and
the two plans may pick different convolution algorithms, so results agree to the tolerance
documented in docs/fusion.md (1e-3 fp32, 5e-2 bf16/fp16, relative to the largest magnitude).
HGP_FUSION_MODEL names an exported copy of the model (the GPU machine has no onnx exporter of
the same version).

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_conv_epilogue.py -k bf16
"""
import unittest

from common import HgpcTestCase, run, HGPC
from fused_training import TRAIN, FusedTraining
import test_slicing  # not its classes: unittest would run them here too

CONV_NET = """
import sys
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1, 1)
        self.conv2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
        self.conv3 = nn.Conv2d(16, 16, 3, 1, 1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(32, 10))
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.relu(self.conv2(x))
        y = self.conv3(x)
        x = torch.relu(y) + y
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1))

torch.manual_seed(0)
m = Net().train()
torch.onnx.export(m, torch.zeros(2, 1, 28, 28), sys.argv[1], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
"""


class ConvEpilogueTest(FusedTraining, HgpcTestCase):
    data = test_slicing.SlicingTest.data

    def model(self):
        return self.exported(CONV_NET, "conv_net.onnx", override="HGP_FUSION_MODEL")

    def fused_convs(self, precision, args):
        code, out, err = run([HGPC, "compile", self.model(), "--batch", "4", "--emit", "plan",
                              *TRAIN, "--precision", precision, *args])
        self.assertEqual(code, 0, err)
        lines = [l for l in out.splitlines() if "Conv(" in l or "= Conv" in l]
        return sum('activation="relu"' in l for l in lines), len(lines)

    def check(self, precision):
        # conv1 and conv2 in the training and the eval program; conv3 is read twice.
        fused, convs = self.fused_convs(precision, [])
        self.assertEqual(fused, 4)
        self.assertEqual(self.fused_convs(precision, ["--no-fuse"])[0], 0)
        self.assert_fused_trains_like_unfused(precision, rtol=1e-3 if precision == "fp32" else 5e-2)

    def test_fp32(self):
        self.check("fp32")

    def test_bf16(self):
        self.check("bf16")

    def test_fp16(self):
        self.check("fp16")


if __name__ == "__main__":
    unittest.main()
