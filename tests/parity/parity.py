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
import op_nets  # noqa: E402
import kinks as kinklib  # noqa: E402

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
    # The rest of torchvision's classification CNN families (issue 23's sweep, tests/parity/
    # sweep.py), at small sizes. ResNeXt and Wide-ResNet keep their bottleneck's grouped or
    # doubled width but one block per stage; RegNet, MNASNet, ShuffleNet-v2 and MobileNet-v3 are
    # the smallest of each family; EfficientNet-V2-S with stochastic depth off, as B0.
    "resnext_reduced": (lambda: resnet_reduced(groups=32, width_per_group=4), (3, 64, 64), 4),
    "wide_resnet_reduced": (lambda: resnet_reduced(width_per_group=128), (3, 64, 64), 4),
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(num_classes=10), (3, 64, 64), 4),
    "mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(num_classes=10), (3, 64, 64), 4),
    "mnasnet0_5": (lambda: tvm.mnasnet0_5(num_classes=10), (3, 64, 64), 4),
    "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(num_classes=10), (3, 64, 64), 4),
    "regnet_x_400mf": (lambda: tvm.regnet_x_400mf(num_classes=10), (3, 64, 64), 4),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(num_classes=10), (3, 64, 64), 4),
    "efficientnet_v2_s": (lambda: tvm.efficientnet_v2_s(num_classes=10, stochastic_depth_prob=0.0), (3, 64, 64), 4),
    # Issue 23's selection ops in a trainable graph (SelectNet below): torch.where on a
    # comparison, torch.maximum and torch.minimum (one operand broadcast from a parameter) and
    # amax, which export as Greater, Where, Max, Min and ReduceMax.
    "select_net": (lambda: op_nets.SelectNet(), (3, 16, 16), 4),
    # A Gather of computed data by constant indices (GatherNet): a permutation, a slice of step 2
    # and one channel, the forms of torch's dynamo as_strided, which hgpc imports as views.
    "gather_net": (lambda: op_nets.GatherNet(), (3, 8, 8), 4),
}


def resnet_reduced(**kw):
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10, **kw)


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

# Kinks the cases cross, named element by element (kinks.Kink: kind, ONNX node or parameter,
# element, step, the value in hgpc's run, PyTorch float32's and float64's, the tensor's error).
# Keyed by the case's command line.
Kink = kinklib.Kink
KINKS = {
    # ResNet-18, batch 8, plain SGD, np.random.seed(1): the sum at the end of layer4.0 (its
    # second ReLU call) for sample 0, channel 186 is +3.83e-6 in float64; PyTorch float32 rounds
    # it to +5.8e-7 and hgpc to -1.7e-6, both well within that tensor's forward error (1.9e-5
    # from float64 in either). With hgpc's side forced in float64 every tensor is within 0.25
    # of its allowance; without it, layer4.0 and everything before it is ~1% off (issue 20).
    "resnet18 sgd-plain b8 seed1 steps1": [
        Kink("relu", "/layer4/layer4.0/relu_1/Relu", (0, 186, 0, 0), 0, -1.7285e-06, 5.8115e-07,
             3.83e-06, 1.87e-05)],
    # GoogLeNet, SGD: at the first step one max-pooling window, inception3b's branch-4 pool for
    # sample 3, channel 79 (two output positions share it): elements 35 and 45 of the 8x8 plane
    # are 4.5e-8 apart in float64, hgpc's picks 35 (by 2.0e-6; PyTorch float32 45, by 2.4e-6),
    # within the tensor's error of 1.6e-5. Forced, the first step is within 0.24 of its
    # allowance (1.34x without). At the second step the runs are 2e-4 to 1e-3 apart in every
    # forward tensor (PyTorch float32 as much as hgpc: batch 4, BN over 2x2 maps at the top),
    # and 71 ReLU and 58 pooling decisions lie within that; the file names them all.
    "googlenet sgd b4 seed- steps3": "kinkdata/googlenet_sgd.json",
    # GoogLeNet, AdamW: the same pooling window and 85 first-step gradient signs (38 in
    # convolution weights, 47 in BN shifts whose float64 gradient is below 2e-15, zero but
    # for rounding).
    "googlenet adamw b4 seed- steps3": "kinkdata/googlenet_adamw.json",
    # Inception-v3, SGD: nine ReLU inputs at the first step, in Mixed_6d to Mixed_7c (the
    # largest |value| 1.4e-4 in float64, each within its tensor's error of 1.2e-4 to 6.4e-4);
    # without them Mixed_7c.branch3x3dbl's tensors were up to 66x the allowance after 1 step.
    "inception_v3 sgd b4 seed- steps3": "kinkdata/inception_v3_sgd.json",
    # Wide-ResNet (Bottleneck [1,1,1,1], width 128 per group), SGD: after one step every tensor
    # of layer3.0 and below was ~0.9% off float64 (86x the allowance; issue 20's sweep). One ReLU
    # at the first step: the input of layer3.0's last ReLU for sample 2, channel 600 (a 1x1 map:
    # BN over 4 values) is -4.50e-6 in float64 and -1.48e-6 in PyTorch float32, +2.24e-6 in
    # hgpc, within the tensor's error of 1.8e-5. At step 2 one more (layer2.0's first ReLU,
    # -1.76e-6 in float64, +9.0e-7 in hgpc) and at step 3 two ReLUs and one stem max-pooling
    # window. Forced, every tensor is within 0.24 of its allowance.
    "wide_resnet_reduced sgd b4 seed- steps3": "kinkdata/wide_resnet_reduced_sgd.json",
    # RegNet-X-400MF, SGD: two ReLUs at the first step, at block4's 2x2 maps (block4-8's output
    # for sample 2, channel 182: +2.06e-5 in float64, -6.62e-5 in hgpc, error 5.9e-4; block4-9's
    # first ReLU, sample 2, channel 65). Its later steps are chaotic (EXPECTED_FAILURES).
    "regnet_x_400mf sgd b4 seed- steps3": "kinkdata/regnet_x_400mf_sgd.json",
    "squeezenet1_1 sgd b4 seed- steps3": [
        Kink("relu", "/features/features.11/expand3x3_activation/Relu", (0, 92, 2, 2), 2,
             5.878e-07, -8.941e-07, -1.262e-06, 3.5e-06)],
    # EfficientNet-B0, AdamW: Adam's first step is lr x sign(g), and these gradient elements of
    # convolution weights are within the tensor's gradient error of zero, hgpc's sign the other
    # (the 455 BN shifts of the blocks' projections whose signs also differ have a gradient of
    # exactly 0 in float64, 1e-16, since the next BN removes a per-channel constant: every
    # element is rounding in PyTorch float32 as in hgpc, and its drift allows for them).
    "efficientnet_b0 adamw b4 seed- steps3": [
        Kink("grad-sign", "features.5.1.block.3.0.weight", (31, 330, 0, 0), 0, -1.788e-07,
             5.588e-08, 9.413e-08, 5.3e-06),
        Kink("grad-sign", "features.6.0.block.1.0.weight", (468, 0, 2, 3), 0, 1.171e-05,
             -1.399e-04, -1.814e-05, 2.9e-04),
        Kink("grad-sign", "features.6.1.block.3.0.weight", (131, 222, 0, 0), 0, -1.751e-07,
             3.427e-07, 5.490e-07, 3.0e-06),
        Kink("grad-sign", "features.8.0.weight", (1265, 290, 0, 0), 0, 4.414e-07, -6.761e-07,
             -2.088e-07, 4.7e-06)],
}
# Cases that miss the method today, each with what was measured (CPU, issue 20). A case listed
# here prints its failures and exits 0 (it must still run to the end: a crash fails); once it
# meets every bound it fails, so that it leaves this list. Empty since issue 20's kinks: the
# last five (GoogLeNet SGD and AdamW, Inception-v3 SGD, SqueezeNet SGD, EfficientNet-B0 AdamW)
# pass with their kinks named in KINKS.
EXPECTED_FAILURES = {
    # RegNet-X-400MF at 64x64, batch 4, SGD (issue 20's sweep, 3.58x before its kinks were
    # named): the first step passes with its two ReLU kinks (block4-8 and block4-9 at 2x2 maps)
    # forced, within 0.25 of the allowance. From the second step on the case is chaotic: PyTorch
    # float32's own ReLU inputs are 1.1 from float64's (values up to 4.1, block3-5) and the loss
    # climbs 2.72 -> 7.8 -> 12.8 in float64. There, loss 2 is 7.534 in hgpc against 7.816 in
    # float64 with the kinks forced, while PyTorch float32 is 7.849 against its float64's 7.876:
    # 2.7x the allowance (hgpc's forward at step 2 is 0.62 from its reference, PyTorch's 1.1 from
    # its own). Not a discrete decision that can be named, and not shown to be a bug: at 128x128
    # the same model, equally chaotic from step 2, is within 0.36 of every allowance.
    "regnet_x_400mf sgd b4 seed- steps3": "chaotic from step 2 (PyTorch float32's forward 1.1 "
                                          "from float64's); loss 2 at 2.7x",
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
    one-element list, is set to each step's number (kinks.forced reads it); `autocast`, a
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


def run_hgpc(exe, work, steps, device="cpu", tag="", extra=(), env=None, deterministic=True):
    """Trains `steps` steps with the executable; (losses, state after). On CUDA the run is
    --deterministic: kinks found in one run must be the next run's too, and cuDNN's fastest
    weight-gradient algorithms add in an order that changes from run to run (on the H200 a
    ResNet-18 kink found at step 3 was gone when the same case was judged)."""
    if device == "cuda" and deterministic and "--deterministic" not in extra:
        extra = ("--deterministic", *extra)
    saved = os.path.join(work, "trained%d_%s%s.onnx" % (steps, device, tag))
    metrics = os.path.join(work, "metrics%d_%s%s.jsonl" % (steps, device, tag))
    p = subprocess.run([exe, "--data", "npy:%s,%s" % (os.path.join(work, "x.npy"), os.path.join(work, "y.npy")),
                        "--shuffle", "off", "--steps", str(steps), "--device", device, "--save", saved,
                        "--metrics", metrics, "--progress", "none", *extra], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        sys.exit("the hgpc executable failed (%d): %s" % (p.returncode, p.stderr))
    losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip() and "eval" not in l]
    model = onnx.load(saved)
    onnx.checker.check_model(model)
    return losses, {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}


def dump_and_diff(exe, work, steps, devices, diff_args=()):
    """Trains `steps` steps on each of `devices` (two) with every tensor dumped after the last
    (--dump-tensors; compile `exe` with --no-buffer-reuse) and compares the first run's dump
    against the second's with tests/parity/step_diff.py: (its exit code, its output)."""
    dumps = []
    for dev in devices:
        d = os.path.join(work, "dump_%d_%s" % (len(dumps), dev))
        os.makedirs(d, exist_ok=True)
        run_hgpc(exe, work, steps, dev, tag="_sd%d" % len(dumps), extra=["--dump-tensors", d])
        dumps.append(d)
    p = subprocess.run([sys.executable, os.path.join(HERE, "step_diff.py"), *dumps, *diff_args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def compile_hgpc(hgpc, onnx_path, exe, batch, flags, device="cpu"):
    """Compiles the case. For CUDA, with --precision fp32 unless `flags` name one: hgpc's default
    is tf32, which on CUDA rounds convolution and GEMM inputs to 10 bits (3e-4 of a ResNet-18
    loss on the H200), and a CUDA parity run without the flag judged TF32 against float64. The
    CPU backend computes in float32 either way, but the precision moves the cost model's
    predictions and so the schedule (which steps are batch-sliced, in what order sums add):
    the CPU cases' named kinks were found with the default, which they keep."""
    if device == "cuda" and "--precision" not in flags:
        flags = ["--precision", "fp32", *flags]
    p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch), *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("hgpc compile failed (%d): %s" % (p.returncode, p.stderr))


# hgpc's gradient is read from one step of plain SGD at this rate: w1 = w0 - 2^20 g, so
# (w0 - w1) / 2^20 is g to float32's precision (the rate is a power of two).
GRAD_LR = 2.0 ** 20


def hgpc_gradients(hgpc, onnx_path, init, batch, work, device="cpu"):
    """hgpc's gradient of every parameter at the first step (name -> float64 array)."""
    exe = os.path.join(work, "train_grad")
    compile_hgpc(hgpc, onnx_path, exe, batch, ["--optimizer", "sgd", "--lr", str(GRAD_LR),
                                               "--momentum", "0", "--weight-decay", "0"], device)
    state = run_hgpc(exe, work, 1, device, tag="_grad")[1]
    return {n: (init[n] - state[n]) / GRAD_LR for n in state if n in init}


def torch_gradients(model, dtype, x, y, batch, named=(), nodes=(), step=0):
    """PyTorch's gradient of every parameter on the first `batch` samples of x, y, in `dtype`,
    with the named forward kinks of `step` forced (name -> float64 array; zeros where no
    gradient reaches)."""
    m = copy.deepcopy(model).to(dtype).train()
    with kinklib.forced(m, [k for k in named if k.kind != "grad-sign"], [step], nodes):
        loss = F.cross_entropy(logits_of(m(torch.from_numpy(x[:batch]).to(dtype))),
                               torch.from_numpy(y[:batch]))
        loss.backward()
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).double().numpy().copy()
            for n, p in m.named_parameters()}


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
    ap.add_argument("--dump-device", choices=["cpu", "cuda"],
                    help="with --find-kinks: where hgpc's forward is dumped (default: --device); "
                         "cpu with --device cuda tells a CUDA forward that is off from CUDA "
                         "weights that are")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where hgpc trains (and its forward is dumped for --find-kinks); "
                    "PyTorch's runs stay on the CPU")
    ap.add_argument("--find-kinks", type=int, nargs="?", const=0, metavar="STEPS",
                    help="list the decisions hgpc takes on the other side, per step (of the "
                    "first STEPS steps; default all)")
    ap.add_argument("--kinks", metavar="FILE", help="the case's kinks from this JSON file "
                    "(--save-kinks), not from KINKS")
    ap.add_argument("--save-kinks", metavar="FILE",
                    help="with --find-kinks: write the kinks found as JSON (KINKS can name it)")
    ap.add_argument("--verbose", action="store_true", help="list the worst tensors")
    args = ap.parse_args()
    hgpc = os.path.join(args.build, "bin", "hgpc")
    dump = os.path.join(args.build, "bin", "hgp_forward_dump")
    make, shape, batch = MODELS[args.model]
    batch = args.batch or batch
    steps = args.steps
    case = "%s %s b%d seed%s steps%d" % (args.model, args.optimizer, batch,
                                         "-" if args.data_seed is None else args.data_seed, steps)
    kinks = args.kinks or KINKS.get(case, [])
    if isinstance(kinks, str):
        kinks = kinklib.load(os.path.join(HERE, kinks))
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
    kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
              opset_version=17, input_names=["input"])
    try:  # newer PyTorch (the GPU machine's) exports with dynamo unless told not to
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path,
                          dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path, **kw)
    restore_initial_state(onnx_path, model)
    x, y = make_data(batch * steps, shape, args.data_seed)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)

    make_opt, flags = OPTIMIZERS[args.optimizer]
    exe = os.path.join(work, "train")
    compile_hgpc(hgpc, onnx_path, exe, batch, flags, args.device)
    # The state after the first step shows a wrong gradient before 3 steps mix it into others.
    # Not for Adam: its first step is lr x sign(g) element by element, so every gradient element
    # whose sign is rounding moves by a whole lr either way, in PyTorch float32 as in hgpc.
    first = [1] if "adam" not in args.optimizer else []
    hgpc_states = {s: run_hgpc(exe, work, s, args.device) for s in sorted({steps, *first})}
    hgpc_losses = hgpc_states[steps][0]
    nodes = kinklib.decision_nodes(onnx_path)

    def float64_run(named):
        exact = copy.deepcopy(model).double()
        counter = [0]
        with kinklib.forced(exact, named, counter, nodes):
            return train_torch(exact, torch.float64, make_opt, x, y, batch, steps, counter)

    def kinks_at(s, f32_states, f64_states, free_states, named, rejected=None):
        before = None
        if s > 0:
            mine = (hgpc_states[s][1] if s in hgpc_states else
                    run_hgpc(exe, work, s, args.device)[1])
            before = dict(hgpc=mine, float32=f32_states[s - 1], float64=f64_states[s - 1],
                          free64=free_states[s - 1])
        found = kinklib.find_kinks(onnx_path, model, before, x[s * batch:(s + 1) * batch], s,
                                   dump, work, named, rejected, args.dump_device or args.device)
        if s == 0 and "adam" in args.optimizer:
            # Adam's first step: the gradient's signs, with the forward's kinks forced.
            g_h = hgpc_gradients(hgpc, onnx_path, init, batch, work, args.device)
            g32 = torch_gradients(model, torch.float32, x, y, batch)
            g64 = torch_gradients(model, torch.float64, x, y, batch, named + found, nodes)
            free = torch_gradients(model, torch.float64, x, y, batch)
            grads = kinklib.find_grad_kinks(g_h, g32, g64, free, 0)
            found += [k for k in grads if kinklib.is_kink(k)]
            if rejected is not None:
                rejected += [k for k in grads if not kinklib.is_kink(k)]
        return found

    f32_losses, f32_states = train_torch(copy.deepcopy(model), torch.float32, make_opt, x, y,
                                         batch, steps)
    # PyTorch float32's reference: float64 with no kink forced (judge.update_ratio says why).
    free_losses, free_states = float64_run([])
    def search(n_steps):
        """The kinks of the first n_steps steps, step by step (a kink forced in float64 moves
        float64's later steps), printed as found."""
        found = []
        for s in range(n_steps):
            f64_states = float64_run(found)[1] if found else free_states
            rejected = []
            try:
                new = kinks_at(s, f32_states, f64_states, free_states, found, rejected)
            except kinklib.Chaotic as e:
                print("step %d: chaotic, no kinks searched from here on: %s" % (s + 1, e))
                break
            print("step %d: %d kinks, %d flips beyond the error" % (s + 1, len(new), len(rejected)))
            # One line per kink, but per tensor for a tensor with many: the BN shifts of
            # EfficientNet's projections have a gradient of exactly 0 (the next BN removes a
            # per-channel constant), so every element's sign is rounding, in PyTorch float32's
            # run as in hgpc's, and PyTorch's own drift already allows for them.
            per = {}
            for k in new:
                per.setdefault((k.kind, k.node), []).append(k)
            for (kind, node), ks in per.items():
                if len(ks) > 8:
                    print("%d %s kinks in %s (largest |float64| %.1e, error %.1e)"
                          % (len(ks), kind, node, max(abs(k.float64) for k in ks),
                             max(k.bound for k in ks)))
                else:
                    for k in ks:
                        print(k)
            for k in rejected[:10]:
                print("not rounding (beyond the error): %r" % k)
            found += new
        return found

    if args.find_kinks is not None:
        found = search(args.find_kinks or steps)
        if args.save_kinks:
            kinklib.save(found, args.save_kinks)
        return

    def judged(kinks):
        """(failures, report) of hgpc's run against float64 with `kinks` forced."""
        f64_losses, f64_states = float64_run(kinks) if kinks else (free_losses, free_states)
        # Each named kink must still be one: found again in this build's run.
        failures = []
        for s in sorted({k.step for k in kinks}):
            again = {f.key(): f for f in kinks_at(s, f32_states, f64_states, free_states,
                                                  [k for k in kinks if k.step != s])}
            for k in kinks:
                if k.step != s:
                    continue
                if k.key() not in again:
                    failures.append("%r is no longer a kink of this case: remove it from KINKS" % k)
                else:
                    kinklib.check_kink(again[k.key()])
                    print("kink confirmed: %r" % again[k.key()])
        names = sorted(init)
        report = dict(case=case, steps=steps, kinks=len(kinks),
                      first_kinks=[repr(k) for k in kinks[:3]])
        for s in sorted(hgpc_states):
            rows = judge.judge_state(hgpc_states[s][1], f64_states[s - 1], f32_states[s - 1],
                                     init, names, free64=free_states[s - 1])
            failures += judge.failures(rows, [], "after %d step%s, " % (s, "s" * (s > 1)))
            report["after_%d" % s] = judge.summary(rows, [])
            if args.verbose:
                for r in rows[:15]:
                    print("  step %d %-45s ratio %.3f  update off float64 %.2e, float32 %.2e"
                          % (s, r["tensor"], r["ratio"], r.get("update_rel_err", 0),
                             r.get("float32_drift", 0)))
        loss_rows = judge.judge_losses(hgpc_losses, f64_losses, f32_losses, free64=free_losses)
        failures += judge.failures([], loss_rows)
        report["loss_ratios"] = [round(r["ratio"], 3) for r in loss_rows]
        report["max_ratio"] = max([report["after_%d" % s]["max_update_ratio"]
                                   for s in hgpc_states] + [judge.worst(loss_rows)])
        report["losses_hgpc"], report["losses_float64"] = hgpc_losses, f64_losses
        report["losses_float32"], report["losses_free64"] = f32_losses, free_losses
        return failures, report

    failures, report = judged(kinks)
    if failures and args.kinks is None:
        # Which decisions rounding tips depends on the machine: the CPU's vector width changes
        # both PyTorch's and hgpc's float32 sums (the stored lists were found on another
        # machine; this AVX2 EPYC tips others). A case that misses with its stored list is judged
        # again with the kinks of this machine's run, each proven a kink as above.
        print("missed with the %d stored kinks (%s); judging with this machine's kinks"
              % (len(kinks), failures[0][:160]))
        found = search(steps)
        failures, report = judged(found)
        report["kinks_found_here"] = True
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
