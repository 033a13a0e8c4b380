"""The shared core of the fusion integration tests (test_fuse_batch_norm.py,
test_conv_epilogue.py): train one model compiled twice, fused and with --no-fuse, on the same
data, and compare the per-step losses, the evaluations and every saved tensor.

On the CPU the fused executors compute the unfused chains' values exactly, so the two runs must
be bit-identical in every precision. HGP_FUSION_DEVICE=cuda runs both on CUDA with
--deterministic; there the comparison is relative to each tensor's largest magnitude, within the
tolerance the calling test documents.
"""
import os

import numpy

DEVICE = os.environ.get("HGP_FUSION_DEVICE", "cpu")
RUN = ["--device", DEVICE] + ([] if DEVICE == "cpu" else ["--deterministic"])
TRAIN = ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "5e-4"]


class FusedTraining:
    """A mixin for an HgpcTestCase that defines model() and data(n)."""

    def train(self, precision, args, name):
        """Compiles the model with `args`, trains 3 steps of 12 samples (batch 4) with an
        evaluation, and returns (losses, evaluations, saved tensors by name)."""
        exe = self.compile(self.model(), out=name,
                           args=["--batch", "4", *TRAIN, "--precision", precision, *args])
        return self.train_three_steps(exe, name, self.data(12), RUN)

    def assert_fused_trains_like_unfused(self, precision, rtol, fused_args=(),
                                         plain_args=("--no-fuse",), exact=None):
        """Trains fused (with `fused_args`) and unfused (`plain_args`); bit-identical on the CPU
        (unless `exact` is False), within `rtol` on CUDA. Returns the largest relative error."""
        fused_losses, fused_evals, fused = self.train(precision, list(fused_args), "fused")
        plain_losses, plain_evals, plain = self.train(precision, list(plain_args), "plain")
        self.assertEqual(len(plain_losses), 3)
        self.assertEqual(plain.keys(), fused.keys())
        if exact is None:
            exact = DEVICE == "cpu"
        if exact:
            self.assertEqual(fused_losses, plain_losses)
            self.assertEqual(fused_evals, plain_evals)
            for name, want in plain.items():
                numpy.testing.assert_array_equal(fused[name], want, err_msg=name)
            return
        numpy.testing.assert_allclose(fused_losses, plain_losses, rtol=rtol)
        worst = 0.0
        for name, want in plain.items():
            if want.dtype.kind != "f":
                continue
            scale = max(float(numpy.abs(want).max()), 1e-30)
            err = float(numpy.abs(fused[name].astype(numpy.float64) - want).max()) / scale
            self.assertLessEqual(err, rtol, "%s: relative error %.3g" % (name, err))
            worst = max(worst, err)
        return worst
