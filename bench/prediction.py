#!/usr/bin/python3
"""The cost model against measurement: predicted iteration time (`hgpc plan`) for every benchmark
case, next to the hgpc step time a GPU run measured (a bench.md table), and the mean absolute
percentage error. The prediction is for the plan the executable ran: the scheduled one (streams,
splits, pipeline), or with --single-stream the plain one-stream plan. Runs anywhere (no GPU): the models are exported with this
machine's torch.

    /usr/bin/python3 bench/prediction.py --bench-md docs/benchmarks.md --hgpc build/bin/hgpc
"""
import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(__file__))
from models import CASES, make  # noqa: E402


def measured(path):
    """hgpc ms per case from the first benchmark table in a bench.md."""
    out = {}
    for line in open(path):
        m = re.match(r"\| (\S+) b(\d+) \| ([\d.]+) \|", line)
        if m and (m.group(1), int(m.group(2))) not in out:
            out[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-md", default="docs/benchmarks.md")
    ap.add_argument("--hgpc", default="build/bin/hgpc")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--single-stream", action="store_true",
                    help="predict the plain plan (--max-streams 1 --no-split --no-pipeline)")
    args = ap.parse_args()
    meas = measured(args.bench_md)
    work = tempfile.mkdtemp(prefix="hgpc-predict-")
    atexit.register(shutil.rmtree, work, True)
    plain = ["--max-streams", "1", "--no-split", "--no-pipeline"] if args.single_stream else []
    errors = []
    print("| case | measured ms | predicted ms | error |\n|---|---|---|---|")
    for name, batch in CASES:
        if (name, batch) not in meas:
            continue
        path = os.path.join(work, name + ".onnx")
        if not os.path.exists(path):
            model, shape, _ = make(name)
            model.train()
            torch.onnx.export(model, torch.randn(2, *shape), path, opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["input"], dynamic_axes={"input": {0: "N"}})
        p = subprocess.run([args.hgpc, "plan", path, "--batch", str(batch), "--target", args.target,
                            *plain, "--optimizer", "sgd", "--lr", "0.01", "--momentum",
                            "0.9", "--weight-decay", "5e-4"], capture_output=True, text=True, check=True)
        m = re.search(r"predicted iteration ([\d.]+) ms on one stream; ([\d.]+) ms scheduled", p.stdout)
        pred = float(m.group(1) if args.single_stream else m.group(2))
        err = (pred - meas[(name, batch)]) / meas[(name, batch)]
        errors.append(abs(err))
        print("| %s b%d | %.3f | %.3f | %+.0f%% |" % (name, batch, meas[(name, batch)], pred, 100 * err))
    print("\nmean absolute percentage error: %.1f%% over %d cases" % (100 * sum(errors) / len(errors), len(errors)))


if __name__ == "__main__":
    main()
