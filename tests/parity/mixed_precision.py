#!/usr/bin/python3
"""bf16 mixed precision against PyTorch's autocast, on the CPU or on the GPU.

Exports a model in training mode, trains it 3 steps in PyTorch three ways on the same data: in
float32, in bf16 under torch.autocast(DEVICE, dtype=torch.bfloat16) (the reference), and with the
hgpc executable compiled with --precision bf16 on the same device (the CPU backend, or with
--device cuda the CUDA backend against PyTorch's CUDA autocast; TF32 off for PyTorch's float32).
SGD with momentum, lr 0.01. The CPU run is a CTest (label parity); the CUDA run is the GPU
machine's `parity16` stage of tests/gpu/device_run.sh.

bf16 keeps 8 significant bits, and the two implementations round in different places (PyTorch's
CPU autocast keeps BatchNorm's output in bf16 as hgpc does, but adds a convolution's bias before
rounding, fuses differently and sums in other orders), so they cannot agree to float32
precision. What must hold (docs/precision.md):

- losses: hgpc bf16 within 2% (relative) of autocast's at every step;
- parameter updates (trained minus initial), as relative L2 over all parameters: hgpc bf16 within
  10% of autocast's, and no farther from autocast than 3x autocast's own distance from float32
  (hgpc is as close to the bf16 reference as bf16 is to float32), whichever is looser;
- BN running statistics: relative L2 within 2%.

    /usr/bin/python3 tests/parity/mixed_precision.py --model lenet5 --build build
    python3 tests/parity/mixed_precision.py --model resnet18 --device cuda --hgpc hgpc  # GPU machine
"""
import argparse
import copy
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples"))
from make_lenet5 import LeNet5  # noqa: E402

MODELS = {
    "lenet5": (lambda: LeNet5(), (1, 28, 28), 16),
    "resnet18": (lambda: tvm.resnet18(num_classes=10), (3, 64, 64), 16),
}
STEPS, LR, MOMENTUM = 3, 0.01, 0.9
LOSS_TOL, UPDATE_TOL, UPDATE_FACTOR, STATS_TOL = 2e-2, 0.10, 3.0, 2e-2


def train_torch(model, x, y, batch, autocast, device="cpu"):
    """Trains in place; returns the losses and the state after each step."""
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses, states = [], []
    for s in range(STEPS):
        xb = torch.from_numpy(x[s * batch:(s + 1) * batch]).to(device)
        yb = torch.from_numpy(y[s * batch:(s + 1) * batch]).to(device)
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            out = model(xb)
            out = out[0] if isinstance(out, (tuple, list)) else out
            loss = F.cross_entropy(out, yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        states.append({k: v.detach().double().cpu().numpy().copy() for k, v in model.state_dict().items()
                       if not k.endswith("num_batches_tracked")})
    return losses, states


def rel_l2(a, b, names):
    num = sum(float(((a[n] - b[n]) ** 2).sum()) for n in names)
    den = sum(float((b[n] ** 2).sum()) for n in names)
    return (num / max(den, 1e-300)) ** 0.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--build", default="build")
    ap.add_argument("--hgpc", help="the hgpc compiler (default: BUILD/bin/hgpc)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where both PyTorch and the hgpc executable train")
    ap.add_argument("--keep", help="keep the work files in this folder")
    args = ap.parse_args()
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    make, shape, batch = MODELS[args.model]
    torch.manual_seed(0)
    model = make().train()
    init = {k: v.detach().double().numpy().copy() for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}
    work = args.keep or tempfile.mkdtemp(prefix="hgpc-bf16-")
    os.makedirs(work, exist_ok=True)
    try:
        onnx_path = os.path.join(work, "model.onnx")
        kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  opset_version=17, input_names=["input"])
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kw["dynamo"] = False  # torch 2.9+ defaults to the dynamo exporter
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path, **kw)
        exported = onnx.load(onnx_path)  # export moved the copy's BN statistics: restore them
        for t in exported.graph.initializer:
            if t.name in init:
                t.CopyFrom(onnx.numpy_helper.from_array(init[t.name].astype(np.float32), t.name))
        onnx.save(exported, onnx_path)

        rng = np.random.default_rng(0)
        x = rng.standard_normal((batch * STEPS, *shape), dtype=np.float32)
        y = rng.integers(0, 10, size=(batch * STEPS,), dtype=np.int64)
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "y.npy"), y)

        f32_losses, f32_states = train_torch(copy.deepcopy(model), x, y, batch, False, args.device)
        amp_losses, amp_states = train_torch(copy.deepcopy(model), x, y, batch, True, args.device)

        exe = os.path.join(work, "train")
        hgpc = args.hgpc or os.path.join(args.build, "bin", "hgpc")
        p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch),
                            "--precision", "bf16", "--optimizer", "sgd", "--lr", str(LR),
                            "--momentum", str(MOMENTUM)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("hgpc compile failed (%d): %s" % (p.returncode, p.stderr))
        hgpc_states = []
        for steps in (1, STEPS):
            saved = os.path.join(work, "trained%d.onnx" % steps)
            metrics = os.path.join(work, "metrics%d.jsonl" % steps)
            p = subprocess.run([exe, "--data", "npy:%s,%s" % (os.path.join(work, "x.npy"), os.path.join(work, "y.npy")),
                                "--shuffle", "off", "--steps", str(steps), "--device", args.device, "--save", saved,
                                "--metrics", metrics, "--progress", "none"], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("the hgpc executable failed (%d): %s" % (p.returncode, p.stderr))
            hgpc_losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip() and "eval" not in l]
            hgpc_states.append({t.name: onnx.numpy_helper.to_array(t).astype(np.float64)
                                for t in onnx.load(saved).graph.initializer})
    finally:
        if not args.keep:
            shutil.rmtree(work, True)

    failures = []
    params = [n for n, _ in model.named_parameters() if n in hgpc_states[0]]
    stats = [n for n in init if ("running_mean" in n or "running_var" in n) and n in hgpc_states[0]]
    if len(params) != len(list(model.parameters())):
        failures.append("the trained model lacks parameters")

    # Losses: within LOSS_TOL of autocast, or within 3x autocast's own distance from float32.
    loss_rel = [abs(a - b) / abs(b) for a, b in zip(hgpc_losses, amp_losses)]
    loss_spread = [abs(a - b) / abs(b) for a, b in zip(amp_losses, f32_losses)]
    if len(hgpc_losses) != STEPS or any(r > max(LOSS_TOL, UPDATE_FACTOR * d)
                                        for r, d in zip(loss_rel, loss_spread)):
        failures.append("losses: hgpc bf16 %s, autocast %s, float32 %s"
                        % (hgpc_losses, amp_losses, f32_losses))

    def update(state):
        return {n: state[n] - init[n] for n in params}

    report = {}
    for label, got, amp, f32 in (("step1", hgpc_states[0], amp_states[0], f32_states[0]),
                                 ("final", hgpc_states[1], amp_states[-1], f32_states[-1])):
        hgpc_vs_amp = rel_l2(update(got), update(amp), params)
        amp_vs_f32 = rel_l2(update(amp), update(f32), params)
        stats_rel = rel_l2(got, amp, stats) if stats else 0.0
        stats_spread = rel_l2(amp, f32, stats) if stats else 0.0
        report[label] = dict(update_rel_l2_hgpc_vs_autocast=hgpc_vs_amp,
                             update_rel_l2_autocast_vs_float32=amp_vs_f32,
                             bn_stats_rel_l2=stats_rel, bn_stats_autocast_vs_float32=stats_spread)
        if hgpc_vs_amp > max(UPDATE_TOL, UPDATE_FACTOR * amp_vs_f32):
            failures.append("%s updates: hgpc bf16 differs from autocast by %.3g (autocast from "
                            "float32: %.3g)" % (label, hgpc_vs_amp, amp_vs_f32))
        if stats_rel > max(STATS_TOL, UPDATE_FACTOR * stats_spread):
            failures.append("%s BN running statistics differ by %.3g (autocast from float32: %.3g)"
                            % (label, stats_rel, stats_spread))
    print(json.dumps(dict(model=args.model, device=args.device, steps=STEPS, losses_hgpc_bf16=hgpc_losses,
                          losses_autocast_bf16=amp_losses, losses_float32=f32_losses,
                          max_loss_rel=max(loss_rel) if loss_rel else None, **report)))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
