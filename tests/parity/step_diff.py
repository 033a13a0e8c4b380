#!/usr/bin/python3
"""Where two runs of one hgpc executable part: compares the tensor dumps of `--dump-tensors`
(runtime/runner/TensorDump.h) value by value, in the order the training program writes them.

A float32 step on two backends differs by rounding everywhere; a wrong executor shows as a step
whose operands agree to rounding while its result does not. For each step the table gives the
result's relative L2 distance between the runs (||a - b|| / ||b||, b the reference run) and the
largest of its operands', and their ratio (the step's amplification). The steps whose result is
off by more than --threshold while every operand is within --threshold / 10 are listed first:
those are the executors to read. Ill-conditioned steps amplify legitimately (BatchNorm over few
values of small variance, a subtraction that cancels), so a listed step is a lead, not a
verdict; ops/ tests decide.

    hgpc compile model.onnx -o m --batch 4 --no-buffer-reuse
    ./m --data synthetic --steps 1 --device cpu --dump-tensors cpu/
    ./m --data synthetic --steps 1 --device cuda --deterministic --dump-tensors cuda/
    /usr/bin/python3 tests/parity/step_diff.py cuda/ cpu/ [--threshold 1e-4] [--all]

Exits 1 when some step's result is off by more than --threshold with operands within a tenth of
it (a "jump"), 0 otherwise.
"""
import argparse
import os
import sys

import numpy as np

DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i64": np.int64,
          "i32": np.int32, "u8": np.uint8, "bool": np.uint8, "i8": np.int8}


def load_index(d):
    rows = {}
    with open(os.path.join(d, "index.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            r["id"], r["step"] = int(r["id"]), int(r["step"])
            r["inputs"] = [] if r["inputs"] == "-" else [int(x) for x in r["inputs"].split(",")]
            rows[r["id"]] = r
    return rows


def values(d, r):
    if r["dtype"] == "bf16":
        raw = np.fromfile(os.path.join(d, r["file"]), dtype=np.uint16).astype(np.uint32) << 16
        return raw.view(np.float32).astype(np.float64)
    dt = DTYPES.get(r["dtype"])
    if dt is None:
        return None
    return np.fromfile(os.path.join(d, r["file"]), dtype=dt).astype(np.float64)


def rel(a, b):
    if a is None or b is None or a.shape != b.shape:
        return None
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf") if not np.array_equal(np.isfinite(a), np.isfinite(b)) else 0.0
    nb = np.linalg.norm(b)
    d = np.linalg.norm(a - b)
    return float(d / nb) if nb > 0 else (0.0 if d == 0 else float("inf"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="the dump to judge (e.g. CUDA's)")
    ap.add_argument("reference", help="the reference dump (e.g. the CPU backend's)")
    ap.add_argument("--threshold", type=float, default=1e-4)
    ap.add_argument("--all", action="store_true", help="print every step, not only the leads")
    ap.add_argument("--top", type=int, default=25, help="steps with the largest amplification")
    args = ap.parse_args()
    ra, rb = load_index(args.run), load_index(args.reference)
    if set(ra) != set(rb) or any(ra[i]["name"] != rb[i]["name"] for i in ra):
        sys.exit("step_diff: the dumps are of different plans")
    dist = {i: rel(values(args.run, ra[i]), values(args.reference, rb[i])) for i in ra}
    # The tensors written before the step (parameters' initial values are read back after the
    # update, so a parameter written in place carries its update's distance).
    lines, jumps = [], []
    for i in sorted((i for i in ra if ra[i]["step"] >= 0), key=lambda i: (ra[i]["step"], i)):
        r = ra[i]
        d = dist[i]
        if d is None:
            continue
        ins = [dist[j] for j in r["inputs"] if j in dist and dist[j] is not None and j != i]
        worst_in = max(ins) if ins else 0.0
        amp = d / max(worst_in, 1e-9)
        row = (r["step"], r["op"], r["name"], r["shape"], d, worst_in, amp)
        lines.append(row)
        if d > args.threshold and worst_in <= args.threshold / 10:
            jumps.append(row)

    def show(title, rows):
        print(title)
        print("  %5s  %-22s %-48s %-18s %10s %10s %9s" % ("step", "op", "tensor", "shape",
                                                          "result", "operands", "amplif."))
        for s, op, name, shape, d, wi, amp in rows:
            print("  %5d  %-22s %-48s %-18s %10.3g %10.3g %9.3g" % (s, op, name[:48], shape[:18],
                                                                   d, wi, amp))
    if args.all:
        show("every step, in program order:", lines)
    show("jumps (result off by > %g, operands within %g), in program order:" %
         (args.threshold, args.threshold / 10), jumps)
    show("the %d largest amplifications:" % args.top,
         sorted(lines, key=lambda x: -x[6])[:args.top])
    return 1 if jumps else 0


if __name__ == "__main__":
    sys.exit(main())
