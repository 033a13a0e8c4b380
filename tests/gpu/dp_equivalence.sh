#!/usr/bin/env bash
# Data-parallel equivalence (label gpu; docs/distributed.md): 5 steps on 2 GPUs at per-GPU batch B
# must give the losses and weights of 1 GPU at batch 2B, within float reassociation: the ranks
# read the two halves of each global batch, and the mean of two half-batch gradient means is the
# full-batch mean. Two cases: LeNet-5 (no BatchNorm), and ResNet-18 28x28 with --sync-bn (BN
# statistics over the global batch). Both runs are fp32 (no TF32) and --deterministic. Each
# tensor is judged on its own (tests/parity/judge.py), not by the worst tensor's bound.
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
# compare A B MODEL REFERENCE: runs A (1 GPU) and B (2 GPUs) judged per tensor by
# tests/parity/judge.py: B's update of every tensor (trained minus MODEL's initial value) and
# every loss against A's, the allowance 4x what reordering the sums alone does (REFERENCE: A's
# model and steps with its convolutions split into two sub-batches) plus 1e-4 of the update.
compare() {
  python3 - "$work" "$here/tests/parity" "$@" <<'PY'
import json, sys
import onnx, onnx.numpy_helper as nh
w, lib, a, b, model, ref = sys.argv[1:7]
sys.path.insert(0, lib)
import judge
def losses(k):
    return [json.loads(l)["loss"] for l in open(f"{w}/{k}.jsonl") if '"eval"' not in l]
def weights(path):
    return {t.name: nh.to_array(t).astype("float64") for t in onnx.load(path).graph.initializer}
wa, wb, wr = (weights(f"{w}/{k}.onnx") for k in (a, b, ref))
init = weights(model)
names = sorted(n for n in wa if n in init)
rows = judge.judge_state(wb, wa, wr, init, names)
loss_rows = judge.judge_losses(losses(b), losses(a), losses(ref))
print("%s vs %s (allowance from %s):" % (b, a, ref))
print("  losses", losses(a), losses(b))
print("  " + json.dumps(judge.summary(rows, loss_rows)))
bad = judge.failures(rows, loss_rows)
for f in bad[:10]:
    print("  " + f)
print("  ", "PASSED" if not bad else "FAILED")
sys.exit(1 if bad else 0)
PY
}
r18=$work/resnet18_28.onnx
l5=$here/samples/lenet5.onnx
# LeNet-5, no BatchNorm: 2 GPUs x 32 against 1 GPU x 64.
{ train l5.one "$l5" 5 -- --batch 64 --no-split --no-pipeline &&
  train l5.ref "$l5" 5 -- --batch 64 --split-width 2 --no-pipeline &&
  train l5.two "$l5" 5 --gpus 2 -- --batch 32 --ranks 2 --no-split --no-pipeline &&
  compare l5.one l5.two "$l5" l5.ref; } || failed=1
# ResNet-18 28x28 with --sync-bn: 2 GPUs x 16 against 1 GPU x 32, after one step and after
# five, each judged per tensor against the same 1-GPU model run with its convolutions split in
# two sub-batches (another summation order of the same math). A fixed bound did not fit this
# model: on the H200 (device call 4 of the fourth session) one step gave losses 2e-7 apart but
# 2.3e-2 on layer4.1.bn1.bias, a BN bias whose gradient is a sum that nearly cancels; the
# reference measures what reordering the sums alone does to each tensor.
{ train r18.one1 "$r18" 1 -- --batch 32 --no-split --no-pipeline &&
  train r18.ref1 "$r18" 1 -- --batch 32 --split-width 2 --no-pipeline &&
  train r18.two1 "$r18" 1 --gpus 2 -- --batch 16 --ranks 2 --sync-bn --no-split --no-pipeline &&
  compare r18.one1 r18.two1 "$r18" r18.ref1; } || failed=1
{ train r18.one "$r18" 5 -- --batch 32 --no-split --no-pipeline &&
  train r18.ref "$r18" 5 -- --batch 32 --split-width 2 --no-pipeline &&
  train r18.two "$r18" 5 --gpus 2 -- --batch 16 --ranks 2 --sync-bn --no-split --no-pipeline &&
  compare r18.one r18.two "$r18" r18.ref; } || failed=1
echo "dp equivalence: $([[ $failed == 0 ]] && echo PASSED || echo FAILED)"
exit $failed
