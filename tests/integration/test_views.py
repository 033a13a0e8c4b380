"""Views in the memory plan (issue 19, compiler/analysis/Views.h): a DenseNet-style block (each
layer reads the concatenation of all earlier feature maps) and a ShuffleNet-v2 unit (a channel
split, a branch, a concatenation and the channel shuffle's Reshape + Transpose + Reshape) train
exactly alike with views and with `--no-views` on the CPU backend.

With views, Reshapes run no step (they alias their input), and where a Concat's parts, a Split's
results or a Slice are contiguous ranges of bytes (at batch 1 a channel concatenation is) the
Concat is written in place by its producers and the Split and Slice read their input's bytes. No
value changes, so the per-step losses, the evaluation and every saved tensor must be
bit-identical, in fp32 and bf16, at batch 1 in NCHW (concatenations in place) and at batch 4
and in NHWC (Reshapes only: a channel slice of four samples, or of any channels-last map, is
several runs of bytes, still copied).

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_views.py -k dense
"""
import random
import struct
import unittest

import numpy

from common import HgpcTestCase, run, write_npy, HGPC

TRAIN = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "5e-4"]

HEADER = """
import sys
import torch
import torch.nn as nn
torch.manual_seed(0)
"""

EXPORT = """
torch.onnx.export(m.train(), torch.zeros(2, 3, 16, 16), sys.argv[1], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
"""

# torchvision's _DenseLayer and _Transition, small: growth 8, three layers.
DENSE = HEADER + """
class Layer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.f = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 16, 1, bias=False),
                               nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, growth, 3, 1, 1, bias=False))
    def forward(self, feats):
        return self.f(torch.cat(feats, 1))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layers = nn.ModuleList([Layer(16 + 8 * i, 8) for i in range(3)])
        self.trans = nn.Sequential(nn.BatchNorm2d(40), nn.ReLU(), nn.Conv2d(40, 16, 1, bias=False),
                                   nn.AvgPool2d(2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    def forward(self, x):
        feats = [self.stem(x)]
        for layer in self.layers:
            feats.append(layer(feats))
        return self.head(self.trans(torch.cat(feats, 1)))

m = Net()
""" + EXPORT

# torchvision's ShuffleNet-v2 InvertedResidual (stride 1), twice, with its channel shuffle.
SHUFFLE = HEADER + """
def shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, -1, h, w)

class Unit(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c // 2
        self.branch = nn.Sequential(
            nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU(),
            nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h),
            nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU())
    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        return shuffle(torch.cat((x1, self.branch(x2)), 1), 2)

m = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                  Unit(16), Unit(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
""" + EXPORT


class ViewsTest(HgpcTestCase):
    def data(self, n):
        rng = random.Random(11)
        count = n * 3 * 16 * 16
        images, labels = self.path("x.npy"), self.path("y.npy")
        write_npy(images, struct.pack("<%df" % count, *[rng.random() for _ in range(count)]),
                  (n, 3, 16, 16), "<f4")
        write_npy(labels, struct.pack("<%dq" % n, *[rng.randrange(10) for _ in range(n)]), (n,), "<i8")
        return "npy:%s,%s" % (images, labels)

    def plan(self, model, batch, precision, args):
        code, out, err = run([HGPC, "compile", model, "--batch", str(batch), "--emit", "plan",
                              *TRAIN, "--precision", precision, *args])
        self.assertEqual(code, 0, err)
        return out

    def check(self, script, name, batch, precision, layout="nchw", parts=False):
        """`parts`: whether some Concat is written in place (DenseNet at batch 1 in NCHW; in the
        ShuffleNet unit the Concat's first operand is already a view of the Split's input)."""
        model = self.exported(script, name)
        common = ["--layout", layout]
        viewed = self.plan(model, batch, precision, common)
        copied = self.plan(model, batch, precision, common + ["--no-views"])
        self.assertNotIn(" view=", copied)
        self.assertNotIn(" part=", copied)
        self.assertIn(" view=", viewed)
        self.assertLess(viewed.count(" = Reshape("), copied.count(" = Reshape("))
        if parts:
            self.assertIn(" part=", viewed)
            self.assertLess(viewed.count(" = Concat("), copied.count(" = Concat("))
        else:
            self.assertNotIn(" part=", viewed)
        if batch == 1 and layout == "nchw":  # channel slices are contiguous: views
            self.assertLess(viewed.count(" = Slice(") + viewed.count(" = Split("),
                            copied.count(" = Slice(") + copied.count(" = Split("))
        results = []
        for label, args in (("views", common), ("copies", common + ["--no-views"])):
            exe = self.compile(model, out=label, args=["--batch", str(batch), *TRAIN,
                                                        "--precision", precision, *args])
            results.append(self.train_three_steps(exe, label, self.data(12), ["--device", "cpu"]))
        (losses, evals, tensors), (want_losses, want_evals, want) = results
        self.assertEqual(len(want_losses), 3)
        self.assertEqual(losses, want_losses)
        self.assertEqual(evals, want_evals)
        self.assertEqual(tensors.keys(), want.keys())
        for key, value in want.items():
            numpy.testing.assert_array_equal(tensors[key], value, err_msg=key)

    def test_dense_batch1_fp32(self):
        self.check(DENSE, "dense.onnx", 1, "fp32", parts=True)

    def test_dense_batch4_bf16_nhwc(self):
        self.check(DENSE, "dense.onnx", 4, "bf16", "nhwc")

    def test_shuffle_batch1_bf16(self):
        self.check(SHUFFLE, "shuffle.onnx", 1, "bf16")

    def test_shuffle_batch4_fp32(self):
        self.check(SHUFFLE, "shuffle.onnx", 4, "fp32")


if __name__ == "__main__":
    unittest.main()
