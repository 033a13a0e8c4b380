"""Behaviour of generated executables: resume, non-finite steps, bad data, exit codes, --save.

Run one test: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_runner.py -k resume
"""
import filecmp
import os
import random
import struct
import unittest

from common import FASHION, HGPC, LENET, HgpcTestCase, read_jsonl, run, write_npy


def random_data(test, n, shape=(1, 28, 28), classes=10, seed=0, poison=None):
    """Writes images/labels .npy files; `poison` replaces every pixel with that value."""
    rng = random.Random(seed)
    count = n
    for d in shape:
        count *= d
    pixels = [poison if poison is not None else rng.random() for _ in range(count)]
    images, labels = test.path("x.npy"), test.path("y.npy")
    write_npy(images, struct.pack("<%df" % count, *pixels), (n,) + tuple(shape), "<f4")
    write_npy(labels, struct.pack("<%dq" % n, *[rng.randrange(classes) for _ in range(n)]), (n,), "<i8")
    return "npy:%s,%s" % (images, labels)


class RunnerTest(HgpcTestCase):
    def test_resume_continues_exactly(self):
        """3 steps, a checkpoint, 3 more from it: the same weights as 6 steps in one run."""
        exe = self.compile(args=["--batch", "8", "--optimizer", "adamw", "--lr", "0.01"])
        data = random_data(self, 40)
        code, _, err = run([exe, "--data", data, "--steps", "6", "--save", self.path("a.onnx"),
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        ckpt = self.path("ckpt")
        code, _, err = run([exe, "--data", data, "--steps", "3", "--checkpoint-dir", ckpt,
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        code, _, err = run([exe, "--data", data, "--steps", "3", "--resume",
                            os.path.join(ckpt, "checkpoint.hgpc"), "--save", self.path("b.onnx"),
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        self.assertTrue(filecmp.cmp(self.path("a.onnx"), self.path("b.onnx"), shallow=False),
                        "3+3 steps with a resume differ from 6 steps")

    def test_interrupted_run_resumes_bit_identically(self):
        """SIGINT and SIGTERM at a random step: the run finishes that step, writes a checkpoint,
        exits 130 or 143 and prints the command that continues it; that command ends with the
        same weights, bit for bit, as a run that was never interrupted (shuffled epochs, AdamW
        state, BN-free LeNet on the CPU backend)."""
        import shlex
        import signal
        import subprocess
        import time
        exe = self.compile(args=["--batch", "8", "--optimizer", "adamw", "--lr", "0.01",
                                 "--metrics-every", "1"])
        data = random_data(self, 40)  # 5 batches per epoch: the interruption lands mid-epoch
        steps = 60
        code, _, err = run([exe, "--data", data, "--steps", str(steps), "--save",
                            self.path("whole.onnx"), "--progress", "none"])
        self.assertEqual(code, 0, err)
        rng = random.Random()
        for sig, want in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            at = rng.randrange(2, steps - 20)
            with self.subTest(signal=sig.name, at=at):
                saved, metrics = self.path("cut-%s.onnx" % sig.name), self.path("m.jsonl")
                if os.path.exists(metrics):
                    os.remove(metrics)
                p = subprocess.Popen([exe, "--data", data, "--steps", str(steps), "--save", saved,
                                      "--metrics", metrics, "--checkpoint-dir", self.path(sig.name),
                                      "--progress", "none"], stderr=subprocess.PIPE, text=True)
                deadline = time.time() + 120
                while time.time() < deadline and p.poll() is None:
                    if os.path.exists(metrics) and len(read_jsonl(metrics)) >= at:
                        break
                    time.sleep(0.002)
                p.send_signal(sig)
                err = p.communicate(timeout=120)[1]
                self.assertEqual(p.returncode, want, err)
                done = len([r for r in read_jsonl(metrics) if "eval" not in r])
                self.assertIn("interrupted by %s: stopped after step %d " % (sig.name, done), err)
                self.assertFalse(os.path.exists(saved), "an interrupted run saved the model")
                cont = [l for l in err.splitlines() if l.startswith("to continue: ")]
                self.assertEqual(len(cont), 1, err)
                argv = shlex.split(cont[0][len("to continue: "):])
                self.assertIn("--steps %d" % (steps - done), cont[0])
                code, _, err = run(argv)
                self.assertEqual(code, 0, err)
                self.assertIn("resuming at step %d" % done, err)
                self.assertTrue(filecmp.cmp(self.path("whole.onnx"), saved, shallow=False),
                                "interrupted after %d steps and resumed: the weights differ" % done)

    def test_checkpoint_every_bounds_what_a_kill_loses(self):
        """--checkpoint-every 4 and a SIGKILL: the checkpoint left is at a multiple of 4 steps (or
        an epoch's end) and continues to the uninterrupted weights; without --checkpoint-dir it is refused."""
        import signal
        import subprocess
        import time
        exe = self.compile(args=["--batch", "8", "--metrics-every", "1"])
        data = random_data(self, 40)
        code, _, err = run([exe, "--data", data, "--steps", "40", "--save", self.path("a.onnx"),
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        ckpt, metrics = self.path("ckpt"), self.path("m.jsonl")
        p = subprocess.Popen([exe, "--data", data, "--steps", "40", "--checkpoint-dir", ckpt,
                              "--checkpoint-every", "4", "--metrics", metrics, "--progress", "none"],
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(metrics) and len(read_jsonl(metrics)) >= 10:
                break
            time.sleep(0.002)
        p.send_signal(signal.SIGKILL)
        p.wait()
        with open(os.path.join(ckpt, "checkpoint.hgpc"), "rb") as f:
            step = struct.unpack("<q", f.read(48)[40:48])[0]
        # 40 samples in batches of 8 are 5 steps an epoch, and --checkpoint-dir also writes a
        # checkpoint at each epoch's end: a kill after step 10 (slow under load) leaves step 10.
        self.assertTrue(step % 4 == 0 or step % 5 == 0, step)
        self.assertGreaterEqual(step, 8)
        code, _, err = run([exe, "--data", data, "--steps", str(40 - step), "--resume",
                            os.path.join(ckpt, "checkpoint.hgpc"), "--save", self.path("b.onnx"),
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        self.assertTrue(filecmp.cmp(self.path("a.onnx"), self.path("b.onnx"), shallow=False))
        code, _, err = run([exe, "--data", data, "--steps", "4", "--checkpoint-every", "2"])
        self.assertEqual(code, 2, err)

    def test_destinations_are_checked_before_training(self):
        """--save into a folder that does not exist yet is created; a destination that cannot be
        written fails with exit 4 and names its flag before the first step."""
        exe = self.compile(args=["--batch", "4"])
        nested = self.path(os.path.join("new", "folder", "m.onnx"))
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1", "--save", nested,
                            "--progress", "none"])
        self.assertEqual(code, 0, err)
        self.assertTrue(os.path.exists(nested))
        blocker = self.path("a-file")
        open(blocker, "w").close()
        for flag, value in (("--save", os.path.join(blocker, "m.onnx")), ("--save", self.tmp),
                            ("--metrics", os.path.join(blocker, "m.jsonl")),
                            ("--checkpoint-dir", os.path.join(blocker, "ckpt")),
                            ("--trace", os.path.join(blocker, "t.json"))):
            with self.subTest(flag=flag, value=value):
                code, _, err = run([exe, "--data", "synthetic", "--steps", "1", flag, value,
                                    "--progress", "plain"])
                self.assertEqual(code, 4, err)
                self.assertIn(flag + " '", err)
                self.assertNotIn("training ", err)

    def test_hold_batch_trains_every_step_on_the_first_batch(self):
        # --hold-batch (benchmarks) uploads the first batch once: the first step sees what a
        # normal run's first step sees, and every later step the same batch again, so plain SGD
        # lowers that batch's loss step after step (a normal run's losses jump between batches).
        exe = self.compile(args=["--batch", "8", "--optimizer", "sgd", "--lr", "0.01",
                                 "--momentum", "0"])
        losses = {}
        for name, extra in (("held", ["--hold-batch"]), ("plain", [])):
            metrics = self.path(name + ".jsonl")
            code, _, err = run([exe, "--data", "synthetic:64", "--steps", "8", "--metrics", metrics,
                                "--progress", "none", *extra])
            self.assertEqual(code, 0, err)
            losses[name] = [r["loss"] for r in read_jsonl(metrics) if "eval" not in r]
        held, plain = losses["held"], losses["plain"]
        self.assertEqual(len(held), 8)
        self.assertEqual(held[0], plain[0])
        self.assertTrue(all(b < a for a, b in zip(held, held[1:])), held)
        self.assertNotEqual(held[1:], plain[1:])

    def test_resume_rejects_another_plan(self):
        exe = self.compile(args=["--batch", "8"])
        other = self.compile(out="other", args=["--batch", "8", "--lr", "0.5"])
        data = random_data(self, 16)
        ckpt = self.path("ckpt")
        code, _, err = run([exe, "--data", data, "--steps", "1", "--checkpoint-dir", ckpt, "--progress", "none"])
        self.assertEqual(code, 0, err)
        code, _, err = run([other, "--data", data, "--steps", "1", "--resume",
                            os.path.join(ckpt, "checkpoint.hgpc"), "--progress", "none"])
        self.assertEqual(code, 5, err)
        self.assertIn("different compiled plan", err)

    def test_nonfinite_steps_are_skipped_then_the_run_stops_with_a_checkpoint(self):
        exe = self.compile(args=["--batch", "4"])
        data = random_data(self, 16, poison=float("inf"))
        ckpt = self.path("ckpt")
        code, _, err = run([exe, "--data", data, "--steps", "10", "--checkpoint-dir", ckpt,
                            "--max-nonfinite", "3", "--metrics", self.path("m.jsonl"),
                            "--progress", "none"])
        self.assertEqual(code, 7, err)
        self.assertIn("non-finite", err)
        self.assertIn("update was skipped", err)
        self.assertTrue(os.path.exists(os.path.join(ckpt, "checkpoint.hgpc")))
        rows = read_jsonl(self.path("m.jsonl"))
        self.assertTrue(rows and all(r["ok"] is False for r in rows), rows)
        # The weights are untouched: training can go on from the checkpoint with good data.
        good = random_data(self, 16, seed=1)
        code, _, err = run([exe, "--data", good, "--steps", "2", "--resume",
                            os.path.join(ckpt, "checkpoint.hgpc"), "--progress", "none"])
        self.assertEqual(code, 0, err)

    def test_bad_data_exits_5_before_training(self):
        exe = self.compile(args=["--batch", "4"])
        wrong_shape = random_data(self, 8, shape=(3, 32, 32))
        code, _, err = run([exe, "--data", wrong_shape, "--steps", "1"])
        self.assertEqual(code, 5, err)
        self.assertIn("[3,32,32]", err)
        bad_labels = random_data(self, 8, classes=12, seed=3)
        code, _, err = run([exe, "--data", bad_labels, "--steps", "1"])
        self.assertEqual(code, 5, err)
        self.assertIn("outside [0, 10)", err)
        truncated = self.path("idx")
        os.makedirs(truncated)
        with open(os.path.join(FASHION, "train-images-idx3-ubyte.gz"), "rb") as f:
            import gzip
            raw = gzip.decompress(f.read())
        with open(os.path.join(truncated, "train-images-idx3-ubyte"), "wb") as f:
            f.write(raw[: len(raw) // 2])
        with open(os.path.join(FASHION, "train-labels-idx1-ubyte.gz"), "rb") as src, \
                open(os.path.join(truncated, "train-labels-idx1-ubyte.gz"), "wb") as dst:
            dst.write(src.read())
        code, _, err = run([exe, "--data", "fashion-mnist:" + truncated, "--steps", "1"])
        self.assertEqual(code, 5, err)
        self.assertIn("truncated", err)

    def test_usage_errors_exit_2(self):
        exe = self.compile(args=["--batch", "4"])
        code, _, err = run([exe, "--data", "synthetic"])
        self.assertEqual(code, 2, err)
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1", "--epochs", "1"])
        self.assertEqual(code, 2, err)
        code, _, err = run([exe, "--data", "nonsense:x", "--steps", "1"])
        self.assertEqual(code, 2, err)
        code, _, err = run([HGPC, "compile", LENET, "--optimizer", "rmsprop", "-o", self.path("x")])
        self.assertEqual(code, 2, err)
        code, _, err = run([HGPC, "compile", LENET, "--nesterov", "-o", self.path("x")])
        self.assertEqual(code, 2, err)
        self.assertIn("--nesterov", err)

    def test_device_auto_falls_back_to_cpu_once_and_cuda_fails_cleanly(self):
        exe = self.compile(args=["--batch", "4"])
        code, _, err = run([exe, "--data", "synthetic", "--steps", "2", "--progress", "none"])
        self.assertEqual(code, 0, err)
        self.assertEqual(err.count("CPU reference backend"), 1, err)
        code, _, err = run([exe, "--data", "synthetic", "--steps", "1", "--device", "cuda"])
        if code != 0:
            self.assertEqual(code, 6, err)

    def test_metrics_lines_cover_every_step_and_eval(self):
        exe = self.compile(args=["--batch", "4", "--metrics-every", "3"])
        data = random_data(self, 20)
        code, _, err = run([exe, "--data", data, "--eval", data, "--epochs", "2",
                            "--metrics", self.path("m.jsonl"), "--progress", "plain"])
        self.assertEqual(code, 0, err)
        rows = read_jsonl(self.path("m.jsonl"))
        steps = [r["step"] for r in rows if "eval" not in r]
        self.assertEqual(steps, list(range(1, 11)))
        self.assertEqual([r["epoch"] for r in rows if "eval" not in r], [0] * 5 + [1] * 5)
        evals = [r for r in rows if r.get("eval")]
        self.assertEqual(len(evals), 2)
        for r in rows:
            if "eval" not in r:
                self.assertGreater(r["images_per_s"], 0)
                self.assertAlmostEqual(r["lr"], 0.01, places=6)
        self.assertTrue(all(0 <= e["accuracy"] <= 1 for e in evals))

    def test_executable_is_self_contained(self):
        """The executable needs no hgpc files: copy it alone elsewhere and run it."""
        exe = self.compile(args=["--batch", "4"])
        lone = os.path.join(self.tmp, "elsewhere")
        os.makedirs(lone)
        moved = os.path.join(lone, "train")
        os.rename(exe, moved)
        code, out, err = run(["ldd", moved])
        self.assertNotIn("libonnx", out)
        self.assertNotIn("libprotobuf", out)
        self.assertNotIn("libLLVM", out)
        self.assertNotIn("libstdc++", out)
        code, _, err = run([moved, "--data", "synthetic", "--steps", "1", "--progress", "none"], cwd=lone)
        self.assertEqual(code, 0, err)

    def test_bare_runner_says_what_it_is(self):
        runner = os.path.join(os.path.dirname(HGPC), "hgpc-runner")
        code, _, err = run([runner, "--data", "synthetic", "--steps", "1"])
        self.assertEqual(code, 3, err)
        self.assertIn("hgpc compile", err)


if __name__ == "__main__":
    unittest.main()
