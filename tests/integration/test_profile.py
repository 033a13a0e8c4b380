"""hgpc plan/compile --records: measured times and launch shapes replace the estimates exactly
where the records say, and records of another plan are refused with exit code 5. The records
here are synthetic, written from the plan itself with known durations, so no GPU is needed
(tests/gpu/CudaProfileTest.cpp profiles a real run)."""
import os
import re
import unittest

from common import HGPC, LENET, HgpcTestCase, run

OPTS = ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--weight-decay", "5e-4"]
BATCH = "32"


def train_steps(plan_text):
    """(op, escaped loc) of every step of the train program in `hgpc compile --emit plan`."""
    steps, inside = [], False
    for line in plan_text.splitlines():
        if line.startswith("program train {"):
            inside = True
        elif inside and line.startswith("}"):
            break
        elif inside:
            op = re.search(r"= (\w+)\(", line).group(1)
            loc = re.search(r' loc\("((?:[^"\\]|\\.)*)"\)', line)
            steps.append((op, loc.group(1) if loc else ""))
    return steps


def synthetic_records(steps, batch=BATCH, model="lenet5", change_op=None):
    """One kernel per step on stream 0: step i lasts 1 + i % 7 us on 100 + i blocks of 256
    threads, 1 us after the previous one (so the measured gap is 1 us)."""
    lines, t = [], 0.0
    for i, (op, loc) in enumerate(steps):
        if i == change_op:
            op = "Conv" if op != "Conv" else "Relu"
        dur = 1 + i % 7
        lines.append('kernel train %d %s "%s" stream=0 grid=%d,1,1 block=256,1,1 regs=%d '
                     'smem=1024+%d start_us=%.3f dur_us=%.3f name="k%d"'
                     % (i, op, loc, 100 + i, 32 + i % 3, 256 * (i % 2), t, dur, i))
        t += dur + 1
    head = ['hgpc-records 1', 'model "%s"' % model, 'batch %s' % batch,
            'gpu "NVIDIA H200" sms 132', 'mapping graph',
            'program train steps %d span_us %.3f' % (len(steps), t - 1)]
    return "\n".join(head + lines) + "\n"


class RecordsTest(HgpcTestCase):
    def setUp(self):
        super().setUp()
        code, out, err = run([HGPC, "compile", LENET, "--batch", BATCH, *OPTS, "--emit", "plan"])
        self.assertEqual(code, 0, err)
        self.steps = train_steps(out)
        self.assertGreater(len(self.steps), 20)

    def records(self, name="records.txt", **kw):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(synthetic_records(self.steps, **kw))
        return path

    def plan(self, *extra):
        code, out, err = run([HGPC, "plan", LENET, "--target", "h200", "--batch", BATCH, *OPTS,
                              *extra])
        self.assertEqual(code, 0, err)
        return out.splitlines()

    def test_measured_rows_replace_the_estimates_and_nothing_else(self):
        base, measured = self.plan(), self.plan("--records", self.records())
        n = len(self.steps)
        # One header line more, saying where the measurements come from, and the same steps. The
        # stream schedule after the step table follows the times, so its events may differ.
        def table(lines):
            return lines[:next(i for i, l in enumerate(lines) if l.startswith("streams "))]
        self.assertEqual(len(table(measured)), len(table(base)) + 1)
        self.assertEqual(measured[0], base[0])
        self.assertEqual(measured[1], "records from NVIDIA H200 (132 SMs, graph mapping): every "
                         "time is measured; %d of %d steps ran kernels; gap 1.00 us per kernel; "
                         "profiled iteration %.3f ms" % (n, n, (sum(1 + i % 7 for i in range(n))
                                                              + n - 1) / 1e3))
        self.assertEqual(measured[2:4], base[1:3])  # program line, column header
        for i in range(n):
            b, m = base[3 + i].split(), measured[4 + i].split()
            with self.subTest(step=i):
                self.assertEqual(m[-2:], ["measured", "(1)"])
                m = m[:-2]
                # step, op; gflop, mbyte, result, source: unchanged.
                self.assertEqual(m[:2], b[:2])
                self.assertEqual(m[13:15] + m[16:18], b[13:15] + b[16:18])
                # blocks x threads, registers, shared memory: the kernel's.
                self.assertEqual(m[6:11], [str(100 + i), "x", "256", str(32 + i % 3),
                                           str(1024 + 256 * (i % 2))])
                # Its duration plus the 1 us gap.
                self.assertEqual(float(m[15]), 1 + i % 7 + 1.0)
        one_stream = sum(2 + i % 7 for i in range(n)) / 1e3
        self.assertIn("predicted iteration %.3f ms on one stream" % one_stream,
                      "\n".join(measured))
        # Memory is not a matter of timing.
        self.assertEqual([l for l in measured if l.startswith("peak memory")],
                         [l for l in base if l.startswith("peak memory")])

    def test_records_of_another_plan_exit_5(self):
        cases = {"batch": dict(batch="64"), "model": dict(model="resnet18"),
                 "op": dict(change_op=3)}
        for what, kw in cases.items():
            path = self.records(what + ".txt", **kw)
            for cmd in (["plan", "--target", "h200"], ["compile", "--emit", "plan"]):
                with self.subTest(what=what, command=cmd[0]):
                    code, _, err = run([HGPC, cmd[0], LENET, *cmd[1:], "--batch", BATCH, *OPTS,
                                        "--records", path])
                    self.assertEqual(code, 5, err)
                    self.assertIn("the records were made from another plan", err)
                    self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_malformed_records_exit_5_with_a_position(self):
        path = self.path("bad.txt")
        with open(path, "w") as f:
            f.write(synthetic_records(self.steps).replace("grid=105,1,1", "grid=105;1,1"))
        code, _, err = run([HGPC, "plan", LENET, "--target", "h200", "--batch", BATCH, *OPTS,
                            "--records", path])
        self.assertEqual(code, 5, err)
        self.assertIn("bad.txt:12:", err)

    def test_compile_accepts_matching_records(self):
        code, out, err = run([HGPC, "compile", LENET, "--batch", BATCH, *OPTS, "--emit", "plan",
                              "--records", self.records()])
        self.assertEqual(code, 0, err)
        self.assertEqual(len(train_steps(out)), len(self.steps))


class RunnerFlagsTest(HgpcTestCase):
    def test_profile_and_trace_need_the_cuda_backend(self):
        """On the CPU backend (chosen, or fallen back to without a GPU) the flags are refused with
        the device exit code, before any training."""
        exe = self.compile(args=["--batch", "8"])
        for flag in ("--profile", "--trace"):
            for device in ("cpu", "auto"):
                with self.subTest(flag=flag, device=device):
                    out = self.path("out")
                    code, _, err = run([exe, "--data", "synthetic:64", "--steps", "4", "--device",
                                        device, "--progress", "none", flag, out])
                    if device == "auto" and "running on the CPU" not in err:
                        continue  # a machine with a GPU: the GPU tests cover it
                    self.assertEqual(code, 6, err)
                    self.assertIn("need the CUDA backend", err)
                    self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
