"""BatchNorm fusion (docs/fusion.md): a training step with fuse-batch-norm (BatchNorm +
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
import unittest

from common import HgpcTestCase, run, HGPC
from fused_training import TRAIN, FusedTraining
import test_slicing  # not its classes: unittest would run them here too


class FusionTest(FusedTraining, HgpcTestCase):
    data = test_slicing.SlicingTest.data

    def model(self):
        return self.exported(test_slicing.SMALL_RESNET, "resnet_small.onnx")

    def fused_steps(self, precision, args):
        """The steps with a fused activation and those with a folded gradient Sum."""
        code, out, err = run([HGPC, "compile", self.model(), "--batch", "4", "--emit", "plan",
                              *TRAIN, "--precision", precision, *args])
        self.assertEqual(code, 0, err)
        return out.count('activation="relu"'), out.count("dy_parts=2")

    def check(self, precision):
        # Forward train: stem + 2 first convs (relu) + 2 block ends (add-relu); backward: the
        # same 3 + the 2 block ends (writing the shortcut's gradient G); eval: 3 inference-mode
        # BatchNorm + Relu. The gradient Sums at both block inputs (conv1's input gradient plus
        # the shortcut's) fold into the stem's and block 1's end BatchNormBwd.
        self.assertEqual(self.fused_steps(precision, []), (13, 2))
        self.assertEqual(self.fused_steps(precision, ["--no-fuse"]), (0, 0))
        self.assert_fused_trains_like_unfused(precision, rtol=1e-4 if precision == "fp32" else 2e-2)

    def test_fp32(self):
        self.check("fp32")

    def test_bf16(self):
        self.check("bf16")

    def test_fp16(self):
        self.check("fp16")


if __name__ == "__main__":
    unittest.main()
