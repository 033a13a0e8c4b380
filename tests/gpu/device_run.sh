#!/usr/bin/env bash
# The GPU machine's part of the test and benchmark run (../shared/device/README.md).
#
# Here:   make; tests/gpu/device_run.sh --pack      (writes .gpu/: binaries, test data, datasets)
# There:  tests/gpu/device_run.sh [STAGES]          (needs .gpu carried; writes logs to $OUT)
#
# Stages, in order: info gpu conformance zoo determinism streams convergence bench dp (default: all);
# zoo16 (the zoo steps in bf16 and fp16) runs only when named.
# Also: profile (LeNet-5 with --profile/--trace, then hgpc plan --records; not in the default
# list, since it returns two more files). dp (data parallelism, docs/distributed.md) needs 2 GPUs
# (kind nvidia-h200-x2) and skips otherwise.
# BENCH_ARGS passes more options to bench/bench.py (e.g. --op-times, --cases alexnet:128).
# Few files go to $OUT (the device tool returns at most eight): logs and a summary.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"

if [[ ${1:-} == --pack ]]; then
  rm -rf .gpu/stage && mkdir -p .gpu/stage
  ../shared/device/pack.sh -o .gpu/stage/.dev build/bin/hgpc build/bin/hgpc-runner \
    build/bin/hgp_gpu_tests build/bin/hgp_conformance >/dev/null
  strip .gpu/stage/.dev/bin/*
  /usr/bin/python3 - <<'PY'
import os, shutil, onnx
ops = {"Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh",
       "HardSigmoid", "HardSwish", "MaxPool", "AveragePool", "GlobalAveragePool", "LRN", "Gemm",
       "MatMul", "Add", "Sub", "Mul", "Div", "Concat", "Split", "Slice", "Flatten", "Reshape",
       "Transpose", "Squeeze", "Unsqueeze", "Pad", "ReduceMean", "Dropout", "Identity", "Softmax",
       "LogSoftmax", "Constant", "Neg", "Sum", "ReduceSum", "Expand"}
for suite in ("node", "pytorch-converted"):
    root = "/usr/share/libonnx-testdata/data/" + suite
    for d in sorted(os.listdir(root)):
        m = onnx.load(os.path.join(root, d, "model.onnx"), load_external_data=False)
        if all(n.op_type in ops for n in m.graph.node):
            shutil.copytree(os.path.join(root, d), os.path.join(".gpu/stage/testdata", suite, d))
PY
  tar -C .gpu/stage -cJf .gpu/bundle.tar.xz .dev testdata
  mkdir -p .gpu/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*.gz .gpu/fashion-mnist/
  rm -rf .gpu/stage
  du -sh .gpu
  exit 0
fi

OUT=${OUT:-$here/.gpu/out}
mkdir -p "$OUT"
stages=${*:-info gpu conformance zoo determinism streams convergence bench dp}
tar -C .gpu -xJf .gpu/bundle.tar.xz
source .gpu/.dev/env.sh
work=$(mktemp -d)
export HGPC_TUNING_CACHE=$work/tuning.tsv NCCL_NVLS_ENABLE=0
fm=$here/.gpu/fashion-mnist
summary=$OUT/summary.txt
note() { echo "$*" | tee -a "$summary"; }

for stage in $stages; do
  start=$(date +%s)
  case $stage in
  info)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
    python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' | tee -a "$summary"
    ;;
  gpu)
    hgp_gpu_tests --gtest_brief=1 > "$OUT/gpu_tests.log" 2>&1
    note "gpu op suite: exit $? ($(grep -E '^\[  (PASSED|FAILED)  \]|tests? from .* ran' "$OUT/gpu_tests.log" | tr '\n' ' '))"
    HGPC_BUILD=$here/.gpu/.dev python3 tests/gpu/slicing_cuda.py > "$OUT/slicing_cuda.log" 2>&1
    note "slicing on cuda (split and pipelined vs plain, deterministic): exit $? ($(tail -1 "$OUT/slicing_cuda.log"))"
    ;;
  conformance)
    HGP_ONNX_TESTDATA=$here/.gpu/testdata hgp_conformance --backend cuda > "$OUT/conformance_cuda.log" 2>&1
    note "conformance on cuda: exit $? $(grep -a 'passed' "$OUT/conformance_cuda.log" | tr '\n' ' ')"
    ;;
  zoo)
    python3 -W ignore tests/gpu/zoo_steps.py --hgpc "$(command -v hgpc)" > "$OUT/zoo.log" 2>&1
    note "zoo whole steps CUDA vs CPU: exit $?"; grep '^{' "$OUT/zoo.log" | cut -c1-260 | tee -a "$summary"
    ;;
  zoo16)
    # Mixed precision (docs/precision.md): the same whole steps in bf16 and fp16. Not in the default
    # stage list yet; run it by name.
    for p in bf16 fp16; do
      python3 -W ignore tests/gpu/zoo_steps.py --hgpc "$(command -v hgpc)" --precision $p > "$OUT/zoo-$p.log" 2>&1
      note "zoo $p whole steps CUDA vs CPU: exit $?"; grep '^{' "$OUT/zoo-$p.log" | cut -c1-260 | tee -a "$summary"
    done
    ;;
  determinism)
    hgpc compile samples/lenet5.onnx -o "$work/l5" --batch 64 --optimizer sgd --lr 0.05 --momentum 0.9 >/dev/null 2>&1
    for run in a b; do
      "$work/l5" --data "fashion-mnist:$fm" --steps 200 --deterministic --device cuda --progress none \
        --save "$work/det_$run.onnx" >> "$work/determinism.log" 2>&1
    done
    "$work/l5" --data "fashion-mnist:$fm" --steps 200 --deterministic --eager --device cuda --progress none \
      --save "$work/det_eager.onnx" >> "$work/determinism.log" 2>&1
    # Against the CPU in fp32 (no TF32), where only summation order differs.
    hgpc compile samples/lenet5.onnx -o "$work/l5f" --batch 64 --optimizer sgd --lr 0.05 --momentum 0.9 \
      --precision fp32 >/dev/null 2>&1
    for dev in cuda cpu; do
      "$work/l5f" --data "fashion-mnist:$fm" --steps 200 --device $dev --progress none \
        --save "$work/det_f32_$dev.onnx" >> "$work/determinism.log" 2>&1
    done
    # The same on one stream, to tell the lanes' share of the CUDA-vs-CPU difference from the
    # kernels' summation order.
    hgpc compile samples/lenet5.onnx -o "$work/l5f1" --batch 64 --optimizer sgd --lr 0.05 --momentum 0.9 \
      --precision fp32 --max-streams 1 >/dev/null 2>&1
    "$work/l5f1" --data "fashion-mnist:$fm" --steps 200 --device cuda --progress none \
      --save "$work/det_f32_cuda1.onnx" >> "$work/determinism.log" 2>&1
    # And after 1 step, where the difference has not yet been amplified by training.
    for dev in cuda cpu; do
      "$work/l5f" --data "fashion-mnist:$fm" --steps 1 --device $dev --progress none \
        --save "$work/det_f32_1step_$dev.onnx" >> "$work/determinism.log" 2>&1
    done
    cmp -s "$work/det_a.onnx" "$work/det_b.onnx" && r1=identical || r1=DIFFERENT
    cmp -s "$work/det_a.onnx" "$work/det_eager.onnx" && r2=identical || r2=DIFFERENT
    note "determinism: two --deterministic graph runs $r1; graph vs eager $r2"
    python3 - "$work" <<'PY' | tee -a "$summary"
import sys, onnx, numpy as np, onnx.numpy_helper as nh
def load(name):
    return {t.name: nh.to_array(t) for t in onnx.load("%s/%s.onnx" % (sys.argv[1], name)).graph.initializer}
def err(x, y):
    a, b = load(x), load(y)
    return max(float(np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-12)) for k in a)
print("determinism: LeNet-5 fp32, CUDA vs CPU, max relative weight difference: 200 steps %.2e "
      "(1 stream %.2e), 1 step %.2e" % (err("det_f32_cuda", "det_f32_cpu"),
      err("det_f32_cuda1", "det_f32_cpu"), err("det_f32_1step_cuda", "det_f32_1step_cpu")))
PY
    ;;
  streams)
    # The scheduled plan (several streams, events) against the same model on one stream: in
    # deterministic mode the weights after 60 steps must be bit-identical, graph and eager. Batch
    # slicing is off in both: its sliced filter gradients sum in another order (slicing_cuda.py
    # checks it within float tolerance).
    python3 samples/make_resnet18_28.py "$work/r18s.onnx" > /dev/null 2>&1
    for m in lenet5:samples/lenet5.onnx resnet18_28:$work/r18s.onnx; do
      name=${m%%:*} path=${m#*:}
      for streams in 1 4; do
        hgpc compile "$path" -o "$work/s_${name}_$streams" --batch 32 --optimizer sgd --lr 0.05 \
          --momentum 0.9 --max-streams $streams --no-split --no-pipeline >> "$work/streams.log" 2>&1
        "$work/s_${name}_$streams" --data "fashion-mnist:$fm" --steps 60 --deterministic --device cuda \
          --progress none --save "$work/s_${name}_$streams.onnx" >> "$work/streams.log" 2>&1
      done
      "$work/s_${name}_4" --data "fashion-mnist:$fm" --steps 60 --deterministic --eager --device cuda \
        --progress none --save "$work/s_${name}_4e.onnx" >> "$work/streams.log" 2>&1
      used=$(( $(hgpc compile "$path" --batch 32 --no-split --no-pipeline --emit plan 2>/dev/null | grep -o 'stream=[0-9]*' | sort -u | wc -l) + 1 ))
      cmp -s "$work/s_${name}_1.onnx" "$work/s_${name}_4.onnx" && r1=identical || r1=DIFFERENT
      cmp -s "$work/s_${name}_1.onnx" "$work/s_${name}_4e.onnx" && r2=identical || r2=DIFFERENT
      note "streams $name ($used streams): 60 deterministic steps, 4-stream graph vs 1 stream $r1; 4-stream eager vs 1 stream $r2"
    done
    cp "$work/streams.log" "$OUT/streams.log"
    ;;
  convergence)
    hgpc compile samples/lenet5.onnx -o "$work/l5c" --batch 64 --optimizer adam --lr 0.002 \
      --schedule cosine --t-max 18740 >/dev/null 2>&1
    /usr/bin/time -f "%e s" "$work/l5c" --data "fashion-mnist:$fm" --eval "fashion-mnist:$fm" --epochs 20 \
      --normalize 0.2860,0.3530 --device cuda --progress plain \
      > "$work/lenet5.log" 2>&1
    note "convergence LeNet-5 20 epochs: $(grep 'eval after epoch 20' "$work/lenet5.log") ($(tail -1 "$work/lenet5.log"))"
    cat "$work/lenet5.log" >> "$OUT/convergence.log"
    python3 samples/make_resnet18_28.py "$work/r18.onnx" > /dev/null 2>&1
    hgpc compile "$work/r18.onnx" -o "$work/r18" --batch 128 --optimizer sgd --lr 0.1 --momentum 0.9 \
      --weight-decay 5e-4 --schedule cosine --t-max 4680 > "$work/resnet18.log" 2>&1
    /usr/bin/time -f "%e s" "$work/r18" --data "fashion-mnist:$fm" --eval "fashion-mnist:$fm" --epochs 10 \
      --normalize 0.2860,0.3530 --device cuda --progress plain \
      >> "$work/resnet18.log" 2>&1
    note "convergence ResNet-18 28x28 10 epochs: $(grep 'eval after epoch 10' "$work/resnet18.log") ($(tail -1 "$work/resnet18.log"))"
    cat "$work/resnet18.log" >> "$OUT/convergence.log"
    ;;
  profile)
    popts=(--batch 64 --optimizer sgd --lr 0.05 --momentum 0.9)
    hgpc compile samples/lenet5.onnx -o "$work/l5p" "${popts[@]}" >/dev/null 2>&1
    "$work/l5p" --data "fashion-mnist:$fm" --steps 200 --device cuda --progress none \
      --profile "$OUT/lenet5.records.txt" --trace "$OUT/lenet5.trace.json" > "$work/profile.log" 2>&1
    note "profile LeNet-5: exit $? $(grep -E 'profiled one run|^trained' "$work/profile.log" | tr '\n' ' ')"
    python3 - "$OUT/lenet5.trace.json" "$OUT/lenet5.records.txt" <<'PY' | tee -a "$summary"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
tracks = sorted(e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name")
xs = [e for e in ev if e["ph"] == "X"]
steps = {int(l.split()[2]) for l in open(sys.argv[2]) if l.startswith(("kernel", "memcpy", "memset"))}
print("profile: trace tracks %s, %d slices, %d flows; records cover %d steps" % (
    tracks, len(xs), sum(e["ph"] == "s" for e in ev), len(steps - {-1})))
PY
    hgpc plan samples/lenet5.onnx --target h200 "${popts[@]}" --records "$OUT/lenet5.records.txt" \
      > "$work/lenet5.plan.txt" 2>&1
    note "plan --records: exit $? $(grep -E '^records from|^predicted iteration' "$work/lenet5.plan.txt" | tr '\n' ' ')"
    ;;
  bench)
    PYTHONUNBUFFERED=1 python3 -W ignore bench/bench.py --out "$OUT" --work "$work/bench" \
      --hgpc "$(command -v hgpc)" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
    note "bench: exit $?"
    ;;
  dp)
    hgp_gpu_tests --gtest_filter='CudaCollective*:*AllReduce*' > "$OUT/dp_collective.log" 2>&1
    note "dp NCCL all-reduce on 2 GPUs (eager and graph): exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/dp_collective.log" | tr '\n' ' ')"
    tests/gpu/dp_equivalence.sh "$(command -v hgpc)" "$fm" > "$OUT/dp.log" 2>&1
    note "dp equivalence, LeNet-5 2 GPUs x 32 vs 1 GPU x 64, 5 steps: exit $? $(grep -E 'relative|PASSED|FAILED|skipped' "$OUT/dp.log" | tr '\n' ' ')"
    if [[ $(nvidia-smi -L | grep -c '^GPU') -ge 2 ]]; then
      # A rank that dies must stop the run with its rank named, not hang, and leave the last
      # checkpoint whole. LeNet-5 runs ~10 epochs a second on two GPUs: ask for far more, kill
      # rank 1 after a few seconds; the timeout only catches a hang.
      hgpc compile samples/lenet5.onnx -o "$work/l5dp" --batch 64 --ranks 2 --optimizer sgd --lr 0.05 >/dev/null 2>&1
      timeout -s KILL 120 "$work/l5dp" --data "fashion-mnist:$fm" --epochs 100000 --gpus 2 --device cuda \
        --progress none --checkpoint-dir "$work/ckdp" > "$work/dpkill.log" 2>&1 &
      parent=$!
      sleep 8
      kill -9 "$(pgrep -P $parent | tail -1)"
      wait $parent
      rc=$?
      note "dp: killing rank 1 -> parent exit $rc (want 9; 137 is a hang): $(grep -a 'rank' "$work/dpkill.log" | head -3 | tr '\n' ' ')"
      note "dp: checkpoints after the kill: $(ls "$work/ckdp" 2>/dev/null | tr '\n' ' ')"
      # Convergence: ResNet-18 28x28, 2 GPUs x 64 (global 128, the 1-GPU run's hyperparameters).
      python3 samples/make_resnet18_28.py "$work/r18dp.onnx" > /dev/null 2>&1
      hgpc compile "$work/r18dp.onnx" -o "$work/r18dp" --batch 64 --ranks 2 --optimizer sgd --lr 0.1 \
        --momentum 0.9 --weight-decay 5e-4 --schedule cosine --t-max 4680 > "$work/r18dp.log" 2>&1
      /usr/bin/time -f "%e s" "$work/r18dp" --data "fashion-mnist:$fm" --eval "fashion-mnist:$fm" --epochs 10 \
        --normalize 0.2860,0.3530 --gpus 2 --progress plain >> "$work/r18dp.log" 2>&1
      note "dp convergence ResNet-18 28x28 10 epochs on 2 GPUs: $(grep 'eval after epoch 10' "$work/r18dp.log") ($(tail -1 "$work/r18dp.log"))"
      cat "$work/r18dp.log" "$work/dpkill.log" >> "$OUT/dp.log"
    fi
    ;;
  esac
  echo "stage $stage: $(( $(date +%s) - start )) s" >> "$summary"
done
cat "$summary"
