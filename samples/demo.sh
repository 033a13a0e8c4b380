#!/usr/bin/env bash
# make demo: compile the bundled LeNet-5 and train it for one epoch on Fashion-MNIST on this
# machine (the CPU reference backend when there is no GPU), evaluate on the test set, and save
# the trained model.
set -euo pipefail
build=${1:-build}
data=/usr/share/datasets/fashion-mnist
out=$build/demo
mkdir -p "$out"
start=$(date +%s)
echo "== hgpc compile samples/lenet5.onnx -o $out/lenet5-train"
"$build/bin/hgpc" compile samples/lenet5.onnx -o "$out/lenet5-train" --batch 32 \
  --optimizer adam --lr 0.002 --schedule cosine --t-max 1875
echo "== $out/lenet5-train --data fashion-mnist:$data --eval fashion-mnist:$data --epochs 1"
"$out/lenet5-train" --data "fashion-mnist:$data" --eval "fashion-mnist:$data" --epochs 1 \
  --normalize 0.2860,0.3530 --metrics "$out/metrics.jsonl" --save "$out/lenet5-trained.onnx"
echo "== done in $(( $(date +%s) - start )) s; trained model: $out/lenet5-trained.onnx, metrics: $out/metrics.jsonl"

# make demo DEMO_IMAGES=1: the same model trained from a folder of JPEG files (docs/data.md):
# Fashion-MNIST written as an ImageFolder by scripts/make_image_data.py, 500 images per class.
if [[ ${DEMO_IMAGES:-0} == 1 ]]; then
  start=$(date +%s)
  echo "== scripts/make_image_data.py folder $out/fm-jpeg (and a PNG test folder)"
  /usr/bin/python3 scripts/make_image_data.py folder "$out/fm-jpeg" --per-class 500
  /usr/bin/python3 scripts/make_image_data.py folder "$out/fm-png-test" --split test --per-class 100 --format png
  "$build/bin/hgpc" compile samples/lenet5.onnx -o "$out/lenet5-images" --batch 32 \
    --optimizer adam --lr 0.002 >/dev/null
  echo "== $out/lenet5-images --data imagefolder:$out/fm-jpeg --eval imagefolder:$out/fm-png-test --epochs 2"
  "$out/lenet5-images" --data "imagefolder:$out/fm-jpeg" --eval "imagefolder:$out/fm-png-test" \
    --epochs 2 --normalize 0.2860,0.3530 --save "$out/lenet5-images.onnx"
  echo "== done in $(( $(date +%s) - start )) s; class list: $out/lenet5-images.classes.txt"
fi
