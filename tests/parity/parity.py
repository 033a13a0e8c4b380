#!/usr/bin/python3
"""Step-for-step parity of hgpc with PyTorch on the CPU.

Exports a torchvision model in training mode (every dropout set to p=0), trains it 3 steps in
PyTorch and 3 steps with the hgpc executable on the same data in the same order, then compares
each step's loss (relative 1e-4) and every trained weight and BN running statistic (relative
max-norm 1e-3: max|hgpc - torch| / max|torch|).

    /usr/bin/python3 tests/parity/parity.py --model resnet18 --optimizer sgd --build build
"""
import argparse
import copy
import json
import os
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

# name -> (constructor, input shape, batch). Inputs are as small as each model allows: VGG and
# AlexNet need 224 for their adaptive pools to export, GoogLeNet's auxiliary heads need 64 and
# Inception v3's 107.
MODELS = {
    "lenet5": (lambda: LeNet5(), (1, 28, 28), 4),
    "resnet18": (lambda: tvm.resnet18(num_classes=10), (3, 32, 32), 4),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10), (3, 32, 32), 4),
    "googlenet": (lambda: tvm.googlenet(num_classes=10, aux_logits=True, init_weights=True), (3, 64, 64), 4),
    "alexnet": (lambda: tvm.alexnet(num_classes=10), (3, 224, 224), 2),
    "vgg11": (lambda: tvm.vgg11(num_classes=10), (3, 224, 224), 2),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(num_classes=10), (3, 64, 64), 4),
    "densenet121": (lambda: tvm.densenet121(num_classes=10), (3, 32, 32), 4),
    "inception_v3": (lambda: tvm.inception_v3(num_classes=10, aux_logits=True, init_weights=True), (3, 107, 107), 2),
}

OPTIMIZERS = {
    "sgd": (lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4),
            ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--nesterov", "--weight-decay", "5e-4"]),
    "adamw": (lambda params: torch.optim.AdamW(params, lr=1e-3),
              ["--optimizer", "adamw", "--lr", "0.001"]),
}

STEPS = 3


def logits_of(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--optimizer", required=True, choices=sorted(OPTIMIZERS))
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", help="keep the work files in this folder")
    args = ap.parse_args()
    hgpc = os.path.join(args.build, "bin", "hgpc")
    make, shape, batch = MODELS[args.model]
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = make()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    model.train()

    work = args.keep or tempfile.mkdtemp(prefix="hgpc-parity-")
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    # Exporting runs the model in training mode, which would move the BN statistics: export a copy.
    torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=17, input_names=["input"])

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch * STEPS, *shape), dtype=np.float32)
    y = rng.integers(0, 10, size=(batch * STEPS,), dtype=np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)

    make_opt, flags = OPTIMIZERS[args.optimizer]
    opt = make_opt(model.parameters())
    torch_losses = []
    for s in range(STEPS):
        xb = torch.from_numpy(x[s * batch:(s + 1) * batch])
        yb = torch.from_numpy(y[s * batch:(s + 1) * batch])
        opt.zero_grad()
        loss = F.cross_entropy(logits_of(model(xb)), yb)
        loss.backward()
        opt.step()
        torch_losses.append(loss.item())
    expected = {k: v.detach().numpy() for k, v in model.state_dict().items()}

    exe = os.path.join(work, "train")
    p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch), *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("hgpc compile failed (%d): %s" % (p.returncode, p.stderr))
    saved = os.path.join(work, "trained.onnx")
    metrics = os.path.join(work, "metrics.jsonl")
    p = subprocess.run([exe, "--data", "npy:%s,%s" % (os.path.join(work, "x.npy"), os.path.join(work, "y.npy")),
                        "--shuffle", "off", "--steps", str(STEPS), "--device", "cpu", "--save", saved,
                        "--metrics", metrics, "--progress", "none"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("the hgpc executable failed (%d): %s" % (p.returncode, p.stderr))
    hgpc_losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip() and "eval" not in l]

    failures = []
    worst_loss = 0.0
    for s, (a, b) in enumerate(zip(hgpc_losses, torch_losses)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        worst_loss = max(worst_loss, rel)
        if rel > 1e-4:
            failures.append("step %d loss: hgpc %.7g, torch %.7g (relative %.2e)" % (s + 1, a, b, rel))
    trained = onnx.load(saved)
    got = {t.name: onnx.numpy_helper.to_array(t) for t in trained.graph.initializer}
    onnx.checker.check_model(trained)
    worst_weight, worst_name, compared = 0.0, "", 0
    for name, want in expected.items():
        if name.endswith("num_batches_tracked"):
            continue
        if name not in got:
            failures.append("trained model lacks %s" % name)
            continue
        have = got[name]
        denom = max(float(np.abs(want).max()), 1e-12)
        rel = float(np.abs(have.astype(np.float64) - want).max()) / denom
        compared += 1
        if rel > worst_weight:
            worst_weight, worst_name = rel, name
        if rel > 1e-3:
            failures.append("%s: relative max-norm error %.2e" % (name, rel))
    summary = dict(model=args.model, optimizer=args.optimizer, steps=STEPS, tensors=compared,
                   max_loss_rel=worst_loss, max_weight_rel=worst_weight, worst=worst_name,
                   losses_hgpc=hgpc_losses, losses_torch=torch_losses)
    print(json.dumps(summary))
    if len(hgpc_losses) != STEPS:
        failures.append("hgpc reported %d steps" % len(hgpc_losses))
    if failures:
        print("\n".join(failures[:20]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
