"""The hgpc command line: exit codes and messages for bad models and bad flags, inspect output,
--emit forms, --weights reference and the saved ONNX."""
import os
import unittest

from common import HGPC, LENET, SOURCE, HgpcTestCase, run

MALFORMED = os.path.join(SOURCE, "tests", "malformed")


class CliTest(HgpcTestCase):
    def test_malformed_models_exit_3_with_their_message(self):
        """Every model of the malformed corpus: exit code 3, one line naming what is wrong."""
        cases = [l.rstrip("\n").split("\t") for l in open(os.path.join(MALFORMED, "expected.txt"))
                 if l.strip() and not l.startswith("#")]
        self.assertGreater(len(cases), 20)
        for name, fragment in cases:
            for cmd in (["inspect"], ["compile", "--forward-only", "--emit", "ir"]):
                if name == "symbolic_batch.onnx" and cmd[0] == "inspect":
                    continue  # inspect summarizes a symbolic batch at batch 1
                with self.subTest(model=name, command=cmd[0]):
                    code, out, err = run([HGPC, *cmd, os.path.join(MALFORMED, name)], timeout=60)
                    self.assertEqual(code, 3, err)
                    self.assertIn(fragment, err)
                    self.assertTrue(err.startswith("hgpc: invalid model: "), err)
                    self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_no_buffer_reuse_trains_identically_in_a_larger_arena(self):
        """Without buffer sharing the plan is the same computation: 20 CPU steps give the same
        weights bit for bit, and the arena is larger (every intermediate keeps its bytes)."""
        saved, arenas = [], []
        for name, args in (("shared", []), ("own", ["--no-buffer-reuse"])):
            exe = self.path(name)
            code, _, err = run([HGPC, "compile", LENET, "-o", exe, "--batch", "16", *args])
            self.assertEqual(code, 0, err)
            arenas.append(float(err.split("arena ")[1].split(" MiB")[0]))
            out = self.path(name + ".onnx")
            code, _, err = run([exe, "--data", "synthetic:64", "--steps", "20", "--device", "cpu",
                                "--progress", "none", "--save", out])
            self.assertEqual(code, 0, err)
            saved.append(open(out, "rb").read())
        self.assertEqual(saved[0], saved[1])
        self.assertGreater(arenas[1], arenas[0])

    def test_usage_errors_exit_2(self):
        for args in (["compile"], ["compile", "/no/such/model.onnx"], ["frobnicate"],
                     ["compile", LENET, "--batch", "x"], ["compile", LENET, "--emit", "asm"],
                     ["compile", LENET, "--batch", "4"], ["compile", LENET, "--batch", "0"],
                     ["compile", LENET, "--batch", "-3"], ["plan", LENET, "--batch", "0"],
                     ["inspect", LENET, "--batch", "-3"]):
            with self.subTest(args=args):
                code, _, err = run([HGPC, *args])
                self.assertEqual(code, 2, err)

    def test_mixed_precision_compiles_trains_saves_and_refuses_what_it_cannot(self):
        """--precision bf16 and fp16: the plan says so and has 16-bit tensors, the executable trains
        on the CPU and saves f32 weights; fp16 adds loss scaling; forward-only is refused."""
        for precision in ("bf16", "fp16"):
            with self.subTest(precision=precision):
                exe = self.path("mp-" + precision)
                code, out, err = run([HGPC, "compile", LENET, "-o", exe, "--batch", "16",
                                      "--precision", precision, "--emit", "plan"])
                self.assertEqual(code, 0, err)
                self.assertIn('precision="%s"' % precision, out)
                self.assertIn("act %s[16," % ("bf16" if precision == "bf16" else "f16"), out)
                self.assertEqual("LossScaleUpdate(" in out, precision == "fp16")
                saved = self.path("mp-%s.onnx" % precision)
                code, _, err = run([exe, "--data", "synthetic:64", "--steps", "8", "--device", "cpu",
                                    "--progress", "none", "--save", saved])
                self.assertEqual(code, 0, err)
                self.assertGreater(os.path.getsize(saved), 200000)  # 61706 f32 weights
                code, out, err = run([HGPC, "plan", LENET, "--batch", "16", "--precision", precision,
                                      "--target", "h200"])
                self.assertEqual(code, 0, err)
                self.assertIn("precision " + precision, out.splitlines()[0])
        code, _, err = run([HGPC, "compile", LENET, "-o", self.path("fwd"), "--batch", "4",
                            "--forward-only", "--precision", "bf16"])
        self.assertEqual(code, 2, err)
        self.assertIn("--forward-only", err)

    def test_symbolic_batch_needs_batch_flag(self):
        code, _, err = run([HGPC, "compile", LENET, "-o", self.path("x")])
        self.assertEqual(code, 3, err)
        self.assertIn("--batch", err)

    def test_inspect_summarizes_the_model(self):
        code, out, err = run([HGPC, "inspect", LENET, "--batch", "8"])
        self.assertEqual(code, 0, err)
        self.assertIn("input: f32[8,1,28,28]", out)
        self.assertIn("parameters: 61706", out)
        self.assertIn("Conv=2", out)
        self.assertIn("[8,6,28,28]", out)
        self.assertIn("total forward FLOPs", out)

    def test_emitted_ir_and_plan_are_stable(self):
        outs = []
        for _ in range(2):
            code, out, err = run([HGPC, "compile", LENET, "--batch", "8", "--emit", "plan"])
            self.assertEqual(code, 0, err)
            outs.append(out)
        self.assertEqual(outs[0], outs[1])
        self.assertIn("program train {", outs[0])
        self.assertIn("program eval {", outs[0])
        code, out, err = run([HGPC, "compile", LENET, "--batch", "8", "--emit", "train-ir"])
        self.assertEqual(code, 0, err)
        self.assertIn("SgdUpdate", out)
        self.assertIn("carry %features.0.weight <- ", out)

    def test_reference_weights_read_the_model_at_start(self):
        import shutil
        model = self.path("m.onnx")
        shutil.copy(LENET, model)
        exe = self.compile(model=model, args=["--batch", "4", "--weights", "reference"])
        embedded = self.compile(out="embedded", args=["--batch", "4"])
        self.assertLess(os.path.getsize(exe), os.path.getsize(embedded) - 200000)
        code, _, err = run([exe, "--data", "synthetic", "--steps", "2", "--save", self.path("a.onnx"),
                            "--progress", "none", "--shuffle", "off"])
        self.assertEqual(code, 0, err)
        code, _, err = run([embedded, "--data", "synthetic", "--steps", "2", "--save",
                            self.path("b.onnx"), "--progress", "none", "--shuffle", "off"])
        self.assertEqual(code, 0, err)
        self.assertEqual(open(self.path("a.onnx"), "rb").read(), open(self.path("b.onnx"), "rb").read())
        with open(model, "ab") as f:
            f.write(b"\0")
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1"])
        self.assertEqual(code, 5, err)
        self.assertIn("changed since compilation", err)
        os.remove(model)
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1"])
        self.assertEqual(code, 4, err)

    def test_saved_model_is_valid_onnx_with_trained_weights(self):
        code, out, err = run(["/usr/bin/python3", "-c", "import onnx"])
        if code != 0:
            self.skipTest("python3-onnx is missing")
        exe = self.compile(args=["--batch", "4", "--lr", "0.1"])
        code, _, err = run([exe, "--data", "synthetic", "--steps", "3", "--save", self.path("t.onnx"),
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        script = """
import onnx, onnx.numpy_helper as nh, sys
a = onnx.load(sys.argv[1]); b = onnx.load(sys.argv[2])
onnx.checker.check_model(a)
wa = {t.name: nh.to_array(t) for t in a.graph.initializer}
wb = {t.name: nh.to_array(t) for t in b.graph.initializer}
assert set(wa) == set(wb), (set(wa) ^ set(wb))
changed = [n for n in wa if (wa[n] != wb[n]).any()]
assert len(changed) == len(wa), changed
modes = [at.i for n in a.graph.node for at in n.attribute if at.name == 'training_mode']
assert not any(modes), modes
print('ok', len(changed))
"""
        code, out, err = run(["/usr/bin/python3", "-c", script, self.path("t.onnx"), LENET])
        self.assertEqual(code, 0, err)
        self.assertIn("ok 10", out)


class DistTest(HgpcTestCase):
    def test_dist_tarball_runs_elsewhere(self):
        """make dist's tarball: hgpc runs from an unpacked copy and makes working executables."""
        import subprocess
        import tarfile
        tarball = self.path("hgpc.tar.gz")
        code, out, err = run([os.path.join(SOURCE, "scripts", "dist.sh"), os.path.dirname(os.path.dirname(HGPC)),
                              tarball], cwd=SOURCE)
        self.assertEqual(code, 0, err)
        with tarfile.open(tarball) as t:
            t.extractall(self.path("x"))
        (top,) = os.listdir(self.path("x"))
        hgpc = os.path.join(self.path("x"), top, "bin", "hgpc")
        env = {"PATH": "/usr/bin:/bin"}
        p = subprocess.run([hgpc, "compile", LENET, "--batch", "4", "-o", self.path("t")], env=env,
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        code, _, err = run([self.path("t"), "--data", "synthetic", "--steps", "1", "--progress", "none"])
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
