#!/bin/sh
# smoke.sh - builds the ONNX loader fuzzer (clang, libFuzzer, ASan, UBSan) and runs it for a
# short while over the malformed-model corpus and the valid seeds. Fails on any crash, leak,
# timeout or sanitizer report; the input that caused it is kept in BUILD_DIR/crashes/.
#
#   tests/fuzz/smoke.sh [BUILD_DIR] [SECONDS]      (CXX picks the clang, default clang++)
#
# Seeds are copied to a temporary folder, so the run never writes into the repository.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build/fuzz}
SECONDS_TO_RUN=${2:-45}
CXX=${CXX:-clang++}

cmake -S "$ROOT/tests/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/corpus" "$WORK/artifacts"
cp "$ROOT"/tests/malformed/*.onnx "$ROOT"/tests/fuzz/seeds/*.onnx "$WORK/corpus/"
# The ONNX node tests (libonnx-testdata), when installed, are small valid models of every op.
for d in /usr/share/libonnx-testdata/data/node/*/; do
  [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$WORK/corpus/$(basename "$d").onnx"
done

status=0
"$BUILD/onnx_loader_fuzzer" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 \
  -max_len=4096 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" "$WORK/corpus" ||
  status=$?
if [ "$status" -ne 0 ] || [ -n "$(ls -A "$WORK/artifacts")" ]; then
  mkdir -p "$BUILD/crashes"
  cp "$WORK"/artifacts/* "$BUILD/crashes/" 2>/dev/null || true
  echo "smoke.sh: the fuzzer failed (exit $status); inputs kept in $BUILD/crashes/" >&2
  exit 1
fi
echo "smoke.sh: no crash in $SECONDS_TO_RUN s"
