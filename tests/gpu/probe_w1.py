#!/usr/bin/env python3
"""Issue 20's open ResNet-18 CUDA case, one question: do the weights a CUDA run saves after one
step give the same forward as the CPU backend's? Exports the zoo case (parity.py's resnet18,
batch 4, SGD), trains one step on CUDA and one on the CPU backend, and prints (1) the tensors
whose saved values differ most between the two, (2) for the second batch, hgpc's forward (on the
CPU backend, hgp_forward_dump) with the CUDA weights, with the CPU weights and with PyTorch
float64's, against PyTorch float64's forward, ReLU input by ReLU input. A diagnostic for the
GPU machine; it asserts nothing.

    python3 tests/gpu/probe_w1.py --build .gpu/.dev [--model resnet18]
"""
import argparse
import copy
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
import judge  # noqa: E402
import kinks as kinklib  # noqa: E402
import parity  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the script")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    make, shape, batch = parity.MODELS[args.model]
    torch.manual_seed(0)
    model = make().train()
    init = parity.state_of(model)
    work = tempfile.mkdtemp(prefix="probe-")
    path = os.path.join(work, "model.onnx")
    kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
              opset_version=17, input_names=["input"])
    try:
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), path, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(copy.deepcopy(model), torch.zeros(batch, *shape), path, **kw)
    parity.restore_initial_state(path, model)
    s = args.steps
    x, y = parity.make_data(batch * (s + 1), shape, None)
    np.save(os.path.join(work, "x.npy"), x[:batch * s])
    np.save(os.path.join(work, "y.npy"), y[:batch * s])
    make_opt, flags = parity.OPTIMIZERS["sgd"]
    exe = os.path.join(work, "t")
    parity.compile_hgpc(os.path.join(args.build, "bin", "hgpc"), path, exe, batch, flags, "cuda")
    l64, s64 = parity.train_torch(copy.deepcopy(model).double(), torch.float64, make_opt, x, y,
                                  batch, s)
    w64 = s64[s - 1]

    def worst_update(state):
        errs = [(np.linalg.norm((state[n] - init[n]) - (w64[n] - init[n])) /
                 max(np.linalg.norm(w64[n] - init[n]), 1e-30), n) for n in init if n in state]
        return max(errs)
    # Which conditions make the CUDA run's first step wrong: a dataset of exactly the steps'
    # batches or a longer one, a cold tuning cache (every convolution timed in this run) or a
    # warm one, graphs or --eager.
    x3 = np.concatenate([x[:batch * s]] * 3)
    y3 = np.concatenate([y[:batch * s]] * 3)
    for label, data, cache, extra in (("exact data, cold cache", (x[:batch * s], y[:batch * s]), "a", []),
                                      ("exact data, warm cache", None, "a", []),
                                      ("3x data, cold cache", (x3, y3), "b", []),
                                      ("3x data, warm cache", None, "b", []),
                                      ("exact data, cold cache, --eager", (x[:batch * s], y[:batch * s]), "c", ["--eager"]),
                                      ("exact data, cold cache, --deterministic", None, "d", ["--deterministic"])):
        if data is not None:
            np.save(os.path.join(work, "x.npy"), data[0])
            np.save(os.path.join(work, "y.npy"), data[1])
        losses, st = parity.run_hgpc(exe, work, s, args.device, tag="_" + cache, extra=extra,
                                     env={"HGPC_TUNING_CACHE": os.path.join(work, "tune_" + cache)})
        err, name = worst_update(st)
        print("%-42s loss %.8f (float64 %.8f), worst update off float64 %.3e (%s)"
              % (label, losses[0], l64[0], err, name), flush=True)
    np.save(os.path.join(work, "x.npy"), x[:batch * s])
    np.save(os.path.join(work, "y.npy"), y[:batch * s])
    # Every tensor of the step on CUDA against the CPU backend (tests/parity/step_diff.py).
    sd = os.path.join(work, "sd")
    parity.compile_hgpc(os.path.join(args.build, "bin", "hgpc"), path, sd, batch,
                        flags + ["--no-buffer-reuse"], "cuda")
    _, out = parity.dump_and_diff(sd, work, s, (args.device, "cpu"), ["--all"])
    lines = out.splitlines()
    print("the step's first 40 results more than 1e-6 apart (CUDA against the CPU backend):")
    shown = 0
    for l in lines[2:]:
        f = l.split()
        if len(f) >= 7 and f[0].isdigit() and float(f[-3]) > 1e-6 and shown < 40:
            print(l)
            shown += 1
    print("\n".join(lines[-30:]))
    w = {"cuda": parity.run_hgpc(exe, work, s, args.device, tag="_a",
                                 env={"HGPC_TUNING_CACHE": os.path.join(work, "tune_e")})[1],
         "cpu": parity.run_hgpc(exe, work, s, "cpu")[1]}
    print("initializers saved: cuda %d, cpu %d, torch state %d; only in torch: %s; only in hgpc: %s"
          % (len(w["cuda"]), len(w["cpu"]), len(init), sorted(set(init) - set(w["cuda"]))[:6],
             sorted(set(w["cuda"]) - set(init))[:6]))
    rows = []
    for n in sorted(w["cuda"]):
        a, b = w["cuda"][n], w["cpu"][n]
        ref = w64.get(n)
        upd = (np.linalg.norm((a - init[n]) - (ref - init[n])) /
               max(np.linalg.norm(ref - init[n]), 1e-30)) if ref is not None and n in init else -1
        rows.append((float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30)), n, a.shape, upd))
    rows.sort(reverse=True)
    print("saved tensors, CUDA against the CPU backend (max|diff| / max|cpu|; update's rel. L2 off float64):")
    for r in rows[:12]:
        print("  %.3e  %-40s %-20s update off f64 %.3e" % (r[0], r[1], list(r[2]), r[3]))
    dump = os.path.join(args.build, "bin", "hgp_forward_dump")
    xb = x[batch * s:batch * (s + 1)]
    nodes = kinklib.decision_nodes(path)
    ref = kinklib.decision_inputs(judge.with_weights(model, w64, torch.float64).train(),
                                  torch.from_numpy(xb).double())
    probes = {k: kinklib.hgpc_decision_inputs(path, v, xb, dump, work, "cpu")
              for k, v in (("cuda W", w["cuda"]), ("cpu W", w["cpu"]), ("f64 W", w64))}
    probes["cuda W, cuda fwd"] = kinklib.hgpc_decision_inputs(path, w["cuda"], xb, dump, work,
                                                                   args.device)
    print("forward at step %d, max|hgpc - float64| per decision node (largest |float64|):" % (s + 1))
    print("  %-45s %10s %s" % ("node", "max|f64|", "  ".join("%16s" % k for k in probes)))
    for i, (kind, name, _) in enumerate(nodes):
        e = ref[i][1].reshape(-1)
        print("  %-45s %10.3e %s" % (name[-45:], np.abs(e).max(), "  ".join(
            "%16.3e" % np.abs(probes[k][i] - e).max() for k in probes)))


if __name__ == "__main__":
    main()
