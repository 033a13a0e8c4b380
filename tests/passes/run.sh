#!/usr/bin/env bash
# Runs the `# RUN:` lines of one pass test (tests/passes/*.ir), as LLVM's lit does: %s is the
# test file, hgp-opt and FileCheck the tools given here. Every line must succeed; a pipeline
# fails when any of its commands does.
#   usage: run.sh HGP_OPT FILECHECK TEST.ir
set -euo pipefail
opt=${1:?usage: run.sh HGP_OPT FILECHECK TEST.ir}
filecheck=${2:?}
test=${3:?}
# A RUN line that ends in a backslash continues on the next RUN line.
mapfile -t lines < <(sed -n 's/^# RUN: *//p' "$test")
runs=() run=""
for line in "${lines[@]}"; do
  if [[ $line == *\\ ]]; then run+="${line%\\} "; else runs+=("$run$line"); run=""; fi
done
if (( ${#runs[@]} == 0 )); then echo "$test: no '# RUN:' line" >&2; exit 1; fi
for run in "${runs[@]}"; do
  cmd=${run//%s/$test}
  cmd=${cmd//hgp-opt/$opt}
  cmd=${cmd//FileCheck/$filecheck}
  echo "RUN: $cmd"
  bash -o pipefail -c "$cmd"
done
