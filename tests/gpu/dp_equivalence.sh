#!/usr/bin/env bash
# Data-parallel equivalence (label gpu; docs/distributed.md): LeNet-5 (no BatchNorm) trained 5 steps
# on 2 GPUs at per-GPU batch B must give the losses and weights of 1 GPU at batch 2B, within float
# reassociation: the ranks read the two halves of each global batch, and the averaged gradient of
# two half-batch means is the full-batch mean. Both runs are fp32 (no TF32) and --deterministic.
# Exit 77 (skip) with fewer than 2 GPUs.
#   tests/gpu/dp_equivalence.sh HGPC [FASHION_MNIST_DIR]
set -uo pipefail
hgpc=${1:?usage: dp_equivalence.sh HGPC [FASHION_MNIST_DIR]}
fm=${2:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")/../.." && pwd)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [[ ${gpus:-0} -lt 2 ]]; then echo "skipped: needs 2 GPUs, found ${gpus:-0}"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
B=32
opts=(--optimizer sgd --lr 0.05 --momentum 0.9 --precision fp32 --metrics-every 1)
"$hgpc" compile "$here/samples/lenet5.onnx" -o "$work/one" --batch $((2 * B)) "${opts[@]}" || exit 1
"$hgpc" compile "$here/samples/lenet5.onnx" -o "$work/two" --batch $B --ranks 2 "${opts[@]}" || exit 1
run=(--data "fashion-mnist:$fm" --steps 5 --deterministic --device cuda --progress none)
"$work/one" "${run[@]}" --metrics "$work/one.jsonl" --save "$work/one.onnx" || exit 1
"$work/two" "${run[@]}" --gpus 2 --metrics "$work/two.jsonl" --save "$work/two.onnx" || exit 1
/usr/bin/python3 - "$work" <<'PY'
import json, sys
import numpy as np, onnx, onnx.numpy_helper as nh
w = sys.argv[1]
loss = {k: [json.loads(l)["loss"] for l in open(f"{w}/{k}.jsonl") if '"eval"' not in l] for k in ("one", "two")}
print("losses 1 GPU x 64:", loss["one"]); print("losses 2 GPUs x 32:", loss["two"])
ok = len(loss["one"]) == len(loss["two"]) == 5
for a, b in zip(loss["one"], loss["two"]):
    ok &= abs(a - b) <= 1e-4 * max(1.0, abs(a))
wa, wb = ({t.name: nh.to_array(t) for t in onnx.load(f"{w}/{k}.onnx").graph.initializer} for k in ("one", "two"))
worst = max(float(np.abs(wa[k] - wb[k]).max() / max(np.abs(wa[k]).max(), 1e-12)) for k in wa)
print("max relative weight difference after 5 steps: %.2e" % worst)
ok &= worst <= 1e-4
print("dp equivalence:", "PASSED" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
