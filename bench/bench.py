#!/usr/bin/env python3
"""hgpc against PyTorch, side by side on the same GPU in the same run.

For each case it exports the model with this machine's torch (training mode), compiles it with
hgpc, times the generated executable's steady-state training step on synthetic data, and times
PyTorch's step the way ../shared/anchors/torch_train_bench.py does (eager, whole-step CUDA graph,
optionally torch.compile): forward, cross-entropy, backward, SGD(momentum 0.9, wd 5e-4), fp32
storage with TF32 on. It prints a table and writes results.json and results.md to --out.

Each row also gives the fraction of the physical limit: the train step's FLOPs (hgpc plan's
StepWork figures, the same model for both) over the time and the peak of the math mode, for hgpc
and for the best PyTorch variant; and hgpc's bytes moved (the cost model's per-step reads and
writes of the plan as compiled, so fusion lowers it) over the time and the HBM bandwidth.

    source .dev/env.sh && python3 bench/bench.py --out $OUT [--cases lenet5:64,resnet50:128]
        [--torch-modes eager,graph,compile,graph-nchw] [--steps 160] [--op-times] [--single-stream]
        [--unfused] [--nchw] [--cudnn-fusion] [--profile] [--warm-compile-gpu 1] [--precision tf32|fp32|bf16|fp16]

--precision fp16 times PyTorch with torch.amp.GradScaler (dynamic loss scaling, as hgpc's fp16):
GradScaler cannot be captured, so the graph and graph-nchw modes are recorded as errors with that
reason and torch.compile runs without CUDA graphs (FP16_COMPILE_MODE in bench/torch_reference.py,
which times PyTorch's side); use --torch-modes eager,compile there. The table's "ratio to best torch" is then against the faster of those two.

graph-nchw (tf32/bf16/fp16) is the whole-step graph with the model and input left in NCHW, beside
the channels_last variants, to show what the layout is worth to PyTorch's kernels.

--hgpc-build LABEL=PATH times each case with a second hgpc as well (its hgpc-runner beside it):
an A/B of two builds, e.g. main and a branch, in one run and one table, against the same PyTorch
measurement.

--suite broad (issue 19) runs the ten cases and models.BROAD_CASES (resnet34, resnet101,
wide_resnet50_2, resnext50_32x4d, densenet121, shufflenet_v2_x1_0, regnet_y_1_6gf,
mobilenet_v3_large, mnasnet1_0, squeezenet1_1, inception_v3); --suite all adds efficientnet_b0 and
convnext_tiny (they need issue 23's ops). --cases overrides the suite.

--warm-compile-gpu G compiles every torch.compile case first in background processes on GPU G
(pinned to the CPUs the timing does not use), while this process times hgpc and the other
PyTorch variants on GPU 0; with --warm-first (one GPU: G = 0) the warm-up finishes before any
timing starts. Inductor's caches then make the timed torch.compile a cache hit, so
ten cases fit one device call. Only the warm-up runs on GPU G; every timing runs on GPU 0.

--single-stream, --unfused and --nchw also time hgpc's plan on one stream, compiled with --no-fuse
(docs/fusion.md) and compiled with --layout nchw (docs/layout.md), and add the gains (that time
over the default plan's) to the table. --cudnn-fusion times the plan run with --no-cudnn-fusion
(every convolution epilogue by hgpc's kernel, none in a cuDNN fused graph) and says how many
epilogues the default run gave to cuDNN's fused engines (those that timed faster).

In bf16 and fp16 the plan takes each BatchNorm's statistics from the convolution before it
(fuse-conv-bn, docs/fusion.md); bench.md then says per case how many layers ran cuDNN's
conv + GenStats engine, and bench.json keeps each layer's --verbose line (the timed choice, or
why cuDNN had no engine). --variant no-conv-bn=--no-conv-bn-fusion times the plan without it.

--op-times adds, per case, where the time goes: hgpc's launches timed one by one (the
executable's --op-times) summed by op, and PyTorch's eager kernels from its profiler, written to
optimes.txt.

--profile also records each case's third step through CUPTI (the executable's --profile) and
predicts the step time from those records (`hgpc plan --records`, one stream); bench.md then ends
with a table of measured and predicted step times and their mean absolute percentage error.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from models import SUITES, make  # noqa: E402
import torch_reference  # noqa: E402
from torch_reference import torch_kernel_summary, torch_step_ms  # noqa: E402


HOLD_BATCH = True  # hgpc steps on one batch held on the device (--input-pipeline: off)

# The plain plan the scheduling passes are measured against: one stream, no splits, no pipeline.
SINGLE_STREAM = ("--max-streams", "1", "--no-split", "--no-pipeline")


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


def summarize_hgpc_op_times(path, top=12):
    """Lines summing one timed training step by op kind, largest first."""
    by_op, total = {}, 0.0
    for line in open(path):
        prog, _, op, loc, ms = line.rstrip("\n").split("\t")
        if prog != "train":
            continue
        ms = float(ms)
        total += ms
        n, t = by_op.get(op, (0, 0.0))
        by_op[op] = (n + 1, t + ms)
    out = ["  hgpc op by op: %.3f ms in all" % total]
    for op, (n, t) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append("    %-28s %4d launches %8.3f ms" % (op, n, t))
    return out


def hgpc_case(hgpc, name, batch, work, steps, op_times=None, records=None, extra=(), tag="",
              run_extra=()):
    onnx_path = os.path.join(work, "%s.onnx" % name)
    if not os.path.exists(onnx_path):
        how = export(name, onnx_path)
    else:
        how = "cached"
    exe = os.path.join(work, "%s-b%d%s" % (name, batch, tag))
    t0 = time.time()
    # Metrics every `every` steps; the first two windows (tuning, capture) are dropped below, so
    # there must be at least four.
    every = max(1, min(16, steps // 4))
    train_opts = ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--weight-decay", "5e-4",
                  "--metrics-every", str(every)]
    p = subprocess.run([hgpc, "compile", onnx_path, "-o", exe, "--batch", str(batch), *train_opts,
                        *extra],
                       capture_output=True, text=True)
    compile_s = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError("hgpc compile: " + p.stderr.strip()[-600:])
    metrics = exe + ".jsonl"
    # --hold-batch: the step without the input pipeline, as PyTorch's loop below times it (its
    # batch is a device tensor); HOLD_BATCH is off with --input-pipeline.
    p = subprocess.run([exe, "--data", "synthetic", "--steps", str(steps), "--device", "cuda",
                        "--metrics", metrics, "--progress", "none", "--verbose", *run_extra]
                       + (["--hold-batch"] if HOLD_BATCH else [])
                       + (["--op-times", op_times] if op_times else [])
                       + (["--profile", records] if records else []),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("run: " + p.stderr.strip()[-800:])
    predicted = None
    if records:
        q = subprocess.run([hgpc, "plan", onnx_path, "--batch", str(batch), "--target", "h200",
                            "--records", records, *train_opts, *extra],
                           capture_output=True, text=True)
        if q.returncode != 0:
            raise RuntimeError("hgpc plan --records: " + q.stderr.strip()[-600:])
        # The executable ran the plan as compiled: scheduled over streams unless `extra` says one.
        single = "--max-streams" in extra and extra[list(extra).index("--max-streams") + 1] == "1"
        m = re.search(r"predicted iteration ([\d.]+) ms on one stream; ([\d.]+) ms scheduled", q.stdout)
        predicted = float(m.group(1) if single else m.group(2))
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    windows = []
    for r in rows:
        if "eval" in r:
            continue
        if not windows or windows[-1] != r["images_per_s"]:
            windows.append(r["images_per_s"])
    if len(windows) < 3:
        raise RuntimeError("%d metrics windows: too few steps to leave out the warm-up" % len(windows))
    steady = windows[2:]
    ms = statistics.median(batch / ips * 1000 for ips in steady)
    mem = None
    for line in p.stderr.splitlines():
        if line.startswith("cuda: device memory"):
            mem = float(line.split()[3]) * (1 << 20)
    try:
        work = step_work(hgpc, onnx_path, batch, train_opts, extra)
    except Exception as e:  # noqa: BLE001  (the timing stands without it)
        work = dict(error=str(e)[:300])
    # Convolution epilogues (docs/fusion.md): how many ran inside a cuDNN fused graph.
    epilogues = [l for l in p.stderr.splitlines() if re.match(r"cuda: conv '.*': epilogue ", l)]
    cudnn_fused = sum("cuDNN fused graph" in l for l in epilogues)
    # BatchNorm statistics from the convolutions (fuse-conv-bn, bf16/fp16): how many layers
    # took cuDNN's conv + GenStats engine, and the reasons the others did not.
    stats = [l for l in p.stderr.splitlines() if re.match(r"cuda: conv '.*': statistics ", l)]
    stats_why = [l for l in p.stderr.splitlines()
                 if re.match(r"cuda: fwd '.*': (no cuDNN engine fuses the statistics|statistics )", l)]
    return dict(ms=ms, compile_s=compile_s, export=how, peak_bytes=mem, log=p.stderr[-400:],
                predicted_ms=predicted, work=work, epilogues=len(epilogues), cudnn_fused=cudnn_fused,
                bn_stats=len(stats), bn_stats_cudnn=sum("cuDNN fused graph" in l for l in stats),
                bn_stats_why=stats_why[:80])


def step_work(hgpc, onnx_path, batch, train_opts, extra):
    """The train program's FLOPs and bytes moved per step, and the target's peaks, from
    `hgpc plan` (StepWork, the one FLOP model, and the cost model's per-step bytes: hgpc's own traffic, so it
    shrinks with fusion), for each case's fraction of the physical limit."""
    q = subprocess.run([hgpc, "plan", onnx_path, "--batch", str(batch), "--target", "h200",
                        *train_opts, *extra], capture_output=True, text=True)
    if q.returncode != 0:
        raise RuntimeError("hgpc plan: " + q.stderr.strip()[-600:])
    head = re.search(r"(\d+) GB/s, \w+ ([\d.]+) TFLOP/s", q.stdout)
    gflop = mbyte = 0.0
    program = None
    for line in q.stdout.splitlines():
        if line.startswith("program "):
            program = line.split()[1].rstrip(":")
            continue
        t = line.split()
        if program != "train" or not re.match(r"^\s+\d+ ", line) or "x" not in t:
            continue
        ix = t.index("x")
        gflop += float(t[ix + 6])
        mbyte += float(t[ix + 7])
    return dict(gflop=gflop, mbyte=mbyte, peak_gbps=float(head.group(1)),
                peak_tflops=float(head.group(2)))


def limit_cells(work, ms):
    """FLOPs over the math mode's peak and bytes over the memory bandwidth, in percent."""
    if not work or not ms:
        return ["", ""]
    return ["%.1f" % (100 * work["gflop"] / ms / work["peak_tflops"]),
            "%.1f" % (100 * work["mbyte"] / ms / work["peak_gbps"])]


def time_torch(r, mode):
    """Times one PyTorch variant of the case into r (an error is recorded, not raised)."""
    try:
        ms, peak = torch_step_ms(r["model"], r["batch"], mode)
        r["torch_" + mode] = dict(ms=ms, peak_bytes=peak)
    except Exception as e:  # noqa: BLE001
        r["torch_%s_error" % mode] = repr(e)[:300]


class CompileWarmers:
    """Runs `bench.py --warm-only CASE` for each case on another GPU, a few at a time, pinned to
    the CPUs above the first eight (the timing process keeps those), so that the timed
    torch.compile later finds Inductor's caches (FX graph, AOTAutograd, Triton) filled."""

    def __init__(self, specs, args):
        cpus = os.cpu_count() or 16
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(args.warm_compile_gpu))
        pin = ["taskset", "-c", "8-%d" % (cpus - 1)] if cpus > 12 else []
        if pin:
            os.sched_setaffinity(0, range(8))

        def warm(spec):
            cmd = pin + [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--warm-only", spec,
                              "--precision", args.precision]
            return subprocess.run(cmd, env=env, text=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)

        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.warm_compile_jobs)
        self.futures = [(spec, self.pool.submit(warm, spec)) for spec in specs]

    def wait(self):
        """Yields (case, finished process) in case order."""
        for spec, f in self.futures:
            yield spec, f.result()
        self.pool.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--suite", default="default", choices=sorted(SUITES),
                    help="the cases when --cases is not given: default (the ten of models.CASES), "
                         "broad (those and models.BROAD_CASES, issue 19), all (and MODERN_CASES)")
    ap.add_argument("--cases", default=None, help="model:batch,... (default: the --suite's)")
    ap.add_argument("--torch-modes", default="eager,graph")
    ap.add_argument("--compile-cases", default="",
                    help="time torch.compile only for these cases (default: every case); its "
                         "compile takes about a minute per model")
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument("--op-times", action="store_true", help="also write optimes.txt")
    ap.add_argument("--single-stream", action="store_true",
                    help="also time hgpc's plan on one stream (--max-streams 1), for the "
                         "scheduling gain")
    ap.add_argument("--layout", default="auto", choices=["auto", "nchw", "nhwc"],
                    help="hgpc compile --layout for the timed plan (default auto)")
    ap.add_argument("--nchw", action="store_true",
                    help="also time hgpc compiled with --layout nchw (the layout gain, docs/layout.md)")
    ap.add_argument("--cudnn-fusion", action="store_true",
                    help="also time hgpc's plan run with --no-cudnn-fusion (every convolution "
                         "epilogue by hgpc's kernel), for what cuDNN's fused graphs win")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                    help="also time hgpc compiled with these extra hgpc compile arguments (e.g. "
                         "no-sum-fold=--disable-pass,fuse-gradient-sums: commas split ARGS); the table gets LABEL's "
                         "time and gain (its time over the default plan's). Repeatable.")
    ap.add_argument("--hgpc-build", action="append", default=[], metavar="LABEL=PATH",
                    help="also time the case with another hgpc (e.g. main's beside a branch's, "
                         "its hgpc-runner next to it), with the default plan's arguments and "
                         "--op-times when set; the table gets LABEL's time and gain as a "
                         "--variant's. Repeatable.")
    ap.add_argument("--unfused", action="store_true",
                    help="also time hgpc's plan compiled with --no-fuse, for the fusion gain")
    ap.add_argument("--profile", action="store_true",
                    help="also profile one step per case and predict the step time from it")
    ap.add_argument("--warm-compile-gpu", type=int, default=None,
                    help="warm torch.compile's caches on this GPU in the background first")
    ap.add_argument("--warm-compile-jobs", type=int, default=3)
    ap.add_argument("--warm-first", action="store_true",
                    help="finish the torch.compile warm-up before timing anything (for one GPU: "
                         "--warm-compile-gpu 0 then shares no timed run)")
    ap.add_argument("--precision", default="tf32", choices=["fp32", "tf32", "bf16", "fp16"],
                    help="hgpc compile --precision, and PyTorch's matching mode (AMP autocast "
                         "with channels_last for bf16/fp16)")
    ap.add_argument("--input-pipeline", action="store_true",
                    help="time hgpc with its input pipeline (each step's batch loaded, staged "
                         "and copied to the device) instead of --hold-batch")
    ap.add_argument("--warm-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # (label, hgpc, extra compile arguments, another build?): the --variant plans, then the
    # --hgpc-build binaries (whose op times are written too).
    variants = [(v.partition("=")[0], args.hgpc, shlex.split(v.partition("=")[2].replace(",", " ")),
                 False) for v in args.variant]
    for b in args.hgpc_build:
        label, _, path = b.partition("=")
        if not label or not os.path.isfile(path):
            ap.error("--hgpc-build wants LABEL=PATH of an hgpc executable, got %r" % b)
        variants.append((label, os.path.abspath(path), [], True))
    if args.cases is None:
        args.cases = ",".join("%s:%d" % c for c in SUITES[args.suite])
    global HOLD_BATCH
    torch_reference.PRECISION = args.precision
    HOLD_BATCH = not args.input_pipeline
    if args.warm_only:
        name, batch = args.warm_only.split(":")
        torch_step_ms(name, int(batch), "compile", iters=2, reps=1)
        return
    work = args.work or tempfile.mkdtemp(prefix="hgpc-bench-")
    os.makedirs(work, exist_ok=True)
    print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU", flush=True)
    results = []
    breakdown = []
    modes = args.torch_modes.split(",")
    compiled = [spec for spec in args.cases.split(",") if "compile" in modes
                and (not args.compile_cases or spec in args.compile_cases.split(","))]
    warmers = CompileWarmers(compiled, args) if args.warm_compile_gpu is not None else None
    warm_errors = {}
    if warmers is not None and args.warm_first:
        t0 = time.time()
        for spec, p in warmers.wait():
            if p.returncode != 0:
                warm_errors[spec] = p.stderr[-300:]
        print("torch.compile warm-up: %.0f s" % (time.time() - t0), flush=True)
        warmers = None  # every compile below is then timed in case order, from the warm caches
    # Interrupted (SIGINT, as `timeout -s INT` sends it near the end of a device call), the
    # table still gets every case finished so far.
    try:
        for spec in args.cases.split(","):
            name, batch = spec.split(":")
            batch = int(batch)
            r = dict(model=name, batch=batch)
            try:
                ot = os.path.join(work, "%s-b%d.optimes" % (name, batch)) if args.op_times else None
                if ot and os.path.exists(ot):
                    os.remove(ot)
                rec = os.path.join(work, "%s-b%d.records.txt" % (name, batch)) if args.profile else None
                r["hgpc"] = hgpc_case(args.hgpc, name, batch, work, args.steps, ot, rec,
                                      extra=("--precision", args.precision, "--layout", args.layout))
                if ot:
                    breakdown.append("%s b%d: hgpc %.3f ms per step" % (name, batch, r["hgpc"]["ms"]))
                    breakdown += summarize_hgpc_op_times(ot)
            except Exception as e:  # noqa: BLE001
                r["hgpc_error"] = str(e)
            if args.single_stream:
                try:
                    r["hgpc_single"] = hgpc_case(args.hgpc, name, batch, work, args.steps,
                                                 extra=SINGLE_STREAM + ("--precision", args.precision),
                                                 tag="-1s")
                    if "hgpc" in r:
                        r["stream_gain"] = r["hgpc_single"]["ms"] / r["hgpc"]["ms"]
                except Exception as e:  # noqa: BLE001
                    r["hgpc_single_error"] = str(e)
            if args.unfused:
                try:
                    r["hgpc_unfused"] = hgpc_case(args.hgpc, name, batch, work, args.steps,
                                                  extra=("--no-fuse", "--precision", args.precision),
                                                  tag="-nf")
                    if "hgpc" in r:
                        r["fusion_gain"] = r["hgpc_unfused"]["ms"] / r["hgpc"]["ms"]
                except Exception as e:  # noqa: BLE001
                    r["hgpc_unfused_error"] = str(e)
            if args.cudnn_fusion:
                try:
                    r["hgpc_no_cudnn_fusion"] = hgpc_case(args.hgpc, name, batch, work, args.steps,
                                                          extra=("--precision", args.precision,
                                                                 "--layout", args.layout),
                                                          tag="-ncf", run_extra=("--no-cudnn-fusion",))
                    if "hgpc" in r:
                        r["cudnn_fusion_gain"] = r["hgpc_no_cudnn_fusion"]["ms"] / r["hgpc"]["ms"]
                except Exception as e:  # noqa: BLE001
                    r["hgpc_no_cudnn_fusion_error"] = str(e)
            for label, binary, extra, build in variants:
                try:
                    vot = None
                    if ot and build:
                        vot = ot + "-" + label
                        if os.path.exists(vot):
                            os.remove(vot)
                    r["hgpc_" + label] = hgpc_case(binary, name, batch, work, args.steps, vot,
                                                   extra=("--precision", args.precision, "--layout",
                                                          args.layout, *extra),
                                                   tag="-" + label)
                    if vot:
                        breakdown.append("%s b%d: hgpc %s %.3f ms per step" % (
                            name, batch, label, r["hgpc_" + label]["ms"]))
                        breakdown += summarize_hgpc_op_times(vot)
                    if "hgpc" in r:
                        r[label + "_gain"] = r["hgpc_" + label]["ms"] / r["hgpc"]["ms"]
                except Exception as e:  # noqa: BLE001
                    r["hgpc_%s_error" % label] = str(e)
            if args.nchw:
                try:
                    r["hgpc_nchw"] = hgpc_case(args.hgpc, name, batch, work, args.steps,
                                               extra=("--layout", "nchw", "--precision", args.precision),
                                               tag="-nchw")
                    if "hgpc" in r:
                        r["layout_gain"] = r["hgpc_nchw"]["ms"] / r["hgpc"]["ms"]
                except Exception as e:  # noqa: BLE001
                    r["hgpc_nchw_error"] = str(e)
            if spec in warm_errors:
                r["torch_compile_warm_error"] = warm_errors[spec]
            for mode in modes:
                if mode == "compile" and (spec not in compiled or warmers is not None):
                    continue  # timed after the warm-up, below
                time_torch(r, mode)
            if args.op_times:
                try:
                    breakdown += torch_kernel_summary(name, batch)
                except Exception as e:  # noqa: BLE001
                    breakdown.append("  torch profile failed: %r" % e)
                open(os.path.join(args.out, "optimes.txt"), "w").write("\n".join(breakdown) + "\n")
            results.append(r)
            print(json.dumps(r), flush=True)
        if warmers is not None:
            t0 = time.time()
            for spec, p in warmers.wait():
                r = next(r for r in results if "%s:%d" % (r["model"], r["batch"]) == spec)
                if p.returncode != 0:
                    r["torch_compile_warm_error"] = p.stderr[-300:]
                time_torch(r, "compile")
                print(json.dumps(r), flush=True)
            print("torch.compile after the warm-up: %.0f s" % (time.time() - t0), flush=True)
    except KeyboardInterrupt:
        print("interrupted: the table has the %d case(s) finished" % len(results), flush=True)
    for r in results:
        torch_ms = [v["ms"] for k, v in r.items() if k.startswith("torch_") and isinstance(v, dict)]
        if "hgpc" in r and torch_ms:
            r["best_torch_ms"] = min(torch_ms)
            r["ratio"] = min(torch_ms) / r["hgpc"]["ms"]
    json.dump(results, open(os.path.join(args.out, "bench.json"), "w"), indent=1)
    single = ["hgpc 1-stream ms", "stream gain"] if args.single_stream else []
    single += ["hgpc unfused ms", "fusion gain"] if args.unfused else []
    single += ["hgpc nchw ms", "layout gain"] if args.nchw else []
    for label, *_ in variants:
        single += ["hgpc %s ms" % label, "%s gain" % label]
    single += ["epilogues in cuDNN graphs", "hgpc no-cuDNN-fusion ms", "cuDNN fusion gain"] \
        if args.cudnn_fusion else []
    lines = ["| case | hgpc ms | hgpc img/s | " + " | ".join(single + ["torch %s ms" % m for m in args.torch_modes.split(",")])
             + " | ratio to best torch | hgpc MiB | torch MiB | compile s"
             + " | hgpc % of peak FLOP/s | hgpc % of HBM bandwidth | best torch % of peak FLOP/s |",
             "|---" * (10 + len(single) + len(args.torch_modes.split(","))) + "|"]
    for r in results:
        h = r.get("hgpc")
        cells = ["%s b%d" % (r["model"], r["batch"]),
                 "%.3f" % h["ms"] if h else "error", "%.0f" % (r["batch"] / h["ms"] * 1000) if h else ""]
        if args.single_stream:
            h1 = r.get("hgpc_single")
            cells.append("%.3f" % h1["ms"] if h1 else "error")
            cells.append("%.3f" % r["stream_gain"] if "stream_gain" in r else "")
        if args.unfused:
            h1 = r.get("hgpc_unfused")
            cells.append("%.3f" % h1["ms"] if h1 else "error")
            cells.append("%.3f" % r["fusion_gain"] if "fusion_gain" in r else "")
        if args.nchw:
            h1 = r.get("hgpc_nchw")
            cells.append("%.3f" % h1["ms"] if h1 else "error")
            cells.append("%.3f" % r["layout_gain"] if "layout_gain" in r else "")
        for label, *_ in variants:
            h1 = r.get("hgpc_" + label)
            cells.append("%.3f" % h1["ms"] if h1 else "error")
            cells.append("%.3f" % r[label + "_gain"] if label + "_gain" in r else "")
        if args.cudnn_fusion:
            cells.append("%d of %d" % (h["cudnn_fused"], h["epilogues"]) if h else "")
            h1 = r.get("hgpc_no_cudnn_fusion")
            cells.append("%.3f" % h1["ms"] if h1 else "error")
            cells.append("%.3f" % r["cudnn_fusion_gain"] if "cudnn_fusion_gain" in r else "")
        for m in args.torch_modes.split(","):
            t = r.get("torch_" + m)
            cells.append("%.3f" % t["ms"] if t else "error" if "torch_%s_error" % m in r else "-")
        cells.append("%.2f" % r["ratio"] if "ratio" in r else "")
        cells.append("%.0f" % (h["peak_bytes"] / 2**20) if h and h.get("peak_bytes") else "")
        tm = [r[k]["peak_bytes"] for k in r if k.startswith("torch_") and isinstance(r[k], dict)]
        cells.append("%.0f" % (max(tm) / 2**20) if tm else "")
        cells.append("%.1f" % h["compile_s"] if h else "")
        w = h.get("work") if h and "gflop" in h.get("work", {}) else None
        cells += limit_cells(w, h["ms"] if h else None)
        cells.append(limit_cells(w, r.get("best_torch_ms"))[0])
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    if args.profile:
        rows, errors = ["| case | measured ms | predicted ms (--records) | error |", "|---|---|---|---|"], []
        for r in results:
            h = r.get("hgpc")
            if not h or h.get("predicted_ms") is None:
                continue
            err = (h["predicted_ms"] - h["ms"]) / h["ms"]
            errors.append(abs(err))
            rows.append("| %s b%d | %.3f | %.3f | %+.1f%% |" % (r["model"], r["batch"], h["ms"],
                                                                h["predicted_ms"], 100 * err))
        if errors:
            rows.append("\nprediction from one profiling run: mean absolute percentage error %.1f%% "
                        "over %d cases" % (100 * sum(errors) / len(errors), len(errors)))
        table += "\n\n" + "\n".join(rows)
    stats_rows = ["%s b%d: %d of %d BatchNorm statistics from cuDNN's conv + GenStats engine, the "
                  "rest by hgpc's sums kernel after the convolution (fuse-conv-bn)"
                  % (r["model"], r["batch"], r["hgpc"]["bn_stats_cudnn"], r["hgpc"]["bn_stats"])
                  for r in results if r.get("hgpc", {}).get("bn_stats")]
    if stats_rows:
        table += "\n\n" + "\n".join(stats_rows)
    open(os.path.join(args.out, "bench.md"), "w").write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
