#!/usr/bin/env python3
"""The split analysis against measurement, layer by layer (the first split-width measurement).

For each conv layer of the anchor study (../shared/anchors/conv_concurrency.py) and each
distinct conv layer of the benchmark zoo (bench/models.py at its benchmark batch sizes), time the
layer's training work split into k sub-batches, k in {1, 2, 4, 8}, the way hgpc splits it
(compiler/schedule/BatchSlicing.h), and compare the best measured width with the width hgpc
chooses. The criterion: the chosen width runs within 5% of the best measured one on at least 90%
of the layers.

Two steps, on two machines:

  1. Here (no GPU; Debian's torch 1.13 CPU, onnx, the built hgpc):
       /usr/bin/python3 bench/layers.py --choose --hgpc build/bin/hgpc
     extracts the layers, asks `hgpc plan` for the width of each on a one-conv model and writes
     the data file bench/layer_widths_h200.json (commit it). No timing.
  2. On the GPU machine (torch 2.11), only measurement:
       python3 bench/layers.py --out $OUT          (tests/gpu/device_run.sh layers)
     writes layers.md (the table and "within 5% of best on X of Y layers (Z%)"); the per-layer
     json lines go to stdout. --dry-run does everything but the CUDA timing (runs anywhere): it
     samples the layers, builds every variant, checks on the CPU that the split variants compute
     what the whole batch does (small layers), and writes layers.md with SYNTHETIC times.

What one variant times (one CUDA graph, replayed; median of 5 samples of a few dozen replays,
like the anchor's gtime; fp32 storage, TF32 on, cudnn.benchmark on):
  forward : the batch cut in k_fwd sub-batches, each convolution on its own stream (fork/join)
  backward: the data gradient cut in k_dgrad sub-batches on k_dgrad streams, and the filter
            gradient of the whole batch on one more stream, concurrently (fork/join).
The analyzer splits Conv and ConvBwdData (its width per phase) and never ConvBwdFilter, whose
sub-batches would accumulate into one result one after another (accumulate=1); the stream
schedule runs the filter gradient beside the data gradient. --wgrad split times that
accumulating form instead (k slices in a row on one stream; PyTorch has no beta=1, so each slice
after the first pays an extra add kernel). Width k means k_fwd = k_dgrad = k; where hgpc chose
different widths for the two phases, that mixed variant is timed too.

The chosen width is what `hgpc plan --target h200 --max-streams 8 --no-pipeline` prints for the
Conv and ConvBwdData steps of a one-conv training model (x -> Add(learned shift) -> Conv ->
GlobalAveragePool -> Flatten, cross-entropy): the shift makes the conv's input a transient tensor
that needs a data gradient, as for any layer but a network's first (plan inputs are never
sliced). --max-streams 8 lets it choose among all four measured widths (the compile default of 4
streams caps it at 4); --no-pipeline isolates the intra-layer split (with the pipeline on, the
analyzer's width becomes a micro-batch depth over the conv and its neighbours). The data file
also records the choice under the compile defaults (4 streams, pipeline on) as `default`.
"""
import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

from layer_choice import QUERY, choose, one_conv_onnx, plan_widths  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "layer_widths_h200.json")
ANCHORS = os.path.join(HERE, "..", "..", "shared", "anchors", "conv_concurrency.py")
WIDTHS = (1, 2, 4, 8)
def out_hw(layer):
    (sh, sw), (ph, pw), (dh, dw) = layer["stride"], layer["pad"], layer["dilation"]
    return ((layer["H"] + 2 * ph - dh * (layer["R"] - 1) - 1) // sh + 1,
            (layer["W"] + 2 * pw - dw * (layer["S"] - 1) - 1) // sw + 1)


def macs(layer):
    ho, wo = out_hw(layer)
    return layer["N"] * layer["K"] * ho * wo * layer["C"] // layer["groups"] * layer["R"] * layer["S"]


def shape_text(l):
    def pair(v):
        return str(v[0]) if v[0] == v[1] else "%dx%d" % tuple(v)
    s = "N%d C%d %dx%d K%d %dx%d" % (l["N"], l["C"], l["H"], l["W"], l["K"], l["R"], l["S"])
    s += " s%s p%s" % (pair(l["stride"]), pair(l["pad"]))
    if l["groups"] != 1:
        s += " g%d" % l["groups"]
    if l["dilation"] != [1, 1]:
        s += " d%s" % pair(l["dilation"])
    return s


# ---------------------------------------------------------------------------------------------
# Which layers are timed.

def sample(layers, cap):
    """All anchor layers, then the zoo's layers up to `cap` in all: each case gets a share of the
    rest proportional to its distinct layers (at least 2, or all it has), picked evenly spaced
    in network order. Deterministic: the same data file gives the same list."""
    anchors = [l for l in layers if l["source"] == "anchor"]
    cases = {}
    for l in layers:
        if l["source"] == "zoo":
            cases.setdefault(l["case"], []).append(l)
    total = sum(len(v) for v in cases.values())
    room = cap - len(anchors)
    if cap <= 0 or total <= room:
        return list(layers)
    room = max(room, 0)
    least = min(2, room // max(1, len(cases)))
    quota = {c: min(len(v), least) for c, v in cases.items()}
    left = room - sum(quota.values())
    if left > 0:
        # Largest remainder over what each case has beyond its minimum.
        extra = {c: len(v) - quota[c] for c, v in cases.items()}
        pool = sum(extra.values())
        exact = {c: left * e / pool for c, e in extra.items()}
        add = {c: int(x) for c, x in exact.items()}
        for c in sorted(exact, key=lambda c: (add[c] - exact[c], c))[:left - sum(add.values())]:
            add[c] += 1
        for c in quota:
            quota[c] += min(add[c], extra[c])
    picked = []
    for c, v in cases.items():
        q = quota[c]
        picked += [v[int((i + 0.5) * len(v) / q)] for i in range(q)] if q else []
    return anchors + picked


# ---------------------------------------------------------------------------------------------
# Step 2 (GPU machine): the variants and their timing.

class Layer:
    """The tensors of one layer and the functions a variant runs."""

    def __init__(self, torch, l, dev, streams):
        self.t, self.l, self.streams = torch, l, streams
        g = torch.Generator(device="cpu").manual_seed(0)
        self.x = torch.randn(l["N"], l["C"], l["H"], l["W"], generator=g).to(dev)
        self.w = (torch.randn(l["K"], l["C"] // l["groups"], l["R"], l["S"], generator=g) * 0.05).to(dev)
        ho, wo = out_hw(l)
        self.dy = torch.randn(l["N"], l["K"], ho, wo, generator=g).to(dev)
        self.args = (l["stride"], l["pad"], l["dilation"], False, [0, 0], l["groups"])

    def fwd(self, x):
        l = self.l
        return self.t.nn.functional.conv2d(x, self.w, None, l["stride"], l["pad"], l["dilation"],
                                           l["groups"])

    def bwd(self, dy, x, mask):
        return self.t.ops.aten.convolution_backward(dy, x, self.w, None, *self.args, mask)

    def rows(self, t, k, i):
        n = t.shape[0] // k
        return t[i * n:(i + 1) * n]

    def on(self, i):
        return self.t.cuda.stream(self.streams[i]) if self.streams else contextlib.nullcontext()

    def fork(self, n):
        if self.streams:
            cur = self.t.cuda.current_stream()
            for s in self.streams[:n]:
                s.wait_stream(cur)

    def join(self, n):
        if self.streams:
            cur = self.t.cuda.current_stream()
            for s in self.streams[:n]:
                cur.wait_stream(s)

    def variant(self, kf, kd, wgrad, phases):
        """The function one graph captures; it returns what it computed (for the CPU check)."""
        def run():
            out = {}
            if "fwd" in phases:
                self.fork(kf)
                ys = []
                for i in range(kf):
                    with self.on(i):
                        ys.append(self.fwd(self.rows(self.x, kf, i)))
                self.join(kf)
                out["fwd"] = ys
            if "dgrad" in phases or "wgrad" in phases:
                nd = kd if "dgrad" in phases else 0
                nw = 1 if "wgrad" in phases else 0
                self.fork(nd + nw)
                dxs = []
                for i in range(nd):
                    with self.on(i):
                        dxs.append(self.bwd(self.rows(self.dy, kd, i), self.rows(self.x, kd, i),
                                            [True, False, False])[0])
                if nw:
                    with self.on(nd):
                        if wgrad == "whole":
                            gw = self.bwd(self.dy, self.x, [False, True, False])[1]
                        else:  # k accumulating slices in a row (the forced --split-width form)
                            gw = None
                            for i in range(kd):
                                part = self.bwd(self.rows(self.dy, kd, i), self.rows(self.x, kd, i),
                                                [False, True, False])[1]
                                gw = part if gw is None else gw.add_(part)
                        out["wgrad"] = gw
                self.join(nd + nw)
                out["dgrad"] = dxs
            return out
        return run


def gtime(torch, fn, target_ms=4.0, samples=5):
    """Median ms per replay of a CUDA graph of `fn` (the anchor's gtime, with the replays per
    sample chosen from a first estimate: 10 to 50)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()

    def timed(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            g.replay()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / reps

    for _ in range(3):
        g.replay()
    est = timed(3)
    reps = max(10, min(50, int(math.ceil(target_ms / max(est, 1e-3)))))
    return statistics.median(timed(reps) for _ in range(samples))


def synthetic_ms(l, kf, kd):
    """Dry run only: a made-up time so that the table and summary logic runs. Not a measurement."""
    base = 0.01 + macs(l) * 6 / 400e12 * 1e3
    def cost(k, salt):
        h = int(hashlib.sha1(("%s|%d|%s" % (l["name"], k, salt)).encode()).hexdigest()[:8], 16)
        return 1 + 0.15 * math.log2(k) * ((h % 1000) / 500.0 - 0.6)
    return base * (cost(kf, "f") + 2 * cost(kd, "d")) / 3


def check_cpu(torch, L, kf, kd, wgrad, ref):
    """The variant computes what the whole batch does (float reassociation aside)."""
    got = L.variant(kf, kd, wgrad, ("fwd", "dgrad", "wgrad"))()
    y, dx = torch.cat(got["fwd"]), torch.cat(got["dgrad"])
    for name, a, b in (("fwd", y, ref[0]), ("dgrad", dx, ref[1]), ("wgrad", got["wgrad"], ref[2])):
        err = float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))
        if a.shape != b.shape or err > 1e-4:
            raise AssertionError("%s k=%d/%d %s: relative error %.2e" % (L.l["name"], kf, kd, name, err))


def measure(args):
    import torch
    data = json.load(open(args.data))
    layers = sample(data["layers"], args.max_layers)
    print("layers: %d in %s, %d timed (--max-layers %d: all %d anchor layers, the zoo's sampled "
          "per case)" % (len(data["layers"]), os.path.relpath(args.data), len(layers),
                         args.max_layers, sum(l["source"] == "anchor" for l in layers)), flush=True)
    phases = tuple(args.phases.split(","))
    dev = "cpu" if args.dry_run else "cuda"
    if not args.dry_run:
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = True
        streams = [torch.cuda.Stream() for _ in range(max(WIDTHS) + 1)]
        env = "%s, torch %s, cuDNN %s" % (torch.cuda.get_device_name(0), torch.__version__,
                                          torch.backends.cudnn.version())
    else:
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        streams = None
        env = "DRY RUN on %s, torch %s (CPU): synthetic times, not measurements" % (
            platform.node(), torch.__version__)
    print(env, flush=True)
    start = time.time()
    rows, checked, skipped = [], 0, []
    for l in layers:
        if time.time() - start > args.time_limit:
            skipped.append(l["name"])
            continue
        ch = l["chosen"]
        variants = [(k, k) for k in WIDTHS if l["N"] % k == 0]
        if (ch["fwd"], ch["dgrad"]) not in variants:
            variants.append((ch["fwd"], ch["dgrad"]))
        L = Layer(torch, l, dev, streams)
        ms = {}
        if args.dry_run:
            for kf, kd in variants:  # every variant builds and runs its Python on the CPU
                if macs(l) <= args.check_macs:
                    if not ms:
                        ref = (L.fwd(L.x), *L.bwd(L.dy, L.x, [True, True, False])[:2])
                    check_cpu(torch, L, kf, kd, args.wgrad, ref)
                ms[(kf, kd)] = synthetic_ms(l, kf, kd)
            checked += macs(l) <= args.check_macs
        else:
            for kf, kd in variants:
                ms[(kf, kd)] = gtime(torch, L.variant(kf, kd, args.wgrad, phases))
            del L
            torch.cuda.empty_cache()
        row = dict(layer=l["name"], source=l["source"], shape=shape_text(l),
                   ms={"%d" % kf if kf == kd else "f%d/d%d" % (kf, kd): round(v, 5)
                       for (kf, kd), v in ms.items()},
                   chosen=ch, default=l.get("default"))
        uniform = {kf: v for (kf, kd), v in ms.items() if kf == kd}
        row["best"] = min(uniform, key=uniform.get)
        row["chosen_ms"] = ms[(ch["fwd"], ch["dgrad"])]
        row["chosen_ms"] = round(row["chosen_ms"], 5)
        row["ratio"] = round(ms[(ch["fwd"], ch["dgrad"])] / uniform[row["best"]], 4)
        row["ok"] = row["ratio"] <= 1.05
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.dry_run:
        print("dry run: split variants checked against the whole batch on the CPU on %d of %d "
              "layers (those of at most %.0e MACs); every variant's function ran" % (
                  checked, len(rows), args.check_macs))
    md = report(rows, env, args, len(data["layers"]), skipped)
    os.makedirs(args.out, exist_ok=True)
    open(os.path.join(args.out, "layers.md"), "w").write(md)
    good = sum(r["ok"] for r in rows)
    print("within 5%% of best on %d of %d layers (%.0f%%)" % (good, len(rows), 100.0 * good / max(1, len(rows))))
    return 0


def report(rows, env, args, n_data, skipped):
    def k_text(c):
        return "%d" % c["fwd"] if c["fwd"] == c["dgrad"] else "f%d/d%d" % (c["fwd"], c["dgrad"])
    lines = ["# Split width per conv layer: measured against hgpc's choice", "",
             env + ".", "",
             "Per variant: one CUDA graph of the layer's %s (phases %s; filter gradient %s), "
             "median ms per replay. k = sub-batches, each on its own stream. chosen = `%s` "
             "(fwd/dgrad where they differ), from %s." % (
                 "training work", args.phases, args.wgrad,
                 "hgpc plan --batch N " + " ".join(QUERY), os.path.basename(args.data)), "",
             "| layer | shape | k=1 ms | k=2 ms | k=4 ms | k=8 ms | best k | chosen k | chosen ms | chosen/best | within 5% |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [("%.4f" % r["ms"][str(k)]) if str(k) in r["ms"] else "-" for k in WIDTHS]
        lines.append("| %s | %s | %s | %d | %s | %.4f | %.3f | %s |" % (
            r["layer"], r["shape"], " | ".join(cells), r["best"], k_text(r["chosen"]),
            r["chosen_ms"], r["ratio"], "yes" if r["ok"] else "**no**"))
    lines.append("")
    good = sum(r["ok"] for r in rows)
    for src in ("anchor", "zoo"):
        sub = [r for r in rows if r["source"] == src]
        if sub:
            lines.append("- %s layers: within 5%% on %d of %d" % (src, sum(r["ok"] for r in sub), len(sub)))
    split = [r for r in rows if max(r["chosen"].values()) > 1]
    lines.append("- layers hgpc splits: within 5%% on %d of %d; layers it leaves whole: %d of %d" % (
        sum(r["ok"] for r in split), len(split), good - sum(r["ok"] for r in split),
        len(rows) - len(split)))
    dist = {}
    for r in rows:
        dist[k_text(r["chosen"])] = dist.get(k_text(r["chosen"]), 0) + 1
    best = {}
    for r in rows:
        best[r["best"]] = best.get(r["best"], 0) + 1
    lines.append("- chosen widths: " + ", ".join("k=%s: %d" % (k, dist[k]) for k in sorted(dist, key=lambda s: (len(s), s))))
    lines.append("- best measured widths: " + ", ".join("k=%d: %d" % (k, best[k]) for k in sorted(best)))
    lines.append("- %d layers timed of the %d in the data file (--max-layers %d)" % (
        len(rows), n_data, args.max_layers))
    if skipped:
        lines.append("- NOT TIMED (--time-limit %g s reached): %s" % (args.time_limit, ", ".join(skipped)))
    lines += ["", "within 5%% of best on %d of %d layers (%.0f%%)" % (good, len(rows), 100.0 * good / max(1, len(rows)))]
    return "\n".join(lines) + "\n"


def score(args):
    """Re-plans every layer of a measurement (the json lines of an earlier GPU run) with this
    hgpc and counts the layers whose chosen width runs within 5% of the best measured one. A
    choice the run did not time (a mixed fwd/dgrad width it had no reason to time) is a miss.
    Exit 1 below --min-fraction: the CTest split_width_layers."""
    by_name = {l["name"]: l for l in json.load(open(args.data))["layers"]}
    rows = [json.loads(line) for line in open(args.score) if line.startswith("{")]
    good = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(rows):
            l = by_name[r["layer"]]
            path = os.path.join(tmp, "l%d.onnx" % i)
            one_conv_onnx(l, path)
            w = plan_widths(args.hgpc, path, l["N"], QUERY)
            kf, kd = w["fwd"], w["dgrad"]
            ms = r["ms"].get(str(kf) if kf == kd else "f%d/d%d" % (kf, kd))
            best = min(v for k, v in r["ms"].items() if "/" not in k)
            ok = ms is not None and ms <= 1.05 * best
            good += ok
            print("%-42s f%d/d%d %s ms, best %.4f ms (k=%s): %s"
                  % (r["layer"], kf, kd, "%.4f" % ms if ms else "-", best, r["best"],
                     "within 5%" if ok else "MISSED" if ms else "MISSED (not measured)"))
    frac = good / max(len(rows), 1)
    print("within 5%% of best on %d of %d layers (%.0f%%)" % (good, len(rows), 100 * frac))
    return 0 if frac >= args.min_fraction else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--choose", action="store_true",
                    help="build machine: extract the layers, ask hgpc for widths, write --data")
    ap.add_argument("--hgpc", default="build/bin/hgpc")
    ap.add_argument("--anchors", default=ANCHORS, help="conv_concurrency.py (its layer list)")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default=".")
    ap.add_argument("--max-layers", type=int, default=60,
                    help="cap on timed layers (0: all); every anchor layer is kept")
    ap.add_argument("--time-limit", type=float, default=170,
                    help="seconds: later layers are listed as not timed")
    ap.add_argument("--phases", default="fwd,dgrad,wgrad")
    ap.add_argument("--wgrad", choices=("whole", "split"), default="whole",
                    help="whole: as the analyzer leaves it; split: k accumulating slices in a row")
    ap.add_argument("--dry-run", action="store_true", help="everything but the CUDA timing")
    ap.add_argument("--check-macs", type=float, default=4e8,
                    help="dry run: check the split math on the CPU for layers up to this many MACs")
    ap.add_argument("--score", metavar="MEASURED",
                    help="no GPU: re-plan the layers of an earlier run (its json lines, e.g. "
                         "bench/layers_measured_h200.jsonl) and count the widths within 5%% of best")
    ap.add_argument("--min-fraction", type=float, default=0.9)
    args = ap.parse_args()
    if args.choose:
        return choose(args)
    if args.score:
        return score(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
