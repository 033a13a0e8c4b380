#!/usr/bin/python3
"""Step-for-step parity of hgpc with PyTorch on the CPU, judged by tests/parity/judge.py.

Exports a torchvision model in training mode (every dropout module set to p=0), trains it in
PyTorch, in float32 and in float64, and with the hgpc executable on the CPU backend on the same
data in the same order, and judges every tensor's update (trained minus initial, BN running
statistics included) after the first and after the last step, and every step's loss, against
float64 with PyTorch float32's own drift as the allowance (judge.py gives the formula). Each
tensor's ratio to its allowance must be at most 1.

A case that crosses a ReLU kink names it (KINKS below): the element, and its value in hgpc's and
PyTorch's forward. The test checks that each named element is still a kink (the signs differ,
both within the forward's error of zero, found again by hgp_forward_dump), then retrains the
float64 reference with that decision forced to hgpc's side. Nothing else is excused.

    /usr/bin/python3 tests/parity/parity.py --model resnet18 --optimizer sgd --build build
    /usr/bin/python3 tests/parity/parity.py --model resnet18 --optimizer sgd-plain --batch 8 \
        --steps 1 --data-seed 1 --build build --find-kinks   # lists the kinks a case crosses
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
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "samples"))
from make_lenet5 import LeNet5  # noqa: E402
sys.path.insert(0, HERE)
import judge  # noqa: E402

# name -> (constructor, input shape, batch). Inputs are small, but large enough that BatchNorm
# normalizes over at least 16 values per channel everywhere. VGG and AlexNet need 224 for their
# adaptive pools to export; they have no BatchNorm, so they train at batch 1 to stay quick.
MODELS = {
    "lenet5": (lambda: LeNet5(), (1, 28, 28), 4),
    "resnet18": (lambda: tvm.resnet18(num_classes=10), (3, 64, 64), 4),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10), (3, 64, 64), 4),
    "googlenet": (lambda: tvm.googlenet(num_classes=10, aux_logits=True, init_weights=True), (3, 64, 64), 4),
    "alexnet": (lambda: tvm.alexnet(num_classes=10), (3, 224, 224), 1),
    "vgg11": (lambda: tvm.vgg11(num_classes=10), (3, 224, 224), 2),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(num_classes=10), (3, 64, 64), 4),
    "densenet121": (lambda: tvm.densenet121(num_classes=10), (3, 64, 64), 4),
    # Its auxiliary head needs 299x299 inputs (a 5x5 convolution after Mixed_6e); GoogLeNet covers
    # auxiliary outputs, so Inception v3 runs without it, at 107x107.
    "inception_v3": (lambda: tvm.inception_v3(num_classes=10, aux_logits=False, init_weights=True), (3, 139, 139), 4),
    # The modern families, with stochastic depth off (torch 1.13 cannot export its training-mode
    # bernoulli_; the mask's distribution is tested in CpuRandomTest and on the GPU machine's
    # exports). EfficientNet-B0: SiLU, squeeze-excitation, depthwise convolutions. ConvNeXt at
    # reduced width and depth (three stages of two blocks): channels-last LayerNorm between
    # permutes, the erf form of GELU, layer scale; layer_scale 1 so that the blocks matter.
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.0), (3, 64, 64), 4),
    "convnext_reduced": (lambda: convnext_reduced(), (3, 64, 64), 4),
}


def convnext_reduced():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    setting = [CNBlockConfig(32, 64, 2), CNBlockConfig(64, 128, 2), CNBlockConfig(128, None, 2)]
    return ConvNeXt(setting, stochastic_depth_prob=0.0, layer_scale=1.0, num_classes=10)

OPTIMIZERS = {
    "sgd": (lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4),
            ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--nesterov", "--weight-decay", "5e-4"]),
    "adamw": (lambda params: torch.optim.AdamW(params, lr=1e-3),
              ["--optimizer", "adamw", "--lr", "0.001"]),
    # Issue 20's ResNet-18 cases: momentum 0.9 (or none), lr 0.003, no weight decay.
    "sgd-m": (lambda params: torch.optim.SGD(params, lr=0.003, momentum=0.9),
              ["--optimizer", "sgd", "--lr", "0.003", "--momentum", "0.9"]),
    "sgd-plain": (lambda params: torch.optim.SGD(params, lr=0.003),
                  ["--optimizer", "sgd", "--lr", "0.003", "--momentum", "0"]),
}

STEPS = 3

# Kinks the cases cross, named element by element (judge.Kink: module, call, index, step, hgpc's
# value, PyTorch float32's, the forward's error there). Keyed by the case's command line.
KINKS = {
    # ResNet-18, batch 8, plain SGD, np.random.seed(1): the sum at the end of layer4.0 (its
    # second ReLU call) for sample 0, channel 186 is +3.83e-6 in float64; PyTorch float32 rounds
    # it to +5.8e-7 and hgpc to -1.7e-6, both well within that tensor's forward error (1.9e-5
    # from float64 in either). With hgpc's side forced in float64 every tensor is within 0.25
    # of its allowance; without it, layer4.0 and everything before it is ~1% off (issue 20).
    "resnet18 sgd-plain b8 seed1 steps1": [
        judge.Kink("layer4.0.relu", 1, (0, 186, 0, 0), 0, -1.7285e-06, 5.8115e-07, 1.87e-05)],
}
# Cases that miss the method today, each with what was measured (CPU, issue 20). A case listed
# here prints its failures and exits 0 (it must still run to the end: a crash fails); once it
# meets every bound it fails, so that it leaves this list.
EXPECTED_FAILURES = {
    "googlenet sgd b4 seed- steps3":
        "after 1 step inception3a and every layer before it are 1.2-1.34x the allowance (3.7e-4 "
        "relative L2 off float64, PyTorch float32 4.5e-5), the losses of steps 2 and 3 1.2x and "
        "1.8x: the pattern of a ReLU kink at inception3a, which judge.find_kinks cannot look for "
        "yet (torchvision's GoogLeNet calls F.relu, not ReLU modules)",
    "googlenet adamw b4 seed- steps3":
        "the step-2 loss is 6.2x the allowance (hgpc 2.24665, float64 2.23523, PyTorch float32 "
        "2.23569) and two BN running means 1.01-1.03x after 3 steps: the SGD case's first-step "
        "difference, which Adam's sign steps enlarge",
    "inception_v3 sgd b4 seed- steps3":
        "after 1 step the tensors of Mixed_7c.branch3x3dbl (the last block's branch) are up to "
        "66x the allowance (branch3x3dbl_3a.bn.bias 1.2e-2 off float64, PyTorch float32 2.0e-5), "
        "every other tensor within it, and after 3 steps every tensor within 0.43: the pattern of "
        "a ReLU kink in Mixed_7c, which find_kinks cannot look for yet (torchvision's "
        "Inception-v3 calls F.relu)",
    "efficientnet_b0 adamw b4 seed- steps3":
        "AdamW's first step is lr x sign(g) per element, and one gradient element's sign is "
        "rounding: features.6.0.block.0.0.weight[456, 93, 0, 0] (largest |g| in the tensor 1.99) "
        "has g = +2.963e-6 in float64 and +2.641e-6 in PyTorch float32, while hgpc's first update "
        "there is +9.93e-4 (a negative g of about 1.4e-6), so that tensor is 57.7x the allowance "
        "after 1 step (one element of 75,264 flipped: 2/sqrt(75264) = 7.3e-3 relative L2, as "
        "measured); features.5.1.block.3.0.weight [25, 78] and [30, 396] (g -8.8e-8 and -1.4e-6 "
        "in float64) likewise, 6.7x. After 3 steps the worst tensor is 11.4x, the step-2 loss 4.0x. "
        "The SGD case of the same model passes every bound",
    "squeezenet1_1 sgd b4 seed- steps3":
        "after 3 steps the biases of Fire 6-11 are up to 6.2x the allowance (features.11."
        "expand3x3.bias 6.3e-4 off float64, PyTorch float32 2.7e-7), every loss within 0.005: "
        "a third-step kink that is not a ReLU decision (the one ReLU flip found, Fire 11's "
        "expand3x3 [0, 92, 2, 2], changes nothing when forced: no gradient reaches it); "
        "SqueezeNet's MaxPools are the next suspects, and find_kinks does not look at them yet",
}


def logits_of(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def relmax(a, b):
    return float(np.abs(a - b).max()) / max(float(np.abs(b).max()), 1e-12)


def rel_l2(a, b, names):
    num = sum(float(((a[n] - b[n]) ** 2).sum()) for n in names)
    den = sum(float((b[n] ** 2).sum()) for n in names)
    return (num / max(den, 1e-300)) ** 0.5


def restore_initial_state(onnx_path, model):
    """Exporting traces a copy in training mode, which moves its BN running statistics before
    they are written out: puts the model's own initial state back into the exported file."""
    exported = onnx.load(onnx_path)
    state = model.state_dict()
    for init in exported.graph.initializer:
        if init.name in state:
            init.CopyFrom(onnx.numpy_helper.from_array(state[init.name].detach().numpy(), init.name))
    onnx.save(exported, onnx_path)


def state_of(model):
    return {k: v.detach().double().cpu().numpy().copy() for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}


def train_torch(model, dtype, make_opt, x, y, batch, steps=None, counter=None, device="cpu",
                autocast=None):
    """Trains in place; returns the losses and the state after each step. `counter`, a
    one-element list, is set to each step's number (judge.force_kinks reads it); `autocast`, a
    16-bit dtype, runs the forward under torch.autocast(device)."""
    model.to(device)
    opt = make_opt(model.parameters())
    losses, states = [], []
    for s in range(steps or STEPS):
        if counter is not None:
            counter[0] = s
        xb = torch.from_numpy(x[s * batch:(s + 1) * batch]).to(device, dtype)
        yb = torch.from_numpy(y[s * batch:(s + 1) * batch]).to(device)
        opt.zero_grad()
        with torch.autocast(device, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = F.cross_entropy(logits_of(model(xb)), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        states.append(state_of(model))
    return losses, states


def run_hgpc(exe, work, steps, device="cpu"):
    saved = os.path.join(work, "trained%d_%s.onnx" % (steps, device))
    metrics = os.path.join(work, "metrics%d_%s.jsonl" % (steps, device))
    p = subprocess.run([exe, "--data", "npy:%s,%s" % (os.path.join(work, "x.npy"), os.path.join(work, "y.npy")),
                        "--shuffle", "off", "--steps", str(steps), "--device", device, "--save", saved,
                        "--metrics", metrics, "--progress", "none"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("the hgpc executable failed (%d): %s" % (p.returncode, p.stderr))
    losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip() and "eval" not in l]
    model = onnx.load(saved)
    onnx.checker.check_model(model)
    return losses, {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}


def make_data(n, shape, data_seed):
    """Gaussian images and uniform labels: numpy's default_rng(0), or with a data seed the
    legacy np.random.seed(seed) stream (randn, then randint)."""
    if data_seed is None:
        rng = np.random.default_rng(0)
        return (rng.standard_normal((n, *shape), dtype=np.float32),
                rng.integers(0, 10, size=(n,), dtype=np.int64))
    np.random.seed(data_seed)
    x = np.random.randn(n, *shape).astype(np.float32)
    return x, np.random.randint(0, 10, n).astype(np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--optimizer", required=True, choices=sorted(OPTIMIZERS))
    ap.add_argument("--batch", type=int, help="batch size (default: the model's)")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--data-seed", type=int, help="np.random.seed(N) data (default: default_rng(0))")
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", help="keep the work files in this folder")
    ap.add_argument("--find-kinks", action="store_true",
                    help="list the ReLU decisions hgpc's forward takes on the other side, per step")
    ap.add_argument("--verbose", action="store_true", help="list the worst tensors")
    args = ap.parse_args()
    hgpc = os.path.join(args.build, "bin", "hgpc")
    dump = os.path.join(args.build, "bin", "hgp_forward_dump")
    make, shape, batch = MODELS[args.model]
    batch = args.batch or batch
    steps = args.steps
    case = "%s %s b%d seed%s steps%d" % (args.model, args.optimizer, batch,
                                         "-" if args.data_seed is None else args.data_seed, steps)
    kinks = KINKS.get(case, [])
    torch.manual_seed(0)
    model = make()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    model.train()
    init = state_of(model)

    work = args.keep or tempfile.mkdtemp(prefix="hgpc-parity-")
    os.makedirs(work, exist_ok=True)
    if not args.keep:
        # Each run leaves up to 2 GB (models, data, trained copies): never keep them.
        atexit.register(shutil.rmtree, work, True)
    onnx_path = os.path.join(work, "model.onnx")
    torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=17, input_names=["input"])
    restore_initial_state(onnx_path, model)
    x, y = make_data(batch * steps, shape, args.data_seed)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)

    make_opt, flags = OPTIMIZERS[args.optimizer]
    exe = os.path.join(work, "train")
    p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch), *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("hgpc compile failed (%d): %s" % (p.returncode, p.stderr))
    # The state after the first step shows a wrong gradient before 3 steps mix it into others.
    # Not for Adam: its first step is lr x sign(g) element by element, so every gradient element
    # whose sign is rounding moves by a whole lr either way, in PyTorch float32 as in hgpc.
    first = [1] if "adam" not in args.optimizer else []
    hgpc_states = {s: run_hgpc(exe, work, s) for s in sorted({steps, *first})}
    hgpc_losses = hgpc_states[steps][0]

    def float64_run(kinks):
        exact = copy.deepcopy(model).double()
        counter = [0]
        judge.force_kinks(exact, kinks, counter)
        return train_torch(exact, torch.float64, make_opt, x, y, batch, steps, counter)

    def kinks_at(s, f32_states, f64_states):
        before = None
        if s > 0:
            mine = hgpc_states[s][1] if s in hgpc_states else run_hgpc(exe, work, s)[1]
            before = dict(hgpc=mine, float32=f32_states[s - 1], float64=f64_states[s - 1])
        return judge.find_kinks(onnx_path, model, before, x[s * batch:(s + 1) * batch], s, dump,
                                work)

    f32_losses, f32_states = train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y,
                                         batch, steps)
    if args.find_kinks:
        # Step by step: a kink forced in float64 moves float64's later steps.
        found = []
        for s in range(steps):
            f64_states = float64_run(found)[1]
            new = kinks_at(s, f32_states, f64_states)
            for k in new:
                print(k)
            found += new
        return

    f64_losses, f64_states = float64_run(kinks)
    # Each named kink must still be one: found again in this build's forward.
    failures = []
    for k in kinks:
        same = [f for f in kinks_at(k.step, f32_states, f64_states)
                if (f.module, f.call, f.index) == (k.module, k.call, k.index)]
        if not same:
            failures.append("%r is no longer a kink of this case: remove it from KINKS" % k)
        else:
            judge.check_kink(same[0])
            print("kink confirmed: %r" % same[0])

    names = sorted(init)
    report = dict(case=case, steps=steps, kinks=[repr(k) for k in kinks])
    for s in sorted(hgpc_states):
        rows = judge.judge_state(hgpc_states[s][1], f64_states[s - 1], f32_states[s - 1], init,
                                 names)
        failures += judge.failures(rows, [], "after %d step%s, " % (s, "s" * (s > 1)))
        report["after_%d" % s] = judge.summary(rows, [])
        if args.verbose:
            for r in rows[:15]:
                print("  step %d %-45s ratio %.3f  update off float64 %.2e, float32 %.2e"
                      % (s, r["tensor"], r["ratio"], r.get("update_rel_err", 0),
                         r.get("float32_drift", 0)))
    loss_rows = judge.judge_losses(hgpc_losses, f64_losses, f32_losses)
    failures += judge.failures([], loss_rows)
    report["loss_ratios"] = [round(r["ratio"], 3) for r in loss_rows]
    report["max_ratio"] = max([report["after_%d" % s]["max_update_ratio"] for s in hgpc_states] +
                              [judge.worst(loss_rows)])
    report["losses_hgpc"], report["losses_float64"] = hgpc_losses, f64_losses
    print(json.dumps(report))
    expected = EXPECTED_FAILURES.get(case)
    if expected and failures:
        print("expected failure (EXPECTED_FAILURES): %s\n  %s"
              % (expected, "\n  ".join(failures[:10])), file=sys.stderr)
        return
    if expected:
        sys.exit("%s meets every bound now: remove it from EXPECTED_FAILURES" % case)
    if failures:
        print("\n".join(failures[:20]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
