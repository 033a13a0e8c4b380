"""Batch slicing (docs/architecture.md, "Batch slicing"): a training step split into sub-batches and pipelined over micro-batches
trains like the plain single-stream plan, up to float reassociation, on the CPU backend.

The ResNet-like case is ResNet-18's structure cut down so that it runs in seconds: a 3x3 stem,
two BasicBlocks (conv-BN-ReLU-conv-BN, residual Add, ReLU), the second strided with a 1x1
downsample, global pooling and a linear layer, exported in training mode like
samples/make_resnet18_28.py (which hgp's golden plans use; the full ResNet-18 passes this check
too, in about 20 s of CPU time, too slow for `make test`).

Each case compiles a model twice, with `--split-width 2 --pipeline-depth 2` and with
`--max-streams 1 --no-split --no-pipeline`, trains 3 steps of the same data in file order, and
compares the per-step losses, the evaluation after them (loss and accuracy) and every saved
tensor (weights and BN running statistics).

HGP_SLICING_DEVICE=cuda runs both on CUDA instead (tests/gpu/slicing_cuda.py, label gpu), with
--deterministic and a tolerance of 1e-4: cuDNN picks other algorithms for the slices' shapes,
whose float sums associate differently, and momentum carries the differences over the 3 steps.

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_slicing.py -k lenet
"""
import os
import random
import struct
import subprocess
import sys
import unittest

import numpy

from common import HGPC, LENET, SOURCE, HgpcTestCase, run, write_npy

SPLIT = ["--split-width", "2", "--pipeline-depth", "2"]
PLAIN = ["--max-streams", "1", "--no-split", "--no-pipeline"]
TRAIN = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "5e-4",
         "--precision", "fp32"]
DEVICE = os.environ.get("HGP_SLICING_DEVICE", "cpu")
RTOL = 1e-5 if DEVICE == "cpu" else 1e-4
SMALL_RESNET = """
import sys
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))

torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                  Block(8, 8, 1), Block(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                  nn.Linear(16, 10)).train()
torch.onnx.export(m, torch.zeros(2, 1, 28, 28), sys.argv[1], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
"""
RUN = ["--device", DEVICE] + ([] if DEVICE == "cpu" else ["--deterministic"])


class SlicingTest(HgpcTestCase):
    def data(self, n):
        rng = random.Random(7)
        count = n * 28 * 28
        images, labels = self.path("x.npy"), self.path("y.npy")
        write_npy(images, struct.pack("<%df" % count, *[rng.random() for _ in range(count)]),
                  (n, 1, 28, 28), "<f4")
        write_npy(labels, struct.pack("<%dq" % n, *[rng.randrange(10) for _ in range(n)]), (n,), "<i8")
        return "npy:%s,%s" % (images, labels)

    def sliced_steps(self, model, batch, args):
        """How many steps of the train program run on a batch slice (their results are slices)."""
        code, out, err = run([HGPC, "compile", model, "--batch", str(batch), "--emit", "plan",
                              *TRAIN, *args])
        self.assertEqual(code, 0, err)
        train = out.split("program train {", 1)[1].split("\n}", 1)[0]
        return sum(1 for line in train.splitlines() if "#" in line.split("=", 1)[0])

    def train(self, model, batch, args, name):
        exe = self.compile(model, out=name, args=["--batch", str(batch), *TRAIN, *args])
        return self.train_three_steps(exe, name, self.data(3 * batch), RUN)

    def check(self, model, batch):
        self.assertGreater(self.sliced_steps(model, batch, SPLIT), 0, "nothing was split")
        self.assertEqual(self.sliced_steps(model, batch, PLAIN), 0)
        plain_losses, plain_evals, plain = self.train(model, batch, PLAIN, "plain")
        split_losses, split_evals, split = self.train(model, batch, SPLIT, "split")
        self.assertEqual(len(plain_losses), 3)
        numpy.testing.assert_allclose(split_losses, plain_losses, rtol=RTOL)
        # The eval program (inference-mode BN, which splits too) after the 3 steps.
        self.assertEqual(len(plain_evals), 1)
        numpy.testing.assert_allclose(split_evals[0][0], plain_evals[0][0], rtol=RTOL)
        self.assertEqual(split_evals[0][1], plain_evals[0][1])
        self.assertEqual(plain.keys(), split.keys())
        trained = 0
        for name, want in plain.items():
            got = split[name]
            if want.dtype.kind != "f":
                numpy.testing.assert_array_equal(got, want, err_msg=name)
                continue
            scale = max(float(numpy.abs(want).max()), 1e-30)
            err = float(numpy.abs(got.astype(numpy.float64) - want).max()) / scale
            self.assertLessEqual(err, RTOL, "%s: relative error %.3g" % (name, err))
            trained += 1
        self.assertGreater(trained, 0)

    def test_lenet5(self):
        self.check(LENET, 8)

    def test_small_resnet(self):
        model = self.path("resnet_small.onnx")
        subprocess.run([sys.executable, "-W", "ignore", "-c", SMALL_RESNET, model],
                       check=True, capture_output=True)
        self.check(model, 4)


if __name__ == "__main__":
    unittest.main()
