#!/usr/bin/env python3
"""Fills torch.compile's caches for bench.py's cases ahead of a timed run, several at once.

torch.compile's first compile of a model takes about a minute (Dynamo, AOTAutograd, Inductor,
Triton), and bench.py's --warm-first does it inside the timed call. On one GPU, with the device
tool's 10-minute calls, that does not leave room for all ten cases in two precisions. This
script compiles every (case, precision) pair in background processes (`bench.py --warm-only`),
JOBS at a time, so that a later call on the same machine finds Inductor's FX graph, AOTAutograd
and Triton caches filled (set TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR to the same folders
in both) and its torch.compile timings start from cache hits. It times nothing itself: run it
beside correctness tests, never beside a benchmark.

    python3 bench/warm_compile.py --precisions tf32,bf16 --jobs 8 [--suite broad] [--cases lenet5:64,...]

It prints one line per pair (seconds, exit status, the end of stderr on failure) and, last,
`warm-up done: N of M in S s`.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from models import SUITES  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="default", choices=sorted(SUITES),
                    help="the cases when --cases is not given (bench.py's --suite)")
    ap.add_argument("--cases", default=None)
    ap.add_argument("--precisions", default="tf32,bf16")
    ap.add_argument("--jobs", type=int, default=8)
    args = ap.parse_args()
    if args.cases is None:
        args.cases = ",".join("%s:%d" % c for c in SUITES[args.suite])
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py")
    pairs = [(spec, p) for p in args.precisions.split(",") for spec in args.cases.split(",")]
    t0 = time.time()

    def warm(pair):
        spec, precision = pair
        start = time.time()
        p = subprocess.run([sys.executable, "-W", "ignore", bench, "--warm-only", spec,
                            "--precision", precision],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return pair, p.returncode, time.time() - start, p.stderr[-400:]

    ok = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for (spec, precision), rc, secs, err in pool.map(warm, pairs):
            ok += rc == 0
            print("%s %s: %.0f s, exit %d%s" % (spec, precision, secs, rc,
                                                "" if rc == 0 else " " + err.replace("\n", " | ")),
                  flush=True)
    print("warm-up done: %d of %d in %.0f s" % (ok, len(pairs), time.time() - t0), flush=True)
    return 0 if ok == len(pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
