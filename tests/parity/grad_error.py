#!/usr/bin/python3
"""How far hgpc's CPU gradients are from float64, next to PyTorch float32's, per op family.

At one set of weights (the model's own, or hgpc's state after `--at-step` - 1 training steps of
parity.py's case), on that step's batch: hgpc's gradient of every parameter (one step of plain
SGD at 2^20, parity.hgpc_gradients), and PyTorch's in float32 and float64 from the same weights.
The kinks parity.py names for the case at that step are forced in float64 for hgpc's
comparison (PyTorch float32's is with float64 as it is). Each parameter's relative L2 error
against float64, for hgpc and for PyTorch float32, and the
elements whose sign differs from float64's, are summed up per family (convolution weights and
biases, BN scales and shifts, fully connected weights and biases): the median and the largest
ratio of hgpc's error to PyTorch's. A family whose hgpc error is many times PyTorch's has a
reduction that loses precision (a long float32 sum); a ReLU or max-pooling kink shows as a few
tensors upstream of it, not as a family.

    /usr/bin/python3 tests/parity/grad_error.py --model googlenet --build build
    /usr/bin/python3 tests/parity/grad_error.py --model squeezenet1_1 --optimizer sgd --at-step 3
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge  # noqa: E402
import kinks as kinklib  # noqa: E402
import parity  # noqa: E402


def family(name, shape, names):
    base = name.rsplit(".", 1)[0]
    if name.endswith(".weight") and len(shape) == 4:
        return "conv weight"
    if name.endswith(".bias") and len(names.get(base + ".weight", ())) == 4:
        return "conv bias"
    if base + ".running_mean" in names:
        return "bn " + name.rsplit(".", 1)[1]
    if len(shape) == 2 or (name.endswith(".bias") and len(names.get(base + ".weight", ())) == 2):
        return "fc " + name.rsplit(".", 1)[1]
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(parity.MODELS))
    ap.add_argument("--optimizer", default="sgd", choices=sorted(parity.OPTIMIZERS))
    ap.add_argument("--at-step", type=int, default=1, help="1-based: the step whose gradient")
    ap.add_argument("--build", default="build")
    ap.add_argument("--verbose", action="store_true", help="every tensor")
    args = ap.parse_args()
    hgpc = os.path.join(args.build, "bin", "hgpc")
    make, shape, batch = parity.MODELS[args.model]
    torch.manual_seed(0)
    model = make()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    work = tempfile.mkdtemp(prefix="hgpc-graderr-")
    try:
        onnx_path = os.path.join(work, "model.onnx")
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), onnx_path,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=17, input_names=["input"])
        parity.restore_initial_state(onnx_path, model)
        s = args.at_step - 1
        x, y = parity.make_data(batch * args.at_step, shape, None)
        init = parity.state_of(model)
        weights = init
        if s > 0:
            np.save(os.path.join(work, "x.npy"), x)
            np.save(os.path.join(work, "y.npy"), y)
            exe = os.path.join(work, "train")
            parity.compile_hgpc(hgpc, onnx_path, exe, batch, parity.OPTIMIZERS[args.optimizer][1])
            weights = parity.run_hgpc(exe, work, s)[1]
            m = onnx.load(onnx_path)
            for t in m.graph.initializer:
                if t.name in weights:
                    kinklib.set_initializer(t, weights[t.name])
            onnx.save(m, onnx_path)
        xs, ys = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
        np.save(os.path.join(work, "x.npy"), xs)
        np.save(os.path.join(work, "y.npy"), ys)
        g_h = parity.hgpc_gradients(hgpc, onnx_path, weights, batch, work)
        at = judge.with_weights(model, weights, torch.float32)
        g32 = parity.torch_gradients(at, torch.float32, xs, ys, batch)
        # The forward kinks parity.py names for this case at this step are forced in float64
        # (hgpc's side of a ReLU or a pooling window is not a reduction's error).
        case = "%s %s b%d seed- steps%d" % (args.model, args.optimizer, batch, parity.STEPS)
        named = [k for k in parity.KINKS.get(case, []) if k.step == s and k.kind != "grad-sign"]
        g64 = parity.torch_gradients(judge.with_weights(model, weights, torch.float64),
                                     torch.float64, xs, ys, batch, named,
                                     kinklib.decision_nodes(onnx_path), s)
        free = parity.torch_gradients(judge.with_weights(model, weights, torch.float64),
                                      torch.float64, xs, ys, batch) if named else g64
    finally:
        shutil.rmtree(work, True)
    shapes = {n: v.shape for n, v in init.items()}
    fams = {}
    for n in sorted(g64):
        ref = g64[n]
        norm = judge.l2(ref)
        if norm == 0:
            continue
        # PyTorch float32 took float64's own side of each kink: it is measured from `free`.
        eh, e32 = judge.l2(g_h[n] - ref) / norm, judge.l2(g32[n] - free[n]) / norm
        flips_h = int(np.sum(((g_h[n] > 0) != (ref > 0)) & (ref != 0)))
        flips_32 = int(np.sum(((g32[n] > 0) != (free[n] > 0)) & (free[n] != 0)))
        f = fams.setdefault(family(n, ref.shape, shapes), [])
        f.append((n, eh, e32, flips_h, flips_32))
        if args.verbose:
            print("%-45s hgpc %.2e  torch f32 %.2e  (%.1fx)  sign flips %d / %d"
                  % (n, eh, e32, eh / max(e32, 1e-300), flips_h, flips_32))
    report = {}
    for f, rows in sorted(fams.items()):
        ratios = [eh / max(e32, 1e-300) for _, eh, e32, _, _ in rows]
        worst = rows[int(np.argmax(ratios))]
        report[f] = dict(tensors=len(rows),
                         median_error_hgpc=float(np.median([r[1] for r in rows])),
                         median_error_torch32=float(np.median([r[2] for r in rows])),
                         median_ratio=round(float(np.median(ratios)), 2),
                         max_ratio=round(float(max(ratios)), 2), worst=worst[0],
                         sign_flips_hgpc=sum(r[3] for r in rows),
                         sign_flips_torch32=sum(r[4] for r in rows))
    print(json.dumps(dict(model=args.model, at_step=args.at_step, kinks_forced=len(named),
                          families=report), indent=1))


if __name__ == "__main__":
    main()
