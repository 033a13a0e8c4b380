"""hgpc compare and hgpc explore on the CPU (docs/explore.md): the table, the JSON and the HTML
(valid, self-contained), an out-of-memory configuration marked as not fitting, the largest
batch that fits, and hgpc compile --batch auto.

The references are independent of hgpc where they can be: parameters are counted from the ONNX
initializers, the FLOPs of the convolutions and GEMMs from the ONNX shapes, and the largest
fitting batch is checked against the plans of that batch and the next one.
"""
import html.parser
import json
import re
import unittest
import xml.etree.ElementTree as ET

from common import HGPC, LENET, HgpcTestCase, run

# A second, different model: conv-bn-relu, a residual pair, pooling and a classifier.
SMALL_NET = r"""
import sys, torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                   nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    def forward(self, x):
        x = self.stem(x)
        return self.head(torch.relu(x + self.block(x)))
torch.onnx.export(Net().train(), torch.zeros(2, 1, 28, 28), sys.argv[1], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], dynamic_axes={"input": {0: "N"}})
"""


def onnx_reference(path, batch):
    """Parameters (initializers that are not integer shape constants) and the forward FLOPs of
    the convolutions and GEMMs of an ONNX model at `batch`, from onnx's own shape inference."""
    import onnx
    from onnx import numpy_helper, shape_inference
    m = onnx.load(path)
    for d in m.graph.input[0].type.tensor_type.shape.dim[:1]:
        d.ClearField("dim_param")
        d.dim_value = batch
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    params, floats = 0, {}
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        shapes[t.name] = list(a.shape)
        if a.dtype.kind == "f":
            floats[t.name] = a.size
    # BatchNorm's running mean and var are state, not parameters.
    state = {n.input[i] for n in m.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)}
    params = sum(v for k, v in floats.items() if k not in state)
    flops = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            y, w = shapes[n.output[0]], shapes[n.input[1]]
            per = 2 * w[1]
            for k in w[2:]:
                per *= k
            count = 1
            for d in y:
                count *= d
            flops += count * per
        elif n.op_type == "Gemm":
            a, y = shapes[n.input[0]], shapes[n.output[0]]
            flops += 2 * y[0] * y[1] * a[1]
    return params, flops


class XmlAndHtml(html.parser.HTMLParser):
    """Collects tags, attributes and nesting errors with the standard HTML parser."""
    VOID = {"meta", "br", "img", "hr", "input", "link"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.tags, self.attrs = [], [], {}, []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs += attrs
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs += attrs

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()


class ExploreTest(HgpcTestCase):
    def small(self):
        return self.exported(SMALL_NET, "small.onnx")

    def check_self_contained(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.startswith("<!DOCTYPE html>"))
        p = XmlAndHtml()
        p.feed(text)
        p.close()
        self.assertEqual(p.errors, [])
        self.assertEqual(p.stack, [])
        # Well-formed XML too (after the doctype).
        ET.fromstring(text.split("\n", 1)[1])
        # Nothing runs and nothing is fetched: no script, no external reference of any kind.
        self.assertNotIn("script", p.tags)
        for name, value in p.attrs:
            self.assertNotIn(name, ("src", "href", "onload", "onclick"), (name, value))
            if name != "xmlns":
                self.assertNotRegex(value or "", r"(?i)^(https?:|//|file:)", name)
        self.assertNotRegex(re.sub(r'xmlns="[^"]*"', "", text), r"(?i)url\(|@import|https?://")
        return text, p

    def test_compare_table_json_and_html(self):
        small = self.small()
        args = [LENET, small, "--batch", "16", "--target", "h200"]
        code, out, err = run([HGPC, "compare", *args, "--html", self.path("c.html")])
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "compare 2 models, batch 16, precision tf32, target h200")
        self.assertEqual(lines[1].split(), ["lenet5", "small"])
        for label in ("parameters", "FLOPs per step", "peak memory (plan arena)", "fits h200",
                      "predicted step (ms)", "predicted images/s", "time per op family",
                      "time per phase", "  Conv ", "  backward "):
            self.assertTrue(any(l.startswith(label) for l in lines), label)
        self.assertTrue(any("cheaper: " in l for l in lines), out)

        code, js, err = run([HGPC, "compare", *args, "--json"])
        self.assertEqual(code, 0, err)
        data = json.loads(js)
        self.assertEqual(data["command"], "compare")
        configs = data["configurations"]
        self.assertEqual([c["model"] for c in configs], ["lenet5", "small"])
        for c, path in zip(configs, (LENET, small)):
            params, fwd = onnx_reference(path, 16)
            self.assertEqual(c["parameters"], params)
            # Training does the forward's products about three times (forward, data and filter
            # gradients; the first layer needs no data gradient), plus memory-bound work.
            self.assertGreater(c["flops"], 2 * fwd)
            self.assertLess(c["flops"], 3.5 * fwd)
            self.assertAlmostEqual(c["predicted_images_per_second"],
                                   16 / c["predicted_step_seconds"], delta=1)
            self.assertEqual(c["arena_bytes"], c["persistent_bytes"] + c["transient_bytes"])
            self.assertTrue(c["fits"])
            # The groups partition the steps: every family, phase and layer sum to the same.
            total = sum(g["seconds"] for g in c["families"])
            self.assertAlmostEqual(total, c["predicted_serial_seconds"], delta=1e-9)
            for key in ("phases", "stages", "layers"):
                self.assertAlmostEqual(sum(g["seconds"] for g in c[key]), total, delta=1e-9)
            # The table shows the same numbers.
            col = 0 if c["model"] == "lenet5" else 1
            row = next(l for l in lines if l.startswith("predicted step (ms)")).split()[3:]
            self.assertEqual(row[col], "%.3f" % (c["predicted_step_seconds"] * 1e3))
        # The arena is the plan's peak memory, as hgpc plan reports it.
        code, plan, err = run([HGPC, "plan", small, "--batch", "16", "--target", "h200"])
        self.assertEqual(code, 0, err)
        mib = float(re.search(r"peak memory ([\d.]+) MiB", plan).group(1))
        self.assertAlmostEqual(configs[1]["arena_bytes"] / 2**20, mib, delta=0.06)

        text, p = self.check_self_contained(self.path("c.html"))
        self.assertGreaterEqual(p.tags.get("svg", 0), 4)  # families, and stage and layer per model
        for c in configs:
            self.assertIn(c["model"] + ": per layer (%d layers)" % len(c["layers"]), text)

    def test_compare_needs_two_models_and_names_a_bad_one(self):
        code, _, err = run([HGPC, "compare", LENET, "--batch", "8"])
        self.assertEqual(code, 2, err)
        self.assertIn("two or more", err)
        code, _, err = run([HGPC, "compare", LENET, LENET, "--batch", "0"])
        self.assertEqual(code, 2, err)

    def test_explore_marks_what_does_not_fit(self):
        # 1.05 GiB less the 1 GiB runtime reserve leaves about 51 MiB for LeNet-5's arena:
        # batch 64 fits, batch 8192 does not.
        args = [HGPC, "explore", LENET, "--target", "h200", "--batch", "64,8192",
                "--precision", "tf32,bf16", "--memory-limit", "1.05"]
        code, out, err = run(args + ["--html", self.path("e.html")])
        self.assertEqual(code, 0, err)
        rows = [l.split() for l in out.splitlines() if re.match(r"  (tf32|bf16) ", l)]
        self.assertEqual([(r[0], r[1], r[6]) for r in rows],
                         [("tf32", "64", "yes"), ("tf32", "8192", "no"),
                          ("bf16", "64", "yes"), ("bf16", "8192", "no")])
        self.assertIn("best that fits:", out)
        self.assertNotIn("best that fits", [l for l in out.splitlines() if " 8192 " in l][0])

        code, js, err = run(args + ["--json"])
        self.assertEqual(code, 0, err)
        data = json.loads(js)
        limit = data["configurations"][0]["memory_limit_bytes"]
        self.assertEqual(limit, int(1.05 * 2**30))
        for c in data["configurations"]:
            self.assertEqual(c["fits"], c["arena_bytes"] + data["runtime_reserve_bytes"] <= limit)
        self.assertEqual(sum(c["best"] for c in data["configurations"]), 1)
        best = next(c for c in data["configurations"] if c["best"])
        self.assertTrue(best["fits"])
        for c in data["configurations"]:
            if c["fits"]:
                self.assertLessEqual(c["predicted_images_per_second"], best["predicted_images_per_second"])
        # The largest batch that fits: it fits, and the next batch the search would try does not.
        for prec, most in data["largest_fitting_batch"].items():
            self.assertIn("largest batch that fits (%s): %d" % (prec, most), out)
            self.assertTrue(64 <= most < 8192, most)
            code, js2, err = run([HGPC, "explore", LENET, "--target", "h200", "--batch",
                                  "%d,%d" % (most, most + 8), "--precision", prec,
                                  "--memory-limit", "1.05", "--json"])
            self.assertEqual(code, 0, err)
            self.assertEqual([c["fits"] for c in json.loads(js2)["configurations"]], [True, False])

        text, p = self.check_self_contained(self.path("e.html"))
        self.assertEqual(p.tags.get("svg"), 2)
        self.assertIn("memory limit: tf32 b", text)
        self.assertIn("does not fit", text)
        self.assertGreaterEqual(text.count('fill="white"'), 2)  # the two hollow points per plot

    def test_compile_batch_auto_takes_the_largest_that_fits(self):
        code, js, err = run([HGPC, "explore", LENET, "--target", "h200", "--batch", "8",
                             "--memory-limit", "1.05", "--json"])
        self.assertEqual(code, 0, err)
        most = json.loads(js)["largest_fitting_batch"]["tf32"]
        # explore --batch auto: the powers of two from 8 below the largest that fits, then it.
        code, js, err = run([HGPC, "explore", LENET, "--target", "h200", "--batch", "auto",
                             "--memory-limit", "1.05", "--json"])
        self.assertEqual(code, 0, err)
        rows = json.loads(js)["configurations"]
        powers = [8 << i for i in range(20) if (8 << i) < most]
        self.assertEqual([c["batch"] for c in rows], powers + [most])
        self.assertTrue(all(c["fits"] for c in rows))
        self.assertEqual([c["largest_fitting_batch"] for c in rows], [False] * len(powers) + [True])
        code, out, err = run([HGPC, "compile", LENET, "--batch", "auto", "--target", "h200",
                              "--memory-limit", "1.05", "--emit", "plan"])
        self.assertEqual(code, 0, err)
        self.assertIn("batch=%d," % most, out)
        self.assertRegex(err, r"--batch auto: %d, the largest batch whose plan .* fits " % most)
        # One line explains the batch; LeNet-5 (no BatchNorm) also gets issue 23's folded-BN warning.
        self.assertEqual(len([l for l in err.splitlines() if "--batch auto" in l]), 1, err)
        code, _, err = run([HGPC, "compile", LENET, "--batch", "auto", "--target", "h200",
                            "--memory-limit", "0.5", "--emit", "plan"])
        self.assertEqual(code, 8, err)  # out of memory: not even batch 1 fits in 512 MiB
        self.assertIn("not even batch 1", err)

    def test_measure_without_a_gpu_is_reported_not_fatal(self):
        # Without a GPU the memory check has no free memory to read: a clear device error.
        code, _, err = run([HGPC, "explore", LENET, "--target", "h200", "--batch", "8", "--measure"])
        if code == 0:
            self.skipTest("a GPU is present")
        self.assertIn("--measure needs a GPU", err)
        # With an explicit limit every configuration runs and fails on its own, reported.
        code, out, err = run([HGPC, "explore", LENET, "--target", "h200", "--batch", "8,16",
                              "--measure", "--measure-steps", "12", "--memory-limit", "4", "--json"])
        self.assertEqual(code, 0, err)
        for c in json.loads(out)["configurations"]:
            self.assertFalse(c["measured"]["ran"])
            self.assertTrue(c["measured"]["failure"])


if __name__ == "__main__":
    unittest.main()
