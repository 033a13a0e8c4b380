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
opts=(--optimizer sgd --lr 0.05 --momentum 0.9 --precision fp32 --metrics-every 1)
# train NAME MODEL STEPS [run flags] -- [compile flags]: compiles and trains NAME for STEPS steps.
train() {
  local name=$1 model=$2 steps=$3; shift 3
  local run=() comp=()
  while [[ $# -gt 0 && $1 != -- ]]; do run+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  comp=("$@")
  "$hgpc" compile "$model" -o "$work/$name" "${opts[@]}" "${comp[@]}" >/dev/null || return 1
  "$work/$name" --data "fashion-mnist:$fm" --steps "$steps" --deterministic --device cuda \
    --progress none "${run[@]}" --metrics "$work/$name.jsonl" --save "$work/$name.onnx" || return 1
}
# compare A B BOUND [REFERENCE]: losses and weights of runs A and B. With REFERENCE (a run equal
# to A up to summation order), the bound is max(BOUND, 10 x A-vs-REFERENCE): float reassociation
# measured on the same model, steps and learning rate.
compare() {
  python3 - "$work" "$@" <<'PY'
import json, sys
import numpy as np, onnx, onnx.numpy_helper as nh
w, a, b, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ref = sys.argv[5] if len(sys.argv) > 5 else None
def losses(k):
    return [json.loads(l)["loss"] for l in open(f"{w}/{k}.jsonl") if '"eval"' not in l]
def weights(k):
    return {t.name: nh.to_array(t) for t in onnx.load(f"{w}/{k}.onnx").graph.initializer}
def worst(x, y):
    d = {k: float(np.abs(x[k] - y[k]).max() / max(np.abs(x[k]).max(), 1e-12)) for k in x}
    k = max(d, key=d.get)
    return d[k], k
la, lb = losses(a), losses(b)
wa = weights(a)
print("%s vs %s" % (a, b)); print("  losses", la); print("  losses", lb)
loss_err = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(la, lb))
err, name = worst(wa, weights(b))
if ref:
    rerr, rname = worst(wa, weights(ref))
    print("  reassociation reference %s: max relative weight difference %.2e (%s)" % (ref, rerr, rname))
    tol = max(tol, 10 * rerr)
ok = len(la) == len(lb) and loss_err <= max(1e-4, tol) and err <= tol
print("  max loss difference %.2e; max relative weight difference %.2e (%s); bound %.1e" % (loss_err, err, name, tol))
print("  ", "PASSED" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
}
r18=$work/resnet18_28.onnx
# LeNet-5, no BatchNorm: 2 GPUs x 32 against 1 GPU x 64.
{ train l5.one "$here/samples/lenet5.onnx" 5 -- --batch 64 &&
  train l5.two "$here/samples/lenet5.onnx" 5 --gpus 2 -- --batch 32 --ranks 2 &&
  compare l5.one l5.two 1e-4; } || failed=1
# ResNet-18 28x28 with --sync-bn: 2 GPUs x 16 against 1 GPU x 32, after one step and after
# five, each against the same 1-GPU model run with its convolutions split in two sub-batches
# (another summation order of the same math). A fixed bound did not fit this model: on the H200
# (device call 4 of the fourth session) one step gave losses 2e-7 apart but 2.3e-2 on
# layer4.1.bn1.bias, a BN bias whose gradient is a sum that nearly cancels; the reference
# measures what reordering the sums alone does to such tensors.
{ train r18.one1 "$r18" 1 -- --batch 32 --no-split --no-pipeline &&
  train r18.ref1 "$r18" 1 -- --batch 32 --split-width 2 --no-pipeline &&
  train r18.two1 "$r18" 1 --gpus 2 -- --batch 16 --ranks 2 --sync-bn --no-split --no-pipeline &&
  compare r18.one1 r18.two1 1e-4 r18.ref1; } || failed=1
{ train r18.one "$r18" 5 -- --batch 32 --no-split --no-pipeline &&
  train r18.ref "$r18" 5 -- --batch 32 --split-width 2 --no-pipeline &&
  train r18.two "$r18" 5 --gpus 2 -- --batch 16 --ranks 2 --sync-bn --no-split --no-pipeline &&
  compare r18.one r18.two 1e-3 r18.ref; } || failed=1
echo "dp equivalence: $([[ $failed == 0 ]] && echo PASSED || echo FAILED)"
exit $failed
