#!/usr/bin/env bash
# Data-parallel equivalence (label gpu; docs/distributed.md): 5 steps on 2 GPUs at per-GPU batch B
# must give the losses and weights of 1 GPU at batch 2B, within float reassociation: the ranks
# read the two halves of each global batch, and the mean of two half-batch gradient means is the
# full-batch mean. Two cases: LeNet-5 (no BatchNorm), and ResNet-18 28x28 with --sync-bn (BN
# statistics over the global batch). Both runs are fp32 (no TF32) and --deterministic.
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
python3 "$here/samples/make_resnet18_28.py" "$work/resnet18_28.onnx" > /dev/null 2>&1 || exit 1
failed=0
check() { # name model per-gpu-batch weight-tolerance [flags for the 2-GPU compile]
  local name=$1 model=$2 b=$3 tol=$4
  local opts=(--optimizer sgd --lr 0.05 --momentum 0.9 --precision fp32 --metrics-every 1)
  "$hgpc" compile "$model" -o "$work/$name.one" --batch $((2 * b)) "${opts[@]}" >/dev/null || return 1
  "$hgpc" compile "$model" -o "$work/$name.two" --batch "$b" --ranks 2 "${opts[@]}" "${@:5}" >/dev/null || return 1
  local run=(--data "fashion-mnist:$fm" --steps 5 --deterministic --device cuda --progress none)
  "$work/$name.one" "${run[@]}" --metrics "$work/$name.one.jsonl" --save "$work/$name.one.onnx" || return 1
  "$work/$name.two" "${run[@]}" --gpus 2 --metrics "$work/$name.two.jsonl" --save "$work/$name.two.onnx" || return 1
  python3 - "$work/$name" "$tol" <<'PY'
import json, sys
import numpy as np, onnx, onnx.numpy_helper as nh
w, tol = sys.argv[1], float(sys.argv[2])
loss = {k: [json.loads(l)["loss"] for l in open(f"{w}.{k}.jsonl") if '"eval"' not in l] for k in ("one", "two")}
print(w.rsplit("/", 1)[1], "losses 1 GPU x 2B:", loss["one"]); print("  losses 2 GPUs x B:", loss["two"])
ok = len(loss["one"]) == len(loss["two"]) == 5
for a, b in zip(loss["one"], loss["two"]):
    ok &= abs(a - b) <= 1e-4 * max(1.0, abs(a))
wa, wb = ({t.name: nh.to_array(t) for t in onnx.load(f"{w}.{k}.onnx").graph.initializer} for k in ("one", "two"))
diff = {k: float(np.abs(wa[k] - wb[k]).max() / max(np.abs(wa[k]).max(), 1e-12)) for k in wa}
worst = max(diff, key=diff.get)
print("  max relative weight difference after 5 steps: %.2e (%s); bound %.0e" % (diff[worst], worst, tol))
ok &= diff[worst] <= tol
print("  ", "PASSED" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
}
check lenet5 "$here/samples/lenet5.onnx" 32 1e-4 || failed=1
check resnet18_syncbn "$work/resnet18_28.onnx" 16 1e-3 --sync-bn || failed=1
echo "dp equivalence: $([[ $failed == 0 ]] && echo PASSED || echo FAILED)"
exit $failed
