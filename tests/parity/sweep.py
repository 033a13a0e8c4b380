#!/usr/bin/python3
"""The torchvision family sweep (issue 23's "done when"): every classification CNN family,
exported by this machine's torch in training mode at a small size, compiled by hgpc, trained 3
steps on the CPU backend and judged against PyTorch float64 by tests/parity/parity.py (judge.py's
method: each tensor's update and each step's loss within a multiple of PyTorch float32's own
distance from float64).

Each model runs as its own `parity.py --model M --optimizer sgd` (SGD with Nesterov momentum and
weight decay), and the sweep prints one line per model:

    model                 loads  trains  matches  worst   seconds
    resnet18              yes    yes     yes      0.412   31

`loads` is `hgpc compile` succeeding on the export, `trains` the generated executable running
its steps, `matches` every bound met (worst: the largest ratio to an allowance, at most 1), or
`known` for a case parity.py lists in EXPECTED_FAILURES with its measured reason.
A model whose export fails says so in place of the three. Exits 1 when any model misses.
CTest runs the whole sweep as `parity_sweep` (label slow: `make test-slow`); the models that
tests/CMakeLists.txt names one by one (parity_<model>_<optimizer>) also run there, with SGD and
AdamW.

    /usr/bin/python3 tests/parity/sweep.py --build build [--models resnet18,regnet_y_400mf]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# One or more models per torchvision family, in the order. parity.py's MODELS defines
# each (constructor, input size, batch).
FAMILIES = [
    ("ResNet", "resnet18"), ("ResNeXt", "resnext_reduced"), ("Wide-ResNet", "wide_resnet_reduced"),
    ("VGG", "vgg11"), ("AlexNet", "alexnet"), ("SqueezeNet", "squeezenet1_1"),
    ("DenseNet", "densenet121"), ("GoogLeNet", "googlenet"), ("Inception-v3", "inception_v3"),
    ("MobileNet-v2", "mobilenet_v2"), ("MobileNet-v3", "mobilenet_v3_small"),
    ("MobileNet-v3", "mobilenet_v3_large"), ("MNASNet", "mnasnet0_5"),
    ("ShuffleNet-v2", "shufflenet_v2_x0_5"), ("RegNet", "regnet_x_400mf"),
    ("RegNet", "regnet_y_400mf"), ("EfficientNet", "efficientnet_b0"),
    ("EfficientNet-v2", "efficientnet_v2_s"), ("ConvNeXt", "convnext_reduced"),
]


def classify(p):
    """(loads, trains, matches, worst, why) from one parity.py run."""
    err = p.stderr.strip()
    report = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
    if "hgpc compile failed" in err:
        return "no", "-", "-", None, err.splitlines()[-1][:160]
    if "the hgpc executable failed" in err:
        return "yes", "no", "-", None, err.splitlines()[-1][:160]
    if report is None:
        # The export (or PyTorch's own training) failed before hgpc ran.
        return "-", "-", "-", None, "no report: " + (err.splitlines()[-1][:160] if err else "exit %d" % p.returncode)
    worst = report.get("max_ratio")
    if p.returncode == 0 and "expected failure (EXPECTED_FAILURES)" in err:
        # Listed in parity.py's EXPECTED_FAILURES: it misses, and the reason is written there.
        return "yes", "yes", "known", worst, err.splitlines()[0][:160]
    if p.returncode == 0:
        return "yes", "yes", "yes", worst, ""
    return "yes", "yes", "no", worst, err.splitlines()[0][:160] if err else "exit %d" % p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("HGPC_BUILD", "build"))
    ap.add_argument("--models", help="comma-separated parity.py models (default: every family)")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--json", help="also write the rows to this file, one JSON object a line")
    args = ap.parse_args()
    family = {m: f for f, m in FAMILIES}
    models = args.models.split(",") if args.models else [m for _, m in FAMILIES]
    print("%-14s %-20s %-6s %-7s %-8s %-7s %s" % ("family", "model", "loads", "trains", "matches",
                                                   "worst", "seconds"), flush=True)
    rows, missed = [], 0
    for m in models:
        t0 = time.time()
        p = subprocess.run([sys.executable, "-W", "ignore", os.path.join(HERE, "parity.py"),
                            "--model", m, "--optimizer", args.optimizer, "--build", args.build],
                           capture_output=True, text=True)
        loads, trains, matches, worst, why = classify(p)
        secs = time.time() - t0
        row = dict(family=family.get(m, "?"), model=m, loads=loads, trains=trains,
                   matches=matches, worst=worst, seconds=round(secs), why=why)
        rows.append(row)
        missed += matches not in ("yes", "known")
        print("%-14s %-20s %-6s %-7s %-8s %-7s %-7d %s"
              % (row["family"], m, loads, trains, matches,
                 "-" if worst is None else "%.3f" % worst, secs, why), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    known = sum(r["matches"] == "known" for r in rows)
    print("%d of %d models load, train and match (%d of them known misses, parity.py's "
          "EXPECTED_FAILURES)" % (len(rows) - missed, len(rows), known))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
