"""Convergence on real data: LeNet-5 trained one epoch on Fashion-MNIST on the CPU backend reaches
at least 85% test accuracy (the demo's configuration)."""
import os
import sys
import tempfile

from common import FASHION, HGPC, LENET, read_jsonl, run


def main():
    if not os.path.isdir(FASHION):
        print("skipped: %s is missing (Debian package dataset-fashion-mnist)" % FASHION)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "lenet5")
        code, _, err = run([HGPC, "compile", LENET, "-o", exe, "--batch", "32", "--optimizer", "adam",
                            "--lr", "0.002", "--schedule", "cosine", "--t-max", "1875"])
        if code != 0:
            print(err)
            return 1
        metrics = os.path.join(tmp, "m.jsonl")
        code, _, err = run([exe, "--data", "fashion-mnist:" + FASHION, "--eval", "fashion-mnist:" + FASHION,
                            "--epochs", "1", "--device", "cpu", "--normalize", "0.2860,0.3530",
                            "--metrics", metrics, "--progress", "plain"])
        print(err[-2000:])
        if code != 0:
            return 1
        evals = [r for r in read_jsonl(metrics) if r.get("eval")]
        accuracy = evals[-1]["accuracy"]
        print("LeNet-5, 1 epoch of Fashion-MNIST on the CPU backend: test accuracy %.2f%%" % (100 * accuracy))
        return 0 if accuracy >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
