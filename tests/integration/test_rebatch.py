"""Re-batching a static export (--batch on a model whose graph input has a fixed dim 0).

A model traced at a fixed batch carries that batch in its shape constants: a Reshape's target
(ShuffleNet's channel shuffle), an Expand's, stochastic depth's noise shape [N, 1, 1, 1] made by
ConstantOfShape. The reference is the same model written at the target batch: compiled with
--batch 8, a batch-2 file must import to the same IR as a batch-8 file, and hgpc warns once with
the number of shape constants it moved.
"""
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from common import HGPC, HgpcTestCase, run


def model(batch):
    """Conv -> channel shuffle (Reshape, Transpose, Reshape) -> stochastic depth (ConstantOfShape,
    RandomUniformLike, Less, Cast, Div, Mul) -> Expand -> GlobalAveragePool -> Flatten -> Gemm,
    with every batch-sized shape written as a constant of `batch`."""
    rng = np.random.default_rng(0)
    ints = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "fc_w"),
             numpy_helper.from_array(np.zeros(3, np.float32), "fc_b"),
             ints("split_shape", [batch, 2, 2, 6, 6]), ints("join_shape", [batch, 4, 6, 6]),
             ints("noise_shape", [batch, 1, 1, 1]), ints("expand_shape", [batch, 4, 6, 6]),
             numpy_helper.from_array(np.array(0.8, np.float32), "keep")]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "split_shape"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "join_shape"], ["j"]),
        helper.make_node("ConstantOfShape", ["noise_shape"], ["noise"],
                         value=numpy_helper.from_array(np.array([0], np.float32))),
        helper.make_node("RandomUniformLike", ["noise"], ["draw"]),
        helper.make_node("Less", ["draw", "keep"], ["kept"]),
        helper.make_node("Cast", ["kept"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["mask", "keep"], ["scaled"]),
        helper.make_node("Mul", ["j", "scaled"], ["d"]),
        helper.make_node("Expand", ["d", "expand_shape"], ["e"]),
        helper.make_node("GlobalAveragePool", ["e"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "rebatch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 6, 6])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


class RebatchTest(HgpcTestCase):
    def compile_ir(self, batch_in_file, extra):
        path = self.path("b%d.onnx" % batch_in_file)
        onnx.save(model(batch_in_file), path)
        return run([HGPC, "compile", path, "-o", self.path("train%d" % batch_in_file),
                    "--emit", "ir", *extra])

    def test_static_export_follows_batch(self):
        rc8, ir8, err8 = self.compile_ir(8, ["--batch", "8"])
        self.assertEqual(rc8, 0, err8)
        self.assertNotIn("shape constants", err8)
        rc2, ir2, err2 = self.compile_ir(2, ["--batch", "8"])
        self.assertEqual(rc2, 0, err2)
        self.assertIn("warning: 4 shape constants of the static export start with its batch 2 "
                      "and were moved to --batch 8", err2)
        self.assertEqual(ir2, ir8)

    def test_constant_noise_follows_batch(self):
        """torch 2.11's exporters write stochastic depth's noise as a constant [N, 1, 1, 1]
        tensor (no ConstantOfShape): a batch-2 file at --batch 8 matches the batch-8 file."""
        self.noise_follows_batch(initializer=False)

    def test_initializer_noise_follows_batch(self):
        """The dynamo exporter's form: RandomUniformLike of an initializer [N, 1, 1, 1]."""
        self.noise_follows_batch(initializer=True)

    def noise_follows_batch(self, initializer):
        irs = []
        for b in (2, 8):
            m = model(b)
            g = m.graph
            shape_init = next(i for i in g.initializer if i.name == "noise_shape")
            g.initializer.remove(shape_init)
            node = next(nd for nd in g.node if nd.op_type == "ConstantOfShape")
            g.node.remove(node)
            noise = np.zeros((b, 1, 1, 1), np.float32)
            if initializer:
                g.initializer.append(numpy_helper.from_array(noise, "noise"))
            else:
                g.node.insert(0, helper.make_node("Constant", [], ["noise"],
                                                  value=numpy_helper.from_array(noise)))
            path = self.path("c%d%s.onnx" % (b, "i" if initializer else ""))
            onnx.save(m, path)
            rc, ir, err = run([HGPC, "compile", path, "-o", self.path("t%d" % b), "--emit", "ir",
                               "--batch", "8"])
            self.assertEqual(rc, 0, err)
            irs.append(ir)
        self.assertEqual(irs[0], irs[1])

    def test_bernoulli_of_constant_follows_batch(self):
        """A Bernoulli of a constant [N, 1, 1, 1] of probabilities (the form stochastic depth's
        mask may take in a static export): a batch-2 file at --batch 8 matches the batch-8 file."""
        irs = []
        for b in (2, 8):
            m = model(b)
            g = m.graph
            for name in ("noise_shape",):
                g.initializer.remove(next(i for i in g.initializer if i.name == name))
            for op in ("ConstantOfShape", "RandomUniformLike", "Less", "Cast"):
                g.node.remove(next(nd for nd in g.node if nd.op_type == op))
            g.initializer.append(numpy_helper.from_array(np.full((b, 1, 1, 1), 0.8, np.float32), "probs"))
            g.node.insert(0, helper.make_node("Bernoulli", ["probs"], ["mask"], dtype=TensorProto.FLOAT))
            path = self.path("bern%d.onnx" % b)
            onnx.save(m, path)
            rc, ir, err = run([HGPC, "compile", path, "-o", self.path("tb%d" % b), "--emit", "ir",
                               "--batch", "8"])
            self.assertEqual(rc, 0, err)
            self.assertIn("Bernoulli", ir)
            irs.append(ir)
        self.assertEqual(irs[0], irs[1])

    def test_without_batch_nothing_moves(self):
        rc, _, err = self.compile_ir(2, [])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("shape constants", err)


if __name__ == "__main__":
    unittest.main()
