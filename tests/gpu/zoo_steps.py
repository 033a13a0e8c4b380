#!/usr/bin/env python3
"""Whole training steps on CUDA for the public zoo models, judged by tests/parity/judge.py.

For each model: export (this machine's torch), compile with --precision fp32, train 1 and 3 steps
with the executable on CUDA (--deterministic, parity.run_hgpc) and 3 on the CPU backend, from the same data, and train PyTorch on
this GPU 3 steps in float32 with TF32 off and in float64. The CUDA run is judged as the CPU
parity test judges the CPU backend: every tensor's update (after 1 and after 3 steps) and every
loss against PyTorch float64, the allowance 4x PyTorch CUDA float32's own distance from float64
(plus 1e-4 of the update; 1e-5 of a loss). The CPU backend's run is judged the same way and
reported next to it, and so is the CUDA run with the CPU backend's distance as the allowance
(how far CUDA is from float64 compared with hgpc's own reference backend); only the first
judgement decides. A case over its allowance is judged again by tests/parity/parity.py on CUDA
with its kinks found and named (one more JSON line, "kinks_judged"): the ReLU and pooling
decisions its run takes on the other side of float64's, each shown to be rounding, forced in the
float64 reference; the case passes only if every tensor is then within its allowance. ResNet-18
needs it on the H200: layer1.1's last ReLU at sample 3, channel 6, (14, 8) is +6.0e-7 in the
CUDA run and -3.2e-6 in float64 (error 1.0e-5), and a stem pooling window at step 3.

With --precision bf16 or fp16 (docs/precision.md) the 16-bit CUDA run is judged against PyTorch
CUDA float32, with torch.autocast's own distance from float32 as the allowance, capped at 0.9
of each update so that a missing update fails (as tests/parity/mixed_precision.py). Run on the
GPU machine:
    python3 tests/gpu/zoo_steps.py --hgpc $(command -v hgpc)

--step-diff N (fp32) trains N steps on CUDA and on the CPU backend with every tensor dumped
after the last, and prints the steps where the two runs part (tests/parity/step_diff.py).

--variants "A;B;..." (fp32) bisects a failing case instead: each variant is a list of extra
`hgpc compile` flags (or `default`, or a runner flag after `run:`, or an environment variable after `env:`), trained 3 steps on CUDA twice
and judged as above; one line each, with whether its two runs were bit-identical, e.g.
    --models resnet18 --variants "default;--max-streams 1;--no-split --no-pipeline;run:--eager"
"""
import argparse
import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
import judge  # noqa: E402
import parity  # noqa: E402

# AlexNet and VGG-11 need 224x224 inputs, which make their CPU side too slow for the device run.
MODELS = ["lenet5", "resnet18", "mobilenet_v2", "googlenet", "squeezenet1_1", "densenet121",
          "efficientnet_b0", "convnext_reduced"]
STEPS = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--variants", default=None,
                    help="fp32: ';'-separated compile flag sets to judge side by side (see above)")
    ap.add_argument("--device", default="cuda", help="with --variants: where both sides run (cpu: a smoke test)")
    ap.add_argument("--step-diff", type=int, metavar="STEPS", default=0,
                    help="instead of judging: train STEPS steps on CUDA and on the CPU backend, "
                         "dump every tensor after the last (--dump-tensors, compiled with "
                         "--no-buffer-reuse) and print where they part (tests/parity/step_diff.py)")
    ap.add_argument("--reference-device", default="cpu", help="with --step-diff: the reference run's device")
    ap.add_argument("--no-kinks", action="store_true",
                    help="fp32: do not judge a case over its allowance again with its kinks named")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    make_opt, flags = parity.OPTIMIZERS["sgd"]
    failed = 0
    for name in args.models.split(","):
        make, shape, batch = parity.MODELS[name]
        torch.manual_seed(0)
        model = make()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        model.train()
        init = parity.state_of(model)
        work = tempfile.mkdtemp(prefix="zoo-")
        atexit.register(shutil.rmtree, work, True)
        path = os.path.join(work, "m.onnx")
        kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=["input"])
        try:
            torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), path,
                              opset_version=18, dynamo=False, **kw)
        except TypeError:
            torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), path, opset_version=17, **kw)
        # The initializers are the torch model's own values, so that PyTorch's runs start from
        # the same point.
        parity.restore_initial_state(path, model)
        x, y = parity.make_data(batch * STEPS, shape, None)
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "y.npy"), y)
        if args.step_diff:
            failed += step_diff(args, name, flags, path, work, batch)
            continue
        if args.variants:
            failed += bisect(args, name, model, make_opt, flags, path, work, x, y, batch, init)
            continue
        exe = os.path.join(work, "t")
        p = subprocess.run([args.hgpc, "compile", path, "-o", exe, "--batch", str(batch),
                            "--precision", args.precision, *flags], capture_output=True, text=True)
        if p.returncode != 0:
            print(json.dumps(dict(model=name, error=p.stderr[-400:])), flush=True)
            failed += 1
            continue
        gpu_losses, gpu = parity.run_hgpc(exe, work, STEPS, "cuda")
        _, gpu1 = parity.run_hgpc(exe, work, 1, "cuda")
        names = sorted(init)
        report = dict(model=name, precision=args.precision)
        failures = []
        if args.precision == "fp32":
            cpu_losses, cpu = parity.run_hgpc(exe, work, STEPS, "cpu")
            _, cpu1 = parity.run_hgpc(exe, work, 1, "cpu")
            l32, s32 = parity.train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y,
                                          batch, STEPS, device="cuda")
            l64, s64 = parity.train_torch(copy.deepcopy(model).double(), torch.float64, make_opt,
                                          x, y, batch, STEPS, device="cuda")
            for label, got, got_losses, drift, drift_losses in (
                    ("cuda", (gpu1, gpu), gpu_losses, s32, l32),
                    ("cpu", (cpu1, cpu), cpu_losses, s32, l32),
                    ("cuda_vs_cpu_drift", (gpu1, gpu), gpu_losses, (cpu1, cpu), cpu_losses)):
                per = {}
                for k, s in ((0, 0), (1, STEPS - 1)):
                    ref32 = drift[k] if isinstance(drift, tuple) else drift[s]
                    rows = judge.judge_state(got[k], s64[s], ref32, init, names)
                    per["after_%d" % (s + 1)] = judge.summary(rows, [])
                    if label == "cuda":
                        failures += judge.failures(rows, [], "after %d steps, " % (s + 1))
                loss_rows = judge.judge_losses(got_losses, l64, drift_losses)
                per["loss_ratios"] = [round(r["ratio"], 3) for r in loss_rows]
                if label == "cuda":
                    failures += judge.failures([], loss_rows)
                report[label] = dict(max_ratio=max([v["max_update_ratio"] for k, v in per.items()
                                                    if k.startswith("after")] +
                                                   [judge.worst(loss_rows)]), **per)
            report["losses_cuda"], report["losses_float64"] = gpu_losses, l64
        else:
            half = torch.bfloat16 if args.precision == "bf16" else torch.float16
            l32, s32 = parity.train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y,
                                          batch, STEPS, device="cuda")
            la, sa = parity.train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y,
                                        batch, STEPS, device="cuda", autocast=half)
            for k, (got, s) in enumerate(((gpu1, 0), (gpu, STEPS - 1))):
                rows = judge.judge_state(got, s32[s], sa[s], init, names, cap=0.9)
                failures += judge.failures(rows, [], "after %d steps, " % (s + 1))
                report["after_%d" % (s + 1)] = judge.summary(rows, [])
            loss_rows = judge.judge_losses(gpu_losses, l32, la, running=True)
            failures += judge.failures([], loss_rows)
            report["loss_ratios"] = [round(r["ratio"], 3) for r in loss_rows]
            report["losses_cuda"], report["losses_autocast"] = gpu_losses, la
        report["ok"] = not failures
        print(json.dumps(report), flush=True)
        for f in failures[:8]:
            print("  " + f, flush=True)
        if failures and args.precision == "fp32" and not args.no_kinks:
            ok = judged_with_kinks(args, name, work)
            failures = [] if ok else failures
        failed += bool(failures)
    sys.exit(1 if failed else 0)


def judged_with_kinks(args, name, work):
    """A CUDA fp32 case over its allowance, judged again by parity.py's method with its kinks:
    the ReLU and pooling decisions the CUDA run takes on the other side of float64's, found step
    by step and each shown to be rounding (tests/parity/kinks.py), forced in the float64
    reference. The case passes when every tensor is then within its allowance. One JSON line,
    {"model", "kinks_judged": {...}}, with the kinks named."""
    bindir = os.path.dirname(os.path.dirname(os.path.abspath(args.hgpc)))
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity", "parity.py")
    found = os.path.join(work, "kinks.json")
    base = [sys.executable, "-W", "ignore", here, "--model", name, "--optimizer", "sgd",
            "--device", "cuda", "--build", bindir]
    p = subprocess.run(base + ["--find-kinks", "--save-kinks", found], capture_output=True, text=True)
    listed = [l for l in p.stdout.splitlines() if l.startswith(("Kink(", "step "))]
    if p.returncode != 0:
        print(json.dumps(dict(model=name, kinks_judged=dict(ok=False, error=p.stderr[-400:],
                                                            found=listed))), flush=True)
        return False
    p = subprocess.run(base + ["--kinks", found], capture_output=True, text=True)
    report = next((json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")), {})
    print(json.dumps(dict(model=name, kinks_judged=dict(
        ok=p.returncode == 0, max_ratio=report.get("max_ratio"), found=listed,
        misses=p.stderr.strip().splitlines()[:6]))), flush=True)
    return p.returncode == 0


def bisect(args, name, model, make_opt, flags, path, work, x, y, batch, init):
    """--variants: one JSON line per variant; returns 1 when any variant fails its allowance."""
    l32, s32 = parity.train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y, batch,
                                  STEPS, device=args.device)
    l64, s64 = parity.train_torch(copy.deepcopy(model).double(), torch.float64, make_opt, x, y,
                                  batch, STEPS, device=args.device)
    names, bad = sorted(init), 0
    for k, variant in enumerate(args.variants.split(";")):
        words = [] if variant.strip() == "default" else variant.split()
        run_flags = [w[4:] for w in words if w.startswith("run:")]
        env = dict(w[4:].split("=", 1) for w in words if w.startswith("env:"))
        words = [w for w in words if not w.startswith("env:")]
        exe = os.path.join(work, "v%d" % k)
        p = subprocess.run([args.hgpc, "compile", path, "-o", exe, "--batch", str(batch),
                            "--precision", "fp32", *flags, *[w for w in words if not w.startswith("run:")]],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(json.dumps(dict(model=name, variant=variant, error=p.stderr[-300:])), flush=True)
            bad = 1
            continue
        runs = [parity.run_hgpc(exe, work, STEPS, args.device, tag="v%d_%d" % (k, r), extra=run_flags,
                                deterministic=False,
                                env=env)
                for r in range(2)]
        identical = all(np.array_equal(runs[0][1][t], runs[1][1][t]) for t in runs[0][1])
        rows = judge.judge_state(runs[0][1], s64[STEPS - 1], s32[STEPS - 1], init, names)
        loss_rows = judge.judge_losses(runs[0][0], l64, l32)
        worst = judge.summary(rows, loss_rows)
        print(json.dumps(dict(model=name, variant=variant, bit_identical_runs=identical, **worst)),
              flush=True)
        bad |= worst["max_update_ratio"] > 1 or judge.worst(loss_rows) > 1
    return int(bad)


def step_diff(args, name, flags, path, work, batch):
    """--step-diff: where the CUDA run and the reference run part; 1 when a step jumps."""
    exe = os.path.join(work, "sd")
    p = subprocess.run([args.hgpc, "compile", path, "-o", exe, "--batch", str(batch), "--precision",
                        "fp32", "--no-buffer-reuse", *flags], capture_output=True, text=True)
    if p.returncode != 0:
        print(json.dumps(dict(model=name, error=p.stderr[-300:])), flush=True)
        return 1
    print("== %s: %d steps on %s against %s" % (name, args.step_diff, args.device,
                                                 args.reference_device), flush=True)
    rc, out = parity.dump_and_diff(exe, work, args.step_diff, (args.device, args.reference_device))
    print(out, flush=True)
    return int(rc != 0)


if __name__ == "__main__":
    main()
