"""Shared helpers for hgpc's integration tests (run by CTest with Debian's /usr/bin/python3).

The build directory comes from $HGPC_BUILD; every test works in a fresh temporary folder.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ.get("HGPC_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
HGPC = os.path.join(BUILD, "bin", "hgpc")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LENET = os.path.join(SOURCE, "samples", "lenet5.onnx")
FASHION = "/usr/share/datasets/fashion-mnist"


def run(cmd, **kw):
    """Runs a command, returning (exit code, stdout, stderr)."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.returncode, p.stdout, p.stderr


def write_npy(path, array_bytes, shape, descr):
    """Writes a .npy file (format 1.0) without numpy, so tests can also write broken ones."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d," % d for d in shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(array_bytes)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class HgpcTestCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def exported(self, script, name, override=None):
        """The model `script` (a Python program taking the output path) exports, as `name` in
        this test's folder, exported once; or the file the environment variable `override`
        names (an exported copy: the GPU machine's torch exports differently)."""
        if override and os.environ.get(override):
            return os.environ[override]
        path = self.path(name)
        if not os.path.exists(path):
            subprocess.run([sys.executable, "-W", "ignore", "-c", script, path],
                           check=True, capture_output=True)
        return path

    def compile(self, model=LENET, out="model-train", args=()):
        exe = self.path(out)
        code, _, err = run([HGPC, "compile", model, "-o", exe, *args])
        self.assertEqual(code, 0, err)
        return exe

    def train_three_steps(self, exe, name, data, run_args):
        """Runs `exe` for 3 unshuffled steps on `data` with an evaluation after, saving the
        model as `name`.onnx; returns (losses, evaluations as (loss, accuracy), saved tensors by
        name): what the tests that compare two compilations of one model compare."""
        import onnx
        from onnx import numpy_helper
        saved, metrics = self.path(name + ".onnx"), self.path(name + ".jsonl")
        code, _, err = run([exe, "--data", data, "--eval", data, "--steps", "3", "--shuffle", "off",
                            *run_args, "--metrics", metrics, "--save", saved, "--progress", "none"])
        self.assertEqual(code, 0, err)
        rows = read_jsonl(metrics)
        losses = [r["loss"] for r in rows if "eval" not in r]
        evals = [(r["loss"], r["accuracy"]) for r in rows if r.get("eval")]
        tensors = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved).graph.initializer}
        return losses, evals, tensors
