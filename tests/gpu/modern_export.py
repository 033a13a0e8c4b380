#!/usr/bin/env python3
"""The modern CNN families as a 2026 user exports them, on the GPU machine (device_run.sh stage
`modern`): EfficientNet-B0, EfficientNet-V2-S and ConvNeXt-Tiny with this machine's torch, each
with stochastic depth on (torchvision's defaults), through both exporters:

- `script`: the TorchScript exporter in training mode (`dynamo=False,
  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False`, opset 18), which writes
  stochastic depth as RandomUniformLike + Less + Cast;
- `dynamo`: the default exporter (`torch.onnx.export(model, (x,), f)` on torch 2.9 and later),
  with `training=TRAINING` where it accepts it, else on the model in train() mode.

Each export (at batch 2) is compiled with hgpc (`--batch 8`) and trained 3 steps on synthetic data on CUDA.
One JSON line per model and exporter; hgpc's warnings (an inference-mode export) are reported.
A run trains when the executable exits 0 and every step's loss it logs (--metrics) is finite.
Exits 1 when any export that torch wrote fails to compile or train.

With --families, every torchvision classification CNN family instead (issue 23's sweep,
tests/parity/sweep.py's FAMILIES, each model at the small size tests/parity/parity.py gives it),
through the TorchScript exporter in training mode only (the training-mode export; the dynamo
exporter has no training form).

    python3 tests/gpu/modern_export.py --hgpc $(command -v hgpc) [--models convnext_tiny]
    python3 tests/gpu/modern_export.py --hgpc $(command -v hgpc) --families
"""
import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import onnx
import onnx.numpy_helper
import torch
import torchvision.models as tvm

MODELS = ["efficientnet_b0", "efficientnet_v2_s", "convnext_tiny"]


def export(model, x, path, exporter):
    params = inspect.signature(torch.onnx.export).parameters
    if exporter == "script":
        kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  opset_version=18)
        if "dynamo" in params:
            kw["dynamo"] = False
        torch.onnx.export(model, (x,), path, **kw)
        return "training=TRAINING"
    kw = {}
    if "dynamo" in params:
        kw["dynamo"] = True
    try:
        torch.onnx.export(model, (x,), path, training=torch.onnx.TrainingMode.TRAINING, **kw)
        return "training=TRAINING"
    except TypeError:
        torch.onnx.export(model, (x,), path, **kw)
        return "model.train(), no training flag"


HERE = os.path.dirname(os.path.abspath(__file__))


def family_models():
    """(name, constructor, input shape) for each model of the sweep's families."""
    sys.path.insert(0, os.path.join(HERE, "..", "parity"))
    import parity  # noqa: E402 - tests/parity/parity.py: the models and their sizes
    import sweep  # noqa: E402
    return [(m, parity.MODELS[m][0], parity.MODELS[m][1]) for _, m in sweep.FAMILIES]


def train(exe, steps, work):
    """Runs `steps` steps on CUDA: (exit code, last lines, losses)."""
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    r = subprocess.run([exe, "--data", "synthetic:64", "--steps", str(steps), "--device", "cuda",
                        "--progress", "plain", "--metrics", metrics], capture_output=True, text=True)
    losses = []
    if os.path.exists(metrics):
        losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip() and "eval" not in l]
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()[-3:], losses


def producers(path, err, depth=6):
    """What feeds the node a compile error names ("node Op 'name'"), `depth` producers back:
    op types, attributes and constant shapes, so that an exporter's form can be read off the log."""
    import re
    m = re.search(r"node \w+ '([^']+)'", err)
    if not m:
        return []
    g = onnx.load(path).graph
    by_out = {o: n for n in g.node for o in n.output}
    inits = {i.name: list(i.dims) for i in g.initializer}
    node = next((n for n in g.node if n.name == m.group(1)), None)
    out, todo, seen = [], [(node, 0)] if node else [], set()
    while todo:
        n, d = todo.pop(0)
        if n.name in seen or d > depth:
            continue
        seen.add(n.name)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute
                 if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT)}
        if any(a.name == "value" for a in n.attribute):
            attrs["value_dims"] = list(next(a for a in n.attribute if a.name == "value").t.dims)
        out.append("%d %s %s(%s) %s" % (d, n.op_type, n.name, ",".join(
            "%s%s" % (i, inits.get(i, "")) for i in n.input), attrs))
        todo += [(by_out[i], d + 1) for i in n.input if i in by_out]
    return out[:40]


def write_skeleton(path, out):
    """The model at `path` with the data of every float initializer over 64 elements dropped (dims
    and type kept); integer initializers (indices, shapes) stay."""
    m = onnx.load(path)
    for t in m.graph.initializer:
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                           onnx.TensorProto.DOUBLE) and onnx.numpy_helper.to_array(t).size > 64:
            t.ClearField("raw_data")
            for f in ("float_data", "int64_data", "int32_data", "double_data"):
                t.ClearField(f)
            t.doc_string = "skeleton"
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    onnx.save(m, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=3)
    # Exported at batch 2 and compiled at --batch 8, as a user exports once and trains at any
    # batch: both exporters write stochastic depth's noise shape [N, 1, 1, 1] (and the dynamo
    # exporter its Reshape targets) as constants of the export's batch, which hgpc moves to
    # --batch (frontends/onnx/ImportContext.h, followBatch; before it the H200 run of 2026-12-02
    # failed with "[8,24,56,56] and [2,1,1,1] do not broadcast").
    ap.add_argument("--export-batch", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--precision", default="tf32", help="hgpc compile --precision (tf32, bf16, ...)")
    ap.add_argument("--skeletons", metavar="DIR",
                    help="write each export that fails to compile to DIR without its weights "
                    "(initializers keep their names, types and dims), so the exporter's form can be "
                    "read on a machine without this torch: tests/gpu/refill_skeleton.py fills them")
    ap.add_argument("--families", action="store_true",
                    help="every torchvision family at a small size (tests/parity/sweep.py), "
                    "TorchScript exporter only")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.families:
        cases = family_models()
        exporters = ("script",)
    else:
        cases = [(n, lambda n=n: getattr(tvm, n)(num_classes=10), (3, args.size, args.size))
                 for n in args.models.split(",")]
        exporters = ("script", "dynamo")
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for name, make, shape in cases:
            for exporter in exporters:
                row = dict(model=name, exporter=exporter, torch=torch.__version__)
                torch.manual_seed(0)
                model = make().train()
                path = os.path.join(work, "%s_%s.onnx" % (name, exporter))
                try:
                    row["export"] = export(model, torch.randn(args.export_batch, *shape), path,
                                           exporter)
                except Exception as e:  # noqa: BLE001 - the exporter's own failure is reported
                    row["export_failed"] = str(e).splitlines()[0][:200]
                    print(json.dumps(row), flush=True)
                    continue
                exe = os.path.join(work, "train")
                p = subprocess.run([args.hgpc, "compile", path, "-o", exe, "--batch", str(args.batch),
                                    "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9",
                                    "--precision", args.precision],
                                   capture_output=True, text=True)
                row["warnings"] = [l for l in p.stderr.splitlines() if "warning" in l]
                if p.returncode != 0:
                    row["compile_failed"] = "exit %d: %s" % (p.returncode, p.stderr.strip()[-400:])
                    row["producers"] = producers(path, p.stderr)
                    if args.skeletons:
                        write_skeleton(path, os.path.join(args.skeletons, os.path.basename(path)))
                    failed += 1
                    print(json.dumps(row), flush=True)
                    continue
                rc, tail, losses = train(exe, args.steps, work)
                row["train_exit"], row["train_tail"], row["losses"] = rc, tail, losses
                trained = rc == 0 and len(losses) == args.steps and all(map(math.isfinite, losses))
                row["trains"] = trained
                failed += not trained
                print(json.dumps(row), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
