"""--data-on-device (runtime/runner/DeviceData.h, docs/data.md): the 8-bit training set is held
whole by the backend and each batch is gathered, cropped and flipped by the DeviceBatch step.
The independent reference is the host-fed path of the same executable: with the same seed, the
trained weights, every step's loss and the evaluation must be bit-identical, with --augment
cifar (RandomCrop padding 4 and flips, drawn on the device) and without augmentation, on
CIFAR-10 (3 channels) and Fashion-MNIST (1 channel). Data the device cannot hold is exit code
10. HGP_DOD_DEVICE=cuda runs both paths on CUDA (tests/gpu/data_on_device_cuda.py, label gpu).
"""
import os
import unittest

import numpy as np

from common import FASHION, HgpcTestCase, read_jsonl, run

DEVICE = os.environ.get("HGP_DOD_DEVICE", "cpu")
DEVICE_ARGS = ["--device", DEVICE] + (["--deterministic"] if DEVICE == "cuda" else [])


class DataOnDeviceTest(HgpcTestCase):
    def cifar(self, n=48):
        d = self.path("cifar-10-batches-bin")
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(1)
        for name in ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]:
            rec = np.zeros((n, 1 + 3072), np.uint8)
            rec[:, 0] = rng.integers(0, 10, n)
            # Smooth images with an edge, so that a crop or a flip changes the loss.
            img = np.zeros((n, 3, 32, 32), np.float64)
            img += np.linspace(0, 200, 32)[None, None, None, :] * rng.random((n, 3, 1, 1))
            img[:, :, :, :11] += 50 * rng.random((n, 3, 1, 1))
            rec[:, 1:] = np.clip(img, 0, 255).astype(np.uint8).reshape(n, -1)
            rec.tofile(os.path.join(d, name))
        return "cifar10:" + d

    def cifar_exe(self):
        script = """
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 10))
torch.onnx.export(m, torch.zeros(1, 3, 32, 32), sys.argv[1], training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["input"])
"""
        # HGP_DOD_MODEL: a copy exported here (the GPU machine's torch exports differently).
        model = self.exported(script, "c10.onnx", override="HGP_DOD_MODEL")
        return self.compile(model, "c10-u8", ["--batch", "8", "--pixels", "u8", "--normalize",
                                              "0.5,0.25", "--lr", "0.05", "--momentum", "0.9"])

    def train(self, exe, data, name, *args):
        saved, metrics = self.path(name + ".onnx"), self.path(name + ".jsonl")
        code, _, err = run([exe, "--data", data, "--eval", data, "--seed", "5", "--metrics", metrics,
                            "--save", saved, "--progress", "none", *DEVICE_ARGS, *args])
        self.assertEqual(code, 0, err)
        with open(saved, "rb") as f:
            return f.read(), [(r.get("eval", False), r["loss"]) for r in read_jsonl(metrics)], err

    def assertSameTraining(self, exe, data, *args):
        host, host_losses, _ = self.train(exe, data, "host", *args)
        dev, dev_losses, err = self.train(exe, data, "device", "--data-on-device", *args)
        self.assertIn("data on device", err)
        self.assertEqual(dev_losses, host_losses)
        self.assertTrue(host == dev, "the weights trained from the device's batches differ")
        return host_losses

    def test_cifar_with_crops_and_flips_is_bit_identical_to_the_host_path(self):
        exe, data = self.cifar_exe(), self.cifar()
        losses = self.assertSameTraining(exe, data, "--augment", "cifar", "--epochs", "2")
        self.assertEqual(len([l for e, l in losses if not e]), 2 * 5 * 48 // 8)
        # The augmentation is live: without it the run trains differently.
        plain, plain_losses, _ = self.train(exe, data, "plain", "--epochs", "2")
        self.assertNotEqual(plain_losses, losses)

    def test_cifar_without_augmentation_and_resumed(self):
        exe, data = self.cifar_exe(), self.cifar(16)
        self.assertSameTraining(exe, data, "--epochs", "1")
        # A resumed device run continues as the uninterrupted host run.
        ck = self.path("ck")
        code, _, err = run([exe, "--data", data, "--seed", "5", "--steps", "3", "--augment", "cifar",
                            "--checkpoint-dir", ck, "--checkpoint-every", "3", "--progress", "none",
                            "--data-on-device", *DEVICE_ARGS])
        self.assertEqual(code, 0, err)
        resumed = self.path("resumed.onnx")
        code, _, err = run([exe, "--data", data, "--seed", "5", "--steps", "7", "--augment", "cifar",
                            "--resume", os.path.join(ck, "checkpoint.hgpc"), "--save", resumed, "--progress",
                            "none", "--data-on-device", *DEVICE_ARGS])
        self.assertEqual(code, 0, err)
        whole = self.path("whole.onnx")
        code, _, err = run([exe, "--data", data, "--seed", "5", "--steps", "10", "--augment", "cifar",
                            "--save", whole, "--progress", "none", *DEVICE_ARGS])
        self.assertEqual(code, 0, err)
        with open(resumed, "rb") as a, open(whole, "rb") as b:
            self.assertTrue(a.read() == b.read(), "the resumed device run differs from the host run")

    @unittest.skipUnless(os.path.isdir(FASHION), "needs Debian's dataset-fashion-mnist")
    def test_fashion_mnist_one_channel(self):
        exe = self.compile(args=["--batch", "16", "--pixels", "u8", "--normalize", "0.286,0.353"])
        self.assertSameTraining(exe, "fashion-mnist:" + FASHION, "--augment", "cifar", "--steps", "6",
                                "--crop-padding", "2")

    def test_what_cannot_be_held_is_exit_code_10(self):
        exe, data = self.cifar_exe(), self.cifar(16)
        float_exe = self.compile(args=["--batch", "8"])
        for cmd, says in (
                ([float_exe, "--data", "synthetic"], "--pixels u8"),
                ([exe, "--data", data, "--augment", "imagenet"], "RandomResizedCrop")):
            code, _, err = run([*cmd, "--steps", "1", "--data-on-device", "--progress", "none",
                                *DEVICE_ARGS])
            self.assertEqual(code, 10, err)
            self.assertIn(says, err)
        self.make_folder()
        code, _, err = run([exe, "--data", "imagefolder:" + self.path("f"), "--steps", "1",
                            "--data-on-device", "--progress", "none", *DEVICE_ARGS])
        self.assertEqual(code, 10, err)
        self.assertIn("decoded from files", err)

    def make_folder(self):
        from PIL import Image
        for c in ("a", "b"):
            os.makedirs(self.path("f/" + c))
            for k in range(4):
                Image.new("RGB", (32, 32), (40 * k, 9, 200)).save(self.path("f/%s/%d.png" % (c, k)))


if __name__ == "__main__":
    unittest.main()
