#!/usr/bin/python3
"""Exports every torchvision classification CNN (all but the transformer families) in training
mode at opset 17 with Debian's torch, and checks that hgpc loads, verifies and prints each one
whose export succeeds (`hgpc compile --forward-only --emit ir`). Models with stochastic depth
(EfficientNet, ConvNeXt) are exported with stochastic_depth_prob=0, which torch 1.13 needs. Prints one line per model and a
summary; exits 1 if an exported model fails to load.

    HGPC=build/bin/hgpc /usr/bin/python3 tests/frontend/sweep_torchvision.py [--size 64]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torchvision.models as tvm

TRANSFORMERS = ("vit_", "swin_", "maxvit")


def classification_models():
    names = sorted(n for n, f in vars(tvm).items()
                   if callable(f) and n[0].islower() and not n.startswith("get_")
                   and n not in ("list_models", "get_model", "get_weight", "get_model_weights"))
    out = []
    for n in names:
        if n.startswith(TRANSFORMERS):
            continue
        try:
            m = getattr(tvm, n)(num_classes=10)
        except Exception:  # noqa: BLE001 - not a classification constructor
            continue
        if isinstance(m, torch.nn.Module):
            out.append(n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--models", help="comma-separated subset")
    args = ap.parse_args()
    hgpc = os.environ.get("HGPC", "build/bin/hgpc")
    warnings.filterwarnings("ignore")
    names = args.models.split(",") if args.models else classification_models()
    loaded, export_failed, load_failed = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            torch.manual_seed(0)
            size = 299 if n == "inception_v3" else args.size
            # torch 1.13 cannot export stochastic depth's training-mode bernoulli_ (EfficientNet,
            # ConvNeXt): export with it off, as the parity tests do.
            try:
                model = getattr(tvm, n)(num_classes=10, stochastic_depth_prob=0.0).train()
            except TypeError:
                model = getattr(tvm, n)(num_classes=10).train()
            path = os.path.join(tmp, n + ".onnx")
            try:
                torch.onnx.export(model, torch.zeros(2, 3, size, size), path,
                                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                                  opset_version=17)
            except Exception as e:  # noqa: BLE001
                export_failed.append((n, str(e).splitlines()[0][:120]))
                print("%-22s export failed: %s" % (n, export_failed[-1][1]), flush=True)
                continue
            p = subprocess.run([hgpc, "compile", path, "--forward-only", "--emit", "ir", "--batch", "2"],
                               capture_output=True, text=True)
            if p.returncode == 0:
                loaded.append(n)
                print("%-22s loads (%d IR lines)" % (n, p.stdout.count("\n")), flush=True)
            else:
                load_failed.append((n, p.stderr.strip()[:300]))
                print("%-22s FAILS: %s" % (n, load_failed[-1][1]), flush=True)
            os.remove(path)
    print("\n%d load: %s" % (len(loaded), " ".join(loaded)))
    print("%d do not export at opset 17 in training mode: %s" % (len(export_failed), " ".join(n for n, _ in export_failed)))
    print("%d exported but do not load: %s" % (len(load_failed), " ".join(n for n, _ in load_failed)))
    sys.exit(1 if load_failed else 0)


if __name__ == "__main__":
    main()
