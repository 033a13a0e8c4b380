"""Fusion (docs/fusion.md): a training step with its elementwise chains fused trains
bit for bit like the unfused step, on the CPU backend, in fp32 and in bf16 mixed precision.

The model is a small residual network without BatchNorm (BatchNorm's own Relu and Add+Relu
belong to fuse-batch-norm, test_fuse_batch_norm.py): a stem, two blocks whose residual ends are
`Clip(0, 6)(Add(y, x))` and `Sub(LeakyRelu(Add(y, x)), x)`, global pooling and a linear layer. Its
train program fuses Add+Clip and Add+LeakyRelu+Sub in the forward pass and the gradient Sums
with Neg, ClipBwd and ReluBwd in the backward pass. Each case compiles it with and without
--no-fuse, trains 3 steps of the same data in file order, and requires identical per-step
losses, the same evaluation after them, and byte-identical saved weights. The fused executable
also carries the NVRTC-compiled kernels (`kernel` lines of the plan), which the CPU backend does
not need.

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_fusion_elementwise.py -k bf16
"""
import os
import unittest

import onnx

from common import HGPC, LENET, HgpcTestCase, read_jsonl, run
import test_slicing as slicing

RESIDUAL_NO_BN = """
import sys
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, c, leaky):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1)
        self.leaky = leaky
    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x)))
        if self.leaky:
            return nn.functional.leaky_relu(y + x, 0.1) - x
        return torch.clamp(y + x, 0, 6)

torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.ReLU(), Block(8, False), Block(8, True),
                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).train()
torch.onnx.export(m, torch.zeros(2, 1, 28, 28), sys.argv[1], opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
"""

TRAIN = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "5e-4",
         "--max-streams", "1", "--no-split", "--no-pipeline"]


class FusionTest(HgpcTestCase):
    data = slicing.SlicingTest.data

    def fused_steps(self, model, args):
        code, out, err = run([HGPC, "compile", model, "--batch", "4", "--emit", "plan", *TRAIN, *args])
        self.assertEqual(code, 0, err)
        train = out.split("program train {", 1)[1].split("\n}", 1)[0]
        return sum(1 for line in train.splitlines() if "FusedElementwise(" in line)

    def train(self, model, args, name):
        exe = self.compile(model, out=name, args=["--batch", "4", *TRAIN, *args])
        saved, metrics = self.path(name + ".onnx"), self.path(name + ".jsonl")
        data = self.data(12)
        code, _, err = run([exe, "--data", data, "--eval", data, "--steps", "3", "--shuffle", "off",
                            "--device", "cpu", "--metrics", metrics, "--save", saved,
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        rows = read_jsonl(metrics)
        losses = [r["loss"] for r in rows if "eval" not in r]
        evals = [(r["loss"], r["accuracy"]) for r in rows if r.get("eval")]
        tensors = {t.name: t.SerializeToString() for t in onnx.load(saved).graph.initializer}
        return losses, evals, tensors

    def model(self):
        return self.exported(RESIDUAL_NO_BN, "residual_no_bn.onnx")

    def check(self, precision):
        model = self.model()
        args = ["--precision", precision]
        self.assertGreaterEqual(self.fused_steps(model, args), 4, "nothing was fused")
        self.assertEqual(self.fused_steps(model, args + ["--no-fuse"]), 0)
        plain = self.train(model, args + ["--no-fuse"], "plain")
        fused = self.train(model, args, "fused")
        self.assertEqual(len(plain[0]), 3)
        self.assertEqual(fused[0], plain[0], "losses differ")
        self.assertEqual(fused[1], plain[1], "evaluation differs")
        self.assertEqual(fused[2].keys(), plain[2].keys())
        for name, want in plain[2].items():
            self.assertTrue(fused[2][name] == want, name + " differs")

    def test_without_nvrtc_only_fused_plans_fail(self):
        model = self.model()
        env = dict(os.environ, HGP_NVRTC_LIBRARY=self.path("no-libnvrtc.so"))
        code, _, err = run([HGPC, "compile", model, "-o", self.path("x"), "--batch", "4"], env=env)
        self.assertEqual(code, 4, err)  # I/O error: a library is missing
        self.assertIn("NVRTC", err)
        self.assertIn("--no-fuse", err)
        code, _, err = run([HGPC, "compile", model, "-o", self.path("x"), "--batch", "4",
                            "--no-fuse"], env=env)
        self.assertEqual(code, 0, err)
        # LeNet-5 has no elementwise chain, so it needs no kernels and no NVRTC.
        code, _, err = run([HGPC, "compile", LENET, "-o", self.path("y"), "--batch", "4"], env=env)
        self.assertEqual(code, 0, err)
        # hgpc plan compiles no kernels.
        code, out, err = run([HGPC, "plan", model, "--batch", "4", "--target", "h200"], env=env)
        self.assertEqual(code, 0, err)
        self.assertIn("fused elementwise", out)

    def test_fp32(self):
        self.check("fp32")

    def test_bf16(self):
        self.check("bf16")


if __name__ == "__main__":
    unittest.main()
