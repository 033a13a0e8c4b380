#!/usr/bin/env python3
"""Data-parallel scaling on one machine: hgpc on 1 and 2 GPUs against PyTorch DDP, and how much
of hgpc's gradient all-reduce the schedule leaves exposed (docs/distributed.md, "Scaling
benchmark").

    source .gpu/.dev/env.sh && python3 bench/scaling.py --out $OUT [--hgpc hgpc]
        [--cases resnet50:128,resnet18_cifar:128] [--precision tf32[,bf16]] [--gpus 2]
        [--torch-modes eager,graph] [--steps 160] [--time-limit 230] [--json FILE]

Per case (model of bench/models.py : per-GPU batch) and precision:

 1. hgpc: the model exported as bench/bench.py does, compiled twice with the benchmark's
    training options (SGD lr 0.01, momentum 0.9, weight decay 5e-4, --precision P): without
    --ranks for one GPU and with --ranks N for N GPUs (`EXE --gpus N`). Both run --steps steps on
    synthetic data with --metrics. Rank 0 alone writes the metrics, and its images_per_s counts
    every rank's images (Trainer::report: steps x batch x ranks / seconds), so it is the global
    throughput; the median over the 16-step windows after the first two is reported.
    scaling = images/s on N GPUs / (N x images/s on 1 GPU).
 2. PyTorch DDP (bench/ddp_worker.py under torch.distributed.run, NCCL), the same model and
    per-GPU batch, eager and whole-step CUDA graph; the best mode's global images/s per GPU
    count, and hgpc / best torch.
 3. Overlap: the N-GPU executable once more for a few steps with --trace (each rank writes its
    own file, BASE.rankR.json). From each trace (one replayed step) the exposed
    communication: the time during which an all-reduce (NCCL) kernel runs and no compute kernel
    runs on any stream. Next to it, the cost model's all-reduce and exposed times from
    `hgpc plan --ranks N --target h200`.

Writes --out/scaling.md (tables) and --json (default --out/scaling.json), both rewritten after
every case, so that a case that fails or a run that is stopped keeps the finished rows. Needs no
GPU for `--self-test` (the trace and plan parsers on synthetic input) and `--plan-only` (the
`hgpc plan` predictions against a real build).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TRAIN_OPTS = ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--weight-decay", "5e-4"]
DEFAULT_CASES = "resnet50:128,resnet18_cifar:128"


# ---------------------------------------------------------------------------------------------
# Parsers (no GPU, no torch)

def merge(intervals):
    """The union of [start, end) intervals as sorted disjoint intervals."""
    out = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(intervals):
    return sum(b - a for a, b in intervals)


def subtract(xs, ys):
    """Disjoint sorted intervals xs minus the union ys (both as merge() returns them)."""
    out, j = [], 0
    for a, b in xs:
        cur = a
        while j < len(ys) and ys[j][1] <= cur:
            j += 1
        k = j
        while k < len(ys) and ys[k][0] < b:
            if ys[k][0] > cur:
                out.append([cur, ys[k][0]])
            cur = max(cur, ys[k][1])
            k += 1
        if cur < b:
            out.append([cur, b])
    return out


def is_comm(event):
    """An all-reduce slice: the plan's AllReduce step, or any NCCL kernel (also unmapped ones)."""
    kernel = str(event.get("args", {}).get("kernel", ""))
    return (event.get("name", "").startswith("AllReduce") or "nccl" in kernel.lower()
            or "nccl" in event.get("name", "").lower())


def trace_overlap(trace):
    """Exposed communication in one Chrome trace of `EXE --trace` (one replayed step).

    Compute = kernel slices that are not all-reduces; copies and memsets (cat "memory") are
    neither. Returns times in ms: span (first start to last end of any slice), comm (the union
    of all-reduce kernels), comm_sum (their summed durations), exposed (comm while no compute
    kernel runs on any stream), and the counts."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    xs = [e for e in events if e.get("ph") == "X"]
    comm = [e for e in xs if is_comm(e)]
    compute = [e for e in xs if e.get("cat") == "kernel" and not is_comm(e)]
    iv = lambda es: merge([[float(e["ts"]), float(e["ts"]) + float(e["dur"])] for e in es])  # noqa: E731
    cu, ku = iv(comm), iv(compute)
    exposed = subtract(cu, ku)
    start = min((float(e["ts"]) for e in xs), default=0.0)
    end = max((float(e["ts"]) + float(e["dur"]) for e in xs), default=0.0)
    streams = sorted({e.get("tid") for e in comm})
    proc = next((e["args"]["name"] for e in events if e.get("ph") == "M"
                 and e.get("name") == "process_name"), "")
    return dict(span_ms=(end - start) / 1e3, comm_ms=length(cu) / 1e3,
                comm_sum_ms=sum(float(e["dur"]) for e in comm) / 1e3,
                exposed_ms=length(exposed) / 1e3, compute_ms=length(ku) / 1e3,
                comm_kernels=len(comm), compute_kernels=len(compute), comm_streams=streams,
                process=proc)


PLAN_COMM = re.compile(r"^communication (\d+) all-reduces, ([\d.]+) MB over (\d+) ranks "
                       r"\(([\d.]+) GB/s links\): all-reduce ([\d.]+) ms, exposed ([\d.]+) ms", re.M)
PLAN_BUCKET = re.compile(r"^  (bucket \d+|'[^']*'): step (\d+) \(stream (-?\d+)\) after step (-?\d+), "
                         r"(\d+) tensors, ([\d.]+) MB, ([\d.]+) ms", re.M)
PLAN_ITER = re.compile(r"^predicted iteration ([\d.]+) ms on one stream; ([\d.]+) ms scheduled", re.M)


def parse_plan(text):
    """The cost model's data-parallel predictions from `hgpc plan --ranks N` (PlanReport.cpp's
    printCommunication): totals, one entry per bucket, and the predicted iteration."""
    out = {}
    m = PLAN_ITER.search(text)
    if m:
        out.update(iteration_ms_one_stream=float(m.group(1)), iteration_ms=float(m.group(2)))
    m = PLAN_COMM.search(text)
    if m:
        out.update(allreduces=int(m.group(1)), mb=float(m.group(2)), ranks=int(m.group(3)),
                   link_gbps=float(m.group(4)), allreduce_ms=float(m.group(5)),
                   exposed_ms=float(m.group(6)))
        out["buckets"] = [dict(what=b[0], step=int(b[1]), stream=int(b[2]), after=int(b[3]),
                               tensors=int(b[4]), mb=float(b[5]), ms=float(b[6]))
                          for b in PLAN_BUCKET.findall(text)]
    return out


def steady_images_per_s(rows, skip=2):
    """Median images/s over the metric windows after the first `skip` (a window's steps share
    one images_per_s; the first windows time cuDNN algorithms and capture the graphs)."""
    windows = []
    for r in rows:
        if "eval" in r or "images_per_s" not in r:
            continue
        if not windows or windows[-1] != r["images_per_s"]:
            windows.append(r["images_per_s"])
    steady = windows[skip:] or windows
    if not steady:
        raise RuntimeError("no metrics rows")
    return statistics.median(steady), len(steady)


# ---------------------------------------------------------------------------------------------
# Running things

class Clock:
    def __init__(self, limit):
        self.t0, self.limit = time.time(), limit

    def elapsed(self):
        return time.time() - self.t0

    def left(self):
        return None if self.limit is None else self.limit - self.elapsed()

    def timeout(self, cap):
        """A subprocess timeout: `cap`, or less when the time limit is near (at least 20 s)."""
        left = self.left()
        return cap if left is None else max(20.0, min(cap, left))

    def check(self):
        left = self.left()
        if left is not None and left <= 0:
            raise TimeoutError("skipped: --time-limit %.0f s reached" % self.limit)


def kill_session(pid):
    """SIGKILL to the session (process group) a Popen(start_new_session=True) started."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(cmd, timeout, env=None, log=None):
    """Runs cmd in a session of its own; on timeout kills that session (torchrun's workers, the
    ranks of `EXE --gpus`). Returns (returncode, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        out, err = p.communicate()
        err += "\n[killed after %.0f s]" % timeout
        p.returncode = 124
    if log:
        log("$ " + " ".join(cmd) + "\n" + err[-3000:])
    return p.returncode, out, err


def tail(text, limit=400):
    """The last lines of a log, as many as fit in `limit` characters, on one line."""
    out, n = [], 0
    for line in reversed([l.strip() for l in text.splitlines() if l.strip()]):
        if out and n + len(line) > limit:
            break
        out.insert(0, line[-limit:])
        n += len(line) + 3
    return " / ".join(out)


def export_onnx(name, path):
    """bench.py's export (this machine's torch, training mode); on a torch older than 2 (Debian's
    1.13 on the build machine, for --plan-only) opset 17 without the dynamo switch."""
    import torch
    from bench import export
    try:
        return export(name, path)
    except Exception:
        if int(torch.__version__.split(".")[0]) >= 2:
            raise
    from models import make
    model, shape, _ = make(name)
    model.train()
    torch.onnx.export(model, torch.randn(2, *shape), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    return "opset 17 (torch %s)" % torch.__version__


def hgpc_compile(args, clock, onnx_path, exe, batch, precision, ranks, log):
    cmd = [args.hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch), *TRAIN_OPTS,
           "--metrics-every", "16", "--precision", precision]
    if ranks > 1:
        cmd += ["--ranks", str(ranks), "--bucket-mb", str(args.bucket_mb)]
    rc, _, err = run(cmd, clock.timeout(300), log=log)
    if rc != 0:
        raise RuntimeError("hgpc compile (exit %d): %s" % (rc, tail(err, 500)))


def hgpc_throughput(args, clock, exe, gpus, log):
    metrics = exe + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [exe, "--data", "synthetic", "--steps", str(args.steps), "--device", "cuda",
           "--metrics", metrics, "--progress", "none", "--verbose"]
    if gpus > 1:
        cmd += ["--gpus", str(gpus)]
    rc, _, err = run(cmd, clock.timeout(300), log=log)
    if rc != 0:
        raise RuntimeError("run (exit %d): %s" % (rc, tail(err, 600)))
    ips, windows = steady_images_per_s([json.loads(l) for l in open(metrics) if l.strip()])
    m = re.search(r"trained \d+ steps in [\d.]+ s \(([\d.]+) images/s", err)
    mem = re.search(r"cuda: device memory ([\d.]+) MiB", err)
    return dict(images_per_s=ips, windows=windows,
                whole_run_images_per_s=float(m.group(1)) if m else None,
                mib=float(mem.group(1)) if mem else None)


def hgpc_traces(args, clock, exe, ranks, work, tag, log):
    """Runs `exe --gpus N --trace BASE` for a few steps (each rank writes BASE.rankR.json);
    returns per-rank overlap dicts (trace_overlap plus the profile's mapping)."""
    base = os.path.join(work, "%s.trace.json" % tag)
    paths = [os.path.join(work, "%s.trace.rank%d.json" % (tag, r)) for r in range(ranks)]
    for path in paths:
        if os.path.exists(path):
            os.remove(path)
    cmd = [exe, "--data", "synthetic", "--steps", "4", "--device", "cuda", "--progress", "none",
           "--timeout", "60", "--gpus", str(ranks), "--verbose", "--trace", base]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        _, text = p.communicate(timeout=clock.timeout(120))
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        _, text = p.communicate()
        raise RuntimeError("traced run killed at the time limit: " + tail(text, 300))
    log("$ %s\n%s" % (" ".join(cmd), text[-3000:]))
    if p.returncode != 0:
        raise RuntimeError("traced run exit %s: %s" % (p.returncode, tail(text, 300)))
    out, failures = [], []
    for r, path in enumerate(paths):
        if not os.path.exists(path):
            failures.append("rank %d wrote no trace %s" % (r, path))
            continue
        o = trace_overlap(json.load(open(path)))
        lines = [l for l in text.splitlines() if "profiled one run of train" in l
                 and (l.startswith("rank %d:" % r) or (r == 0 and not l.startswith("rank ")))]
        m = re.search(r"\((\w+) mapping\)", lines[0]) if lines else None
        o["mapping"] = m.group(1) if m else None
        o["rank"] = r
        out.append(o)
    if failures:
        raise RuntimeError("; ".join(failures))
    return out


def hgpc_plan(args, clock, onnx_path, batch, precision, ranks, log):
    cmd = [args.hgpc, "plan", onnx_path, "--batch", str(batch), "--target", args.target,
           "--precision", precision, "--ranks", str(ranks), "--bucket-mb", str(args.bucket_mb),
           *TRAIN_OPTS]
    rc, out, err = run(cmd, clock.timeout(120))
    if rc != 0:
        raise RuntimeError("hgpc plan (exit %d): %s" % (rc, tail(err, 400)))
    p = parse_plan(out)
    if "allreduce_ms" not in p:
        raise RuntimeError("hgpc plan printed no 'communication' line")
    if log:
        log("$ " + " ".join(cmd) + "\n" + "\n".join(l for l in out.splitlines()
                                                    if l.startswith(("predicted", "communication", "  bucket"))))
    return p


def torch_ddp(args, clock, name, batch, precision, nproc, work, log):
    out = os.path.join(work, "ddp-%s-b%d-%s-%d.json" % (name, batch, precision, nproc))
    if os.path.exists(out):
        os.remove(out)
    cmd = [args.python, "-W", "ignore", "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(nproc), os.path.join(HERE, "ddp_worker.py"), "--model", name,
           "--batch", str(batch), "--modes", args.torch_modes, "--precision", precision,
           "--iters", str(args.torch_iters), "--reps", str(args.torch_reps), "--out", out]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "4"))
    rc, _, err = run(cmd, clock.timeout(300), env=env, log=log)
    if not os.path.exists(out):
        raise RuntimeError("torchrun (exit %d) wrote no result: %s" % (rc, tail(err, 600)))
    r = json.load(open(out))
    modes = {m: r[m] for m in args.torch_modes.split(",") if isinstance(r.get(m), dict)}
    if rc != 0:
        r["exit"] = rc
        for m in args.torch_modes.split(","):
            if m not in modes and m + "_error" not in r:
                r[m + "_error"] = "not finished (torchrun exit %d%s)" % (
                    rc, ", killed at the timeout" if rc == 124 else "")
    if modes:
        best = max(modes, key=lambda m: modes[m]["images_per_s"])
        r["best_mode"], r["best_images_per_s"] = best, modes[best]["images_per_s"]
    return r


# ---------------------------------------------------------------------------------------------
# Report

def fmt(v, f="%.0f"):
    return f % v if isinstance(v, (int, float)) else "-"


def tables(results, gpus):
    n = gpus
    lines = ["| case | precision | hgpc 1 GPU img/s | hgpc %d GPUs img/s | hgpc scaling | "
             "torch 1 GPU img/s | torch %d GPUs img/s | torch scaling | hgpc / torch, 1 GPU | "
             "hgpc / torch, %d GPUs |" % (n, n, n), "|---" * 10 + "|"]
    for r in results:
        h1, hn = r.get("hgpc_1", {}), r.get("hgpc_%d" % n, {})
        t1, tn = r.get("torch_1", {}), r.get("torch_%d" % n, {})
        tcell = lambda t: ("%.0f (%s)" % (t["best_images_per_s"], t["best_mode"])  # noqa: E731
                           if "best_images_per_s" in t else "error" if t else "-")
        lines.append("| %s b%d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["batch"], r["precision"],
            fmt(h1.get("images_per_s")) if h1 else "error" if "hgpc_1_error" in r else "-",
            fmt(hn.get("images_per_s")) if hn else "error" if "hgpc_%d_error" % n in r else "-",
            fmt(r.get("hgpc_scaling"), "%.3f"), tcell(t1), tcell(tn),
            fmt(r.get("torch_scaling"), "%.3f"), fmt(r.get("ratio_1"), "%.2f"),
            fmt(r.get("ratio_%d" % n), "%.2f")))
    lines += ["", "PyTorch DDP per mode (global img/s; ms per step):", "",
              "| case | precision | GPUs | eager | whole-step CUDA graph |", "|---|---|---|---|---|"]
    for r in results:
        for g in (1, n):
            t = r.get("torch_%d" % g)
            if not t:
                continue
            cells = []
            for m in ("eager", "graph"):
                if isinstance(t.get(m), dict):
                    cells.append("%.0f (%.3f ms)" % (t[m]["images_per_s"], t[m]["ms"]))
                elif m + "_error" in t:
                    cells.append("failed: " + t[m + "_error"][:80].replace("|", "/"))
                else:
                    cells.append("-")
            lines.append("| %s b%d | %s | %d | %s | %s |" % (r["model"], r["batch"],
                                                             r["precision"], g, *cells))
    lines += ["", "Gradient all-reduce on %d GPUs, one traced step (rank 0 / rank 1 where two "
              "traces came back) against the cost model (`hgpc plan --ranks %d --target h200`):"
              % (n, n), "",
              "| case | precision | traced step ms | all-reduce kernels | all-reduce ms measured "
              "| predicted | exposed ms measured | predicted | trace mapping |",
              "|---" * 9 + "|"]
    for r in results:
        tr, pl = r.get("traces"), r.get("plan") or {}
        if not tr and not pl:
            continue
        per = lambda k, f="%.3f": " / ".join(f % t[k] for t in tr) if tr else "-"  # noqa: E731
        lines.append("| %s b%d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["batch"], r["precision"], per("span_ms"), per("comm_kernels", "%d"),
            per("comm_ms"), fmt(pl.get("allreduce_ms"), "%.3f"), per("exposed_ms"),
            fmt(pl.get("exposed_ms"), "%.3f"),
            " / ".join(str(t.get("mapping")) for t in tr) if tr else "-"))
    errors = [(r, k, v) for r in results for k, v in r.items() if k.endswith("_error")]
    if errors:
        lines += ["", "Errors:", ""]
        for r, k, v in errors:
            lines.append("- %s b%d %s %s: %s" % (r["model"], r["batch"], r["precision"], k[:-6],
                                                 str(v).replace("\n", " ")[:300]))
    return "\n".join(lines) + "\n"


def derive(r, n):
    h1, hn = r.get("hgpc_1"), r.get("hgpc_%d" % n)
    if h1 and hn:
        r["hgpc_scaling"] = hn["images_per_s"] / (n * h1["images_per_s"])
    t1, tn = r.get("torch_1") or {}, r.get("torch_%d" % n) or {}
    if "best_images_per_s" in t1 and "best_images_per_s" in tn:
        r["torch_scaling"] = tn["best_images_per_s"] / (n * t1["best_images_per_s"])
    for g, h, t in ((1, h1, t1), (n, hn, tn)):
        if h and "best_images_per_s" in t:
            r["ratio_%d" % g] = h["images_per_s"] / t["best_images_per_s"]


# ---------------------------------------------------------------------------------------------

def self_test():
    """Checks the parsers on made-up input (no GPU, no torch)."""
    assert merge([[0, 2], [1, 3], [5, 6], [6, 7], [9, 9]]) == [[0, 3], [5, 7]]
    assert subtract([[0, 10]], [[2, 3], [5, 12]]) == [[0, 2], [3, 5]]
    assert subtract([[0, 4], [6, 8]], []) == [[0, 4], [6, 8]]
    assert subtract([[2, 3]], [[0, 10]]) == []
    X = lambda tid, name, ts, dur, cat="kernel", kernel="k": dict(  # noqa: E731
        ph="X", pid=1, tid=tid, name=name, cat=cat, ts=ts, dur=dur, args=dict(step=0, kernel=kernel))
    trace = {"traceEvents": [
        dict(ph="M", pid=1, name="process_name", args=dict(name="GPU x (m, batch 8, train)")),
        X(0, "Conv a", 0, 1000), X(1, "ConvBwdFilter b", 500, 1500),   # compute 0..2000 (two streams)
        X(0, "Relu c", 2500, 500),                                     # compute 2500..3000
        X(4, "AllReduce fc", 1800, 1000, kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        # ^ 1800..2800: hidden 1800..2000 and 2500..2800, exposed 2000..2500 (500 us)
        X(1000, "InputCopy", 2000, 400, cat="memory"),                 # a copy is not compute
        X(4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3200, 300,
          kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL"),            # unmapped, all exposed
        X(2, "Sgd w", 3600, 400),
    ]}
    o = trace_overlap(trace)
    assert o["comm_kernels"] == 2 and o["compute_kernels"] == 4, o
    assert abs(o["exposed_ms"] - 0.8) < 1e-9, o
    assert abs(o["comm_ms"] - 1.3) < 1e-9 and abs(o["comm_sum_ms"] - 1.3) < 1e-9, o
    assert abs(o["span_ms"] - 4.0) < 1e-9 and o["comm_streams"] == [4], o
    plan = """plan resnet batch 128 target h200 (...) precision tf32
streams 5 (at most 4), events 61 (dependencies 1946, 402 after transitive reduction)
predicted iteration 5.825 ms on one stream; 4.862 ms scheduled (4.616 ms if concurrent kernels did not share the GPU)
communication 2 all-reduces, 44.70 MB over 2 ranks (450 GB/s links): all-reduce 0.140 ms, exposed 0.078 ms
  bucket 0: step 90 (stream 4) after step 89, 15 tensors, 19.436 MB, 0.062 ms
  bucket 1: step 161 (stream 4) after step 160, 49 tensors, 25.260 MB, 0.078 ms
"""
    p = parse_plan(plan)
    assert p["allreduces"] == 2 and p["ranks"] == 2 and p["allreduce_ms"] == 0.140, p
    assert p["exposed_ms"] == 0.078 and p["iteration_ms"] == 4.862 and p["link_gbps"] == 450, p
    assert [b["ms"] for b in p["buckets"]] == [0.062, 0.078] and p["buckets"][1]["step"] == 161, p
    rows = [dict(step=i + 1, images_per_s=[100, 200, 300, 310, 290][i // 16]) for i in range(80)]
    assert steady_images_per_s(rows) == (300, 3)
    r = dict(model="m", batch=8, precision="tf32",
             hgpc_1=dict(images_per_s=1000.0), hgpc_2=dict(images_per_s=1900.0),
             torch_1=dict(best_images_per_s=800.0, best_mode="graph"),
             torch_2=dict(best_images_per_s=1500.0, best_mode="eager", graph_error="boom"),
             traces=[dict(o, mapping="graph"), dict(o, mapping="graph")], plan=p)
    derive(r, 2)
    assert abs(r["hgpc_scaling"] - 0.95) < 1e-9 and abs(r["torch_scaling"] - 0.9375) < 1e-9, r
    assert abs(r["ratio_1"] - 1.25) < 1e-9 and abs(r["ratio_2"] - 1900 / 1500) < 1e-9, r
    md = tables([r, dict(model="x", batch=4, precision="bf16", hgpc_1_error="no bf16")], 2)
    assert "| m b8 | tf32 | 1000 | 1900 | 0.950 | 800 (graph) | 1500 (eager) | 0.938 | 1.25 | 1.27 |" in md, md
    assert "0.800 / 0.800" in md and "| x b4 | bf16 | error |" in md, md
    print("self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--json", help="where the json goes (default: OUT/scaling.json)")
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs torchrun")
    ap.add_argument("--cases", default=DEFAULT_CASES, help="MODEL:PER_GPU_BATCH,...")
    ap.add_argument("--precision", default="tf32",
                    help="comma-separated; each passed to hgpc compile/plan --precision")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--target", default="h200")
    ap.add_argument("--steps", type=int, default=160, help="hgpc steps per throughput run")
    ap.add_argument("--torch-modes", default="eager,graph")
    ap.add_argument("--torch-iters", type=int, default=30)
    ap.add_argument("--torch-reps", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds; later parts are skipped (and say so) once it is reached")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument("--plan-only", action="store_true",
                    help="no GPU: export, then print hgpc plan's all-reduce predictions")
    ap.add_argument("--self-test", action="store_true", help="check the parsers; no GPU")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    cases = []
    for spec in args.cases.split(","):
        name, batch = spec.split(":")
        cases.append((name, int(batch)))
    precisions = args.precision.split(",")
    n = args.gpus
    work = args.work or tempfile.mkdtemp(prefix="hgpc-scaling-")
    os.makedirs(work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    json_path = args.json or os.path.join(args.out, "scaling.json")
    clock = Clock(args.time_limit)

    def log(text):
        print(text, flush=True)

    results = []

    def save():
        for r in results:
            derive(r, n)
        json.dump(results, open(json_path, "w"), indent=1)
        if not args.plan_only:
            open(os.path.join(args.out, "scaling.md"), "w").write(tables(results, n))

    def part(r, key, fn):
        """Runs one part into r[key]; an error (or the time limit) is recorded, not raised."""
        t0 = time.time()
        try:
            clock.check()
            r[key] = fn()
        except Exception as e:  # noqa: BLE001 - one failing part must not lose the others
            r[key + "_error"] = str(e) if isinstance(e, (RuntimeError, TimeoutError)) else repr(e)
        log("[%6.0f s] %s b%d %s %s: %s (%.0f s)" % (
            clock.elapsed(), r["model"], r["batch"], r["precision"], key,
            "error: " + r[key + "_error"][-300:] if key + "_error" in r else "ok", time.time() - t0))
        save()

    # Phases over all cases rather than case after case: under --time-limit, the hgpc rows (the
    # point of the benchmark) come first, then the traces, then PyTorch, the slowest part.
    rows = []
    for name, batch in cases:
        onnx_path = os.path.join(work, name + ".onnx")
        for precision in precisions:
            r = dict(model=name, batch=batch, precision=precision, gpus=n)
            results.append(r)
            if not os.path.exists(onnx_path):
                part(r, "export", lambda: export_onnx(name, onnx_path))
            if not os.path.exists(onnx_path):
                continue
            stem = os.path.join(work, "%s-b%d-%s" % (name, batch, precision))
            rows.append((r, name, batch, precision, onnx_path, stem))
            part(r, "plan", lambda: hgpc_plan(args, clock, onnx_path, batch, precision, n, log))
            if args.plan_only:
                continue
            for g in (1, n):
                exe = "%s-r%d" % (stem, g)

                def hgpc_part(g=g, exe=exe):
                    hgpc_compile(args, clock, onnx_path, exe, batch, precision, g, log)
                    return hgpc_throughput(args, clock, exe, g, log)
                part(r, "hgpc_%d" % g, hgpc_part)
            derive(r, n)
    for r, name, batch, precision, onnx_path, stem in rows:
        if "hgpc_%d" % n in r and not args.no_trace:
            part(r, "traces", lambda: hgpc_traces(args, clock, "%s-r%d" % (stem, n), n, work,
                                                   os.path.basename(stem), log))
    for r, name, batch, precision, onnx_path, stem in rows:
        if args.no_torch or args.plan_only:
            continue
        for g in (1, n):
            part(r, "torch_%d" % g, lambda g=g: torch_ddp(args, clock, name, batch, precision, g,
                                                          work, log))
        derive(r, n)
        save()
        print(json.dumps(r), flush=True)
    save()
    if args.plan_only:
        for r in results:
            p = r.get("plan", {})
            print("%s b%d %s: %s" % (r["model"], r["batch"], r["precision"],
                                     json.dumps(p) if p else r.get("plan_error")))
    else:
        print(tables(results, n))
        print("total %.0f s" % clock.elapsed())
    ok = all(not any(k.endswith("_error") for k in r) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
