#!/usr/bin/env bash
# Golden plans: `hgpc plan` on the bundled models and the public zoo models (export_zoo.py) for
# two targets and two batch sizes, diffed
# against tests/plans/*.txt. A change to the plan, the memory plan or the cost model shows up
# here and in review. Regenerate with:  HGP_UPDATE_GOLDEN=1 tests/plans/check.sh build/bin/hgpc
set -euo pipefail
hgpc=${1:?usage: check.sh HGPC}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -W ignore "$root/samples/make_resnet18_28.py" "$work/resnet18_28.onnx" >/dev/null 2>&1
opts=(--optimizer sgd --lr 0.01 --momentum 0.9 --weight-decay 5e-4)
failed=0
check() { # name model target batch [extra hgpc plan flags]
  local got="$work/$1.txt" want="$here/$1.txt"
  "$hgpc" plan "$2" --target "$3" --batch "$4" "${opts[@]}" "${@:5}" > "$got"
  if [[ ${HGP_UPDATE_GOLDEN:-} == 1 ]]; then
    cp "$got" "$want"
  elif ! diff -u "$want" "$got" > "$work/$1.diff"; then
    echo "golden plan $1 differs:"; head -40 "$work/$1.diff"; failed=1
  fi
}
# The public zoo models of the parity and GPU zoo tests, at their test input sizes.
zoo=(resnet18 mobilenet_v2 googlenet squeezenet1_1 densenet121)
/usr/bin/python3 -W ignore "$here/export_zoo.py" "$work" "${zoo[@]}" >/dev/null 2>&1
for target in h200 a100; do
  for batch in 32 128; do
    check "lenet5.$target.b$batch" "$root/samples/lenet5.onnx" $target $batch
    check "resnet18_28.$target.b$batch" "$work/resnet18_28.onnx" $target $batch
    for m in "${zoo[@]}"; do check "$m.$target.b$batch" "$work/$m.onnx" $target $batch; done
  done
done
# Batch slicing forced on every splittable step and run (BatchSlicing.h): the width and depth columns,
# the slices' order and what the schedule makes of them; and the plain single-stream plan.
check lenet5.h200.b32.split2x2 "$root/samples/lenet5.onnx" h200 32 --split-width 2 --pipeline-depth 2
check resnet18_28.h200.b32.split2x2 "$work/resnet18_28.onnx" h200 32 --split-width 2 --pipeline-depth 2
check lenet5.h200.b32.plain "$root/samples/lenet5.onnx" h200 32 --max-streams 1 --no-split --no-pipeline
# Data parallelism over 2 ranks (docs/distributed.md): the all-reduce buckets, their stream and
# predicted time; LeNet-5 with a small bucket cap, so that it has several buckets.
check "lenet5.h200.b32.ranks2" "$root/samples/lenet5.onnx" h200 32 --ranks 2 --bucket-mb 0.05
check "resnet18_28.h200.b32.ranks2" "$work/resnet18_28.onnx" h200 32 --ranks 2
# Mixed precision (docs/precision.md): 16-bit activations, the Casts, the bf16 peak rate and the
# halved activation memory; fp16 adds the loss-scale update.
check "lenet5.h200.b32.bf16" "$root/samples/lenet5.onnx" h200 32 --precision bf16
check "resnet18_28.h200.b32.bf16" "$work/resnet18_28.onnx" h200 32 --precision bf16
check "lenet5.h200.b32.fp16" "$root/samples/lenet5.onnx" h200 32 --precision fp16
# The DOT form draws the same schedule: one edge per reduced dependency, the events in red.
dot="$work/lenet5.dot"
"$hgpc" plan "$root/samples/lenet5.onnx" --target h200 --batch 32 "${opts[@]}" --emit dot > "$dot"
summary=$(grep '^streams' "$here/lenet5.h200.b32.txt")
events=$(sed -E 's/.*events ([0-9]+).*/\1/' <<< "$summary")
reduced=$(sed -E 's/.*, ([0-9]+) after transitive.*/\1/' <<< "$summary")
if [[ $(grep -c -- ' -> ' "$dot") != "$reduced" || $(grep -c 'color=red' "$dot") != "$events" ||
      $(head -1 "$dot") != 'digraph "lenet5" {' ]]; then
  echo "hgpc plan --emit dot disagrees with the text plan (edges $reduced, events $events)"; failed=1
fi
exit $failed
