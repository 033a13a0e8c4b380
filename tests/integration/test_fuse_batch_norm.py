"""BatchNorm fusion (issue 6, docs/fusion.md): a training step with fuse-batch-norm (BatchNorm +
Relu, BatchNorm + Add + Relu, ReluBwd + BatchNormBwd, the gradient Sum at a block input +
BatchNormBwd folded into one op each) trains exactly
like the unfused one (`--no-fuse`) on the CPU backend.

The model is test_slicing.py's small ResNet: a 3x3 stem with BN and ReLU, two BasicBlocks (the
second strided with a 1x1 downsample, so one residual Add joins two BatchNorms), global pooling
and a linear layer. Each precision compiles it twice, trains 3 steps of the same data and
compares the per-step losses, the evaluation after them (inference-mode BatchNorm + Relu is fused
too) and every saved tensor (weights and BN running statistics). The CPU executors of the fused
ops compute the unfused chain's values exactly, rounding where the unfused ops stored a 16-bit
result, so fp32, bf16 and fp16 must all be bit-identical.

HGP_FUSION_DEVICE=cuda runs both on CUDA with --deterministic: the fused kernels share the
unfused ones' sums, so there too the results agree to float rounding (tolerance 1e-4 for fp32,
the bf16/fp16 rounding of a value that differs in its last float bit otherwise).

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_fuse_batch_norm.py -k bf16
"""
import os
import subprocess
import sys
import unittest

import numpy
import onnx
from onnx import numpy_helper

from common import HgpcTestCase, read_jsonl, run, HGPC
import test_slicing  # not its classes: unittest would run them here too

DEVICE = os.environ.get("HGP_FUSION_DEVICE", "cpu")
RUN = ["--device", DEVICE] + ([] if DEVICE == "cpu" else ["--deterministic"])
TRAIN = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "5e-4"]


class FusionTest(HgpcTestCase):
    data = test_slicing.SlicingTest.data

    def model(self):
        path = self.path("resnet_small.onnx")
        if not os.path.exists(path):
            subprocess.run([sys.executable, "-W", "ignore", "-c", test_slicing.SMALL_RESNET, path],
                           check=True, capture_output=True)
        return path

    def fused_steps(self, precision, args):
        """The steps with a fused activation and those with a folded gradient Sum."""
        code, out, err = run([HGPC, "compile", self.model(), "--batch", "4", "--emit", "plan",
                              *TRAIN, "--precision", precision, *args])
        self.assertEqual(code, 0, err)
        return out.count('activation="relu"'), out.count("dy_parts=2")

    def train(self, precision, args, name):
        exe = self.compile(self.model(), out=name,
                           args=["--batch", "4", *TRAIN, "--precision", precision, *args])
        saved, metrics = self.path(name + ".onnx"), self.path(name + ".jsonl")
        data = self.data(12)
        code, _, err = run([exe, "--data", data, "--eval", data, "--steps", "3", "--shuffle", "off",
                            *RUN, "--metrics", metrics, "--save", saved, "--progress", "none"])
        self.assertEqual(code, 0, err)
        rows = read_jsonl(metrics)
        losses = [r["loss"] for r in rows if "eval" not in r]
        evals = [(r["loss"], r["accuracy"]) for r in rows if r.get("eval")]
        tensors = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved).graph.initializer}
        return losses, evals, tensors

    def check(self, precision):
        # Forward train: stem + 2 first convs (relu) + 2 block ends (add-relu); backward: the
        # same 3 + the 2 block ends (writing the shortcut's gradient G); eval: 3 inference-mode
        # BatchNorm + Relu. The gradient Sums at both block inputs (conv1's input gradient plus
        # the shortcut's) fold into the stem's and block 1's end BatchNormBwd.
        self.assertEqual(self.fused_steps(precision, []), (13, 2))
        self.assertEqual(self.fused_steps(precision, ["--no-fuse"]), (0, 0))
        fused_losses, fused_evals, fused = self.train(precision, [], "fused")
        plain_losses, plain_evals, plain = self.train(precision, ["--no-fuse"], "plain")
        self.assertEqual(len(plain_losses), 3)
        self.assertEqual(plain.keys(), fused.keys())
        if DEVICE == "cpu":
            self.assertEqual(fused_losses, plain_losses)
            self.assertEqual(fused_evals, plain_evals)
            for name, want in plain.items():
                numpy.testing.assert_array_equal(fused[name], want, err_msg=name)
            return
        rtol = 1e-4 if precision == "fp32" else 2e-2
        numpy.testing.assert_allclose(fused_losses, plain_losses, rtol=rtol)
        for name, want in plain.items():
            if want.dtype.kind != "f":
                continue
            scale = max(float(numpy.abs(want).max()), 1e-30)
            err = float(numpy.abs(fused[name].astype(numpy.float64) - want).max()) / scale
            self.assertLessEqual(err, rtol, "%s: relative error %.3g" % (name, err))

    def test_fp32(self):
        self.check("fp32")

    def test_bf16(self):
        self.check("bf16")

    def test_fp16(self):
        self.check("fp16")


if __name__ == "__main__":
    unittest.main()
