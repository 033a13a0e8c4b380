"""--dump-tensors and tests/parity/step_diff.py: the tool that finds where two runs part.

Two CPU runs of one executable dump the same bytes, and step_diff finds no jump; a copy of one
dump with a single intermediate tensor scaled by 1% is judged against the original, and
step_diff names exactly that tensor's step (and exits 1), so the tool can fail.

Run: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_step_diff.py
"""
import os
import shutil
import struct
import subprocess
import sys

from common import HGPC, LENET, SOURCE, HgpcTestCase, run
from test_runner import random_data

STEP_DIFF = os.path.join(SOURCE, "tests", "parity", "step_diff.py")


def index(d):
    with open(os.path.join(d, "index.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        return [dict(zip(head, line.rstrip("\n").split("\t"))) for line in f]


class StepDiffTest(HgpcTestCase):
    def dump(self, exe, data, name):
        d = self.path(name)
        code, _, err = run([exe, "--data", data, "--steps", "1", "--device", "cpu", "--shuffle",
                            "off", "--progress", "none", "--dump-tensors", d])
        self.assertEqual(code, 0, err)
        return d

    def test_two_cpu_runs_agree_and_a_perturbed_tensor_is_found(self):
        exe = self.path("m")
        code, _, err = run([HGPC, "compile", LENET, "-o", exe, "--batch", "8",
                            "--no-buffer-reuse"])
        self.assertEqual(code, 0, err)
        data = random_data(self, 8)
        a, b = self.dump(exe, data, "a"), self.dump(exe, data, "b")
        rows = index(a)
        self.assertTrue(any(r["op"] == "Conv" for r in rows), rows[:5])
        # Every float tensor of the plan is there, with its bytes.
        for r in rows:
            n = 1
            for s in filter(None, r["shape"].split(",")):
                n *= int(s)
            size = {"f32": 4, "i64": 8, "f16": 2, "bf16": 2, "i32": 4}.get(r["dtype"], 1) * n
            self.assertEqual(os.path.getsize(os.path.join(a, r["file"])), size, r)
        p = subprocess.run([sys.executable, STEP_DIFF, a, b], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # Scale the result of the second Conv step by 1.01 in a copy of dump a.
        convs = sorted((r for r in rows if r["op"] == "Conv" and r["dtype"] == "f32"),
                       key=lambda r: int(r["step"]))
        target = convs[1]
        c = self.path("c")
        shutil.copytree(a, c)
        f = os.path.join(c, target["file"])
        with open(f, "rb") as h:
            raw = h.read()
        vals = struct.unpack("<%df" % (len(raw) // 4), raw)
        with open(f, "wb") as h:
            h.write(struct.pack("<%df" % len(vals), *[v * 1.01 for v in vals]))
        p = subprocess.run([sys.executable, STEP_DIFF, c, a], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        jumps = p.stdout.split("jumps")[1].split("largest amplifications")[0]
        lines = [l for l in jumps.splitlines()[2:] if l.split() and l.split()[0].isdigit()]
        self.assertEqual(len(lines), 1, p.stdout)
        self.assertIn(target["name"][:48], lines[0])
        self.assertIn(" Conv ", lines[0])


if __name__ == "__main__":
    import unittest
    unittest.main()
