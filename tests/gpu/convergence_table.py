#!/usr/bin/env python3
"""Compares the convergence stage's training runs across precisions (tests/gpu/device_run.sh).

    convergence_table.py WORK PREC [PREC ...]

reads WORK/lenet5_PREC.log and WORK/resnet18_PREC.log (the executables' --progress plain output)
and prints, per model, the test accuracy and loss after every epoch in each precision, and for
each precision after the first: the largest per-epoch gap in test loss (relative) and accuracy
(points) to the first, and the final accuracy gap, which the performance issue bounds at 0.5
points for bf16 against fp32.
"""
import os
import re
import sys

EVAL = re.compile(r"eval after epoch (\d+) \(step \d+\): accuracy ([\d.]+)%.*loss ([\d.]+)")


def curve(path):
    """{epoch: (accuracy %, loss)} from one run's log; empty when the run is missing."""
    out = {}
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            m = EVAL.search(line)
            if m:
                out[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    work, precs = sys.argv[1], sys.argv[2:]
    for model in ("lenet5", "resnet18"):
        curves = {p: curve(os.path.join(work, "%s_%s.log" % (model, p))) for p in precs}
        epochs = sorted(set().union(*[set(c) for c in curves.values()]))
        print("convergence %s: epoch | %s" % (model, " | ".join("%s acc%% loss" % p for p in precs)))
        for e in epochs:
            cells = ["%6.2f %.4f" % curves[p][e] if e in curves[p] else "   -     -  " for p in precs]
            print("  %3d | %s" % (e, " | ".join(cells)))
        ref = curves[precs[0]]
        for p in precs[1:]:
            both = [e for e in epochs if e in ref and e in curves[p]]
            if not both:
                print("  %s against %s: no common epochs" % (p, precs[0]))
                continue
            loss_gap = max(abs(curves[p][e][1] - ref[e][1]) / ref[e][1] for e in both)
            acc_gap = max(abs(curves[p][e][0] - ref[e][0]) for e in both)
            last = both[-1]
            final = curves[p][last][0] - ref[last][0]
            print("  %s against %s: largest per-epoch gap: test loss %.1f%%, accuracy %.2f points; "
                  "final (epoch %d) accuracy %+.2f points (%s)"
                  % (p, precs[0], 100 * loss_gap, acc_gap, last, final,
                     "within 0.5" if abs(final) <= 0.5 else "OUTSIDE 0.5"))


if __name__ == "__main__":
    main()
