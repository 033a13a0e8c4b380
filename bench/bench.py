#!/usr/bin/env python3
"""hgpc against PyTorch, side by side on the same GPU in the same run.

For each case it exports the model with this machine's torch (training mode), compiles it with
hgpc, times the generated executable's steady-state training step on synthetic data, and times
PyTorch's step the way ../shared/anchors/torch_train_bench.py does (eager, whole-step CUDA graph,
optionally torch.compile): forward, cross-entropy, backward, SGD(momentum 0.9, wd 5e-4), fp32
storage with TF32 on. It prints a table and writes results.json and results.md to --out.

    source .dev/env.sh && python3 bench/bench.py --out $OUT [--cases lenet5:64,resnet50:128]
        [--torch-modes eager,graph,compile] [--steps 160]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(__file__))
from models import CASES, make  # noqa: E402


def torch_step_ms(name, batch, mode, iters=30, reps=5):
    """PyTorch's median step time, as the anchor script measures it."""
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model, shape, ncls = make(name)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    lossf = nn.CrossEntropyLoss()
    x = torch.randn(batch, *shape, device="cuda")
    y = torch.randint(0, ncls, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=(mode == "eager"))
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = step
    if mode == "graph":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    elif mode == "compile":
        cm = torch.compile(model, mode="reduce-overhead")

        def run():
            opt.zero_grad(set_to_none=True)
            lossf(cm(x), y).backward()
            opt.step()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            run()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / iters)
    peak = torch.cuda.max_memory_allocated()
    del model, opt
    torch.cuda.empty_cache()
    return statistics.median(times), peak


def export(name, path):
    """Exports the model in training mode with this machine's torch; returns how."""
    model, shape, _ = make(name)
    model.train()
    x = torch.randn(2, *shape)
    kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
              input_names=["input"], output_names=["logits"],
              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    errors = []
    for opset, dynamo in ((18, False), (20, False), (18, True)):
        try:
            torch.onnx.export(model, x, path, opset_version=opset, dynamo=dynamo, **kw)
            return "opset %d%s" % (opset, " (dynamo)" if dynamo else "")
        except Exception as e:  # noqa: BLE001 - report every failed attempt
            errors.append("opset %d dynamo=%s: %s" % (opset, dynamo, repr(e)[:300]))
    raise RuntimeError("; ".join(errors))


def hgpc_case(hgpc, name, batch, work, steps):
    onnx_path = os.path.join(work, "%s.onnx" % name)
    if not os.path.exists(onnx_path):
        how = export(name, onnx_path)
    else:
        how = "cached"
    exe = os.path.join(work, "%s-b%d" % (name, batch))
    t0 = time.time()
    p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch),
                        "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9",
                        "--weight-decay", "5e-4", "--metrics-every", "16"],
                       capture_output=True, text=True)
    compile_s = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError("hgpc compile: " + p.stderr.strip()[-600:])
    metrics = exe + ".jsonl"
    p = subprocess.run([exe, "--data", "synthetic", "--steps", str(steps), "--device", "cuda",
                        "--metrics", metrics, "--progress", "none", "--verbose"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("run: " + p.stderr.strip()[-800:])
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    windows = []
    for r in rows:
        if "eval" in r:
            continue
        if not windows or windows[-1] != r["images_per_s"]:
            windows.append(r["images_per_s"])
    steady = windows[2:] or windows
    ms = statistics.median(batch / ips * 1000 for ips in steady)
    mem = None
    for line in p.stderr.splitlines():
        if line.startswith("cuda: device memory"):
            mem = float(line.split()[3]) * (1 << 20)
    return dict(ms=ms, compile_s=compile_s, export=how, peak_bytes=mem, log=p.stderr[-400:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--cases", default=",".join("%s:%d" % c for c in CASES))
    ap.add_argument("--torch-modes", default="eager,graph")
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="hgpc-bench-")
    os.makedirs(work, exist_ok=True)
    print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(),
          torch.cuda.get_device_name(0), flush=True)
    results = []
    for spec in args.cases.split(","):
        name, batch = spec.split(":")
        batch = int(batch)
        r = dict(model=name, batch=batch)
        try:
            r["hgpc"] = hgpc_case(args.hgpc, name, batch, work, args.steps)
        except Exception as e:  # noqa: BLE001
            r["hgpc_error"] = str(e)
        for mode in args.torch_modes.split(","):
            try:
                ms, peak = torch_step_ms(name, batch, mode)
                r["torch_" + mode] = dict(ms=ms, peak_bytes=peak)
            except Exception as e:  # noqa: BLE001
                r["torch_%s_error" % mode] = repr(e)[:300]
        torch_ms = [v["ms"] for k, v in r.items() if k.startswith("torch_") and isinstance(v, dict)]
        if "hgpc" in r and torch_ms:
            r["best_torch_ms"] = min(torch_ms)
            r["ratio"] = min(torch_ms) / r["hgpc"]["ms"]
        results.append(r)
        print(json.dumps(r), flush=True)
    json.dump(results, open(os.path.join(args.out, "bench.json"), "w"), indent=1)
    lines = ["| case | hgpc ms | hgpc img/s | " + " | ".join("torch %s ms" % m for m in args.torch_modes.split(","))
             + " | ratio to best torch | hgpc MiB | torch MiB | compile s |",
             "|---" * (7 + len(args.torch_modes.split(","))) + "|"]
    for r in results:
        h = r.get("hgpc")
        cells = ["%s b%d" % (r["model"], r["batch"]),
                 "%.3f" % h["ms"] if h else "error", "%.0f" % (r["batch"] / h["ms"] * 1000) if h else ""]
        for m in args.torch_modes.split(","):
            t = r.get("torch_" + m)
            cells.append("%.3f" % t["ms"] if t else "error")
        cells.append("%.2f" % r["ratio"] if "ratio" in r else "")
        cells.append("%.0f" % (h["peak_bytes"] / 2**20) if h and h.get("peak_bytes") else "")
        tm = [r[k]["peak_bytes"] for k in r if k.startswith("torch_") and isinstance(r[k], dict)]
        cells.append("%.0f" % (max(tm) / 2**20) if tm else "")
        cells.append("%.1f" % h["compile_s"] if h else "")
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    open(os.path.join(args.out, "bench.md"), "w").write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
