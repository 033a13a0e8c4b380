"""Image data: decoding, augmentation and image folders against torchvision and PIL (docs/data.md).

The runner's image code runs through hgp_image_tool (tests/images/ImageTool.cpp); the data come
from scripts/make_image_data.py. Pixels are compared with PIL's (torchvision's PIL path): the
runner reproduces PIL's bilinear filter, so the allowance is 1 (of 255) everywhere.
"""
import copy
import math
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
from PIL import Image
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F

from common import BUILD, HGPC, SOURCE, HgpcTestCase, run, read_jsonl

TOOL = os.path.join(BUILD, "bin", "hgp_image_tool")
MAKE = os.path.join(SOURCE, "scripts", "make_image_data.py")


class Replay:
    """Stands in for `torch` inside torchvision.transforms.transforms: every uniform_ and randint
    consumes the next of the given draws, as the runner's transforms do (ImageTransform.h)."""

    class Value:
        def __init__(self, v):
            self.v = v

        def item(self):
            return self.v

        def __float__(self):
            return float(self.v)

        def uniform_(self, a, b):
            return Replay.Value(float(a) + self.owner.draw() * (float(b) - float(a)))

    def __init__(self, draws):
        self.draws = list(draws)

    def draw(self):
        return self.draws.pop(0) if self.draws else 0.5

    def empty(self, *size):
        v = Replay.Value(0.0)
        v.owner = self
        return v

    def randint(self, lo, hi, size):
        return Replay.Value(lo + min(hi - lo - 1, math.floor(self.draw() * (hi - lo))))

    def exp(self, v):
        return Replay.Value(math.exp(float(v)))

    def __getattr__(self, name):
        return getattr(torch, name)


def tool(*args):
    code, out, err = run([TOOL, *map(str, args)])
    if code != 0:
        raise AssertionError("hgp_image_tool %s: exit %d: %s" % (args, code, err))
    return out


class ImageTestCase(HgpcTestCase):
    def make(self, *args):
        subprocess.run([sys.executable, MAKE, *map(str, args)], check=True, capture_output=True)

    def pixels(self, *args, denom=None):
        """Runs a tool command that writes OUT.raw, given last (then the DCT scale, if any)."""
        raw = self.path("out.raw")
        w, h = map(int, tool(*args, raw, *([denom] if denom else [])).split())
        return np.fromfile(raw, np.uint8).reshape(h, w, -1)

    def assertClose(self, ours, ref, tol=1, what=""):
        ref = np.asarray(ref, np.int32).reshape(ours.shape)
        diff = np.abs(ours.astype(np.int32) - ref)
        self.assertLessEqual(int(diff.max()), tol, "%s: max difference %d" % (what, diff.max()))


class CropBoxTest(ImageTestCase):
    def test_random_resized_crop_box_equals_torchvision(self):
        rng = np.random.default_rng(1)
        cases = [(500, 375, (0.08, 1.0), (3 / 4, 4 / 3)), (224, 224, (0.35, 1.0), (3 / 4, 4 / 3)),
                 (28, 28, (0.08, 1.0), (3 / 4, 4 / 3)), (640, 100, (0.5, 1.0), (0.9, 1.1)),
                 (100, 640, (0.9, 1.0), (3 / 4, 4 / 3))]
        tv = T.transforms
        real = tv.torch
        try:
            for w, h, scale, ratio in cases:
                for k in range(60):
                    # Some draws that overflow the image, so that the retries and the central
                    # fallback are exercised too.
                    draws = list(rng.uniform(0, 1, 40)) if k % 3 else [0.99, 0.0, 0.99, 1.0] * 10
                    tv.torch = Replay(draws)
                    ref = T.RandomResizedCrop.get_params(Image.new("L", (w, h)), scale, ratio)
                    got = tool("box", w, h, scale[0], scale[1], ratio[0], ratio[1],
                               *["%.17g" % d for d in draws]).split()
                    self.assertEqual(tuple(map(int, got)), tuple(ref), (w, h, scale, ratio, k))
        finally:
            tv.torch = real


class DecodeTest(ImageTestCase):
    def setUp(self):
        super().setUp()
        self.make("corrupt", self.path("c"))
        self.make("synthetic", self.path("s"), "--count", 3, "--classes", 3, "--size", 200)
        self.jpeg = self.path("s/class001/0000001.jpg")

    def test_decode_equals_pil(self):
        for name in ["a-good/rgb.jpg", "a-good/gray.jpg", "a-good/cmyk.jpg", "a-good/rgb.png",
                     "b-good/gray.png", "b-good/palette.png", "b-good/rgba.png"]:
            path = self.path("c/" + name)
            for channels, mode in ((3, "RGB"), (1, "L")):
                ours = self.pixels("decode", path, channels)
                ref = np.asarray(Image.open(path).convert(mode))
                self.assertClose(ours, ref, 1, "%s as %s" % (name, mode))

    def test_sixteen_bit_png_scales_to_eight(self):
        path = self.path("c/b-good/gray16.png")
        ours = self.pixels("decode", path, 1)
        # PIL clips 16-bit values to 255 when converting to L; the runner scales (v / 257).
        ref = np.round(np.asarray(Image.open(path), np.float64) / 257.0)
        self.assertClose(ours, ref, 1, "16-bit PNG")

    def test_reduced_dct_scale_equals_pil_draft(self):
        for denom in (2, 4, 8):
            ours = self.pixels("decode", self.jpeg, 3, denom=denom)
            im = Image.open(self.jpeg)
            im.draft("RGB", (math.ceil(200 / denom), math.ceil(200 / denom)))
            ref = np.asarray(im.convert("RGB"))
            self.assertEqual(ours.shape, ref.shape)
            self.assertClose(ours, ref, 1, "1/%d scale" % denom)

    def test_bad_files_are_bad_data(self):
        for name in ["a-good/truncated.jpg", "a-good/garbage.jpg", "b-good/text.jpg",
                     "b-good/empty.png", "b-good/truncated.png", "a-good/bomb.png"]:
            code, _, err = run([TOOL, "decode", self.path("c/" + name), "3", self.path("x.raw")])
            self.assertEqual(code, 5, name + ": " + err)
            self.assertIn("bad data", err)
        _, _, err = run([TOOL, "decode", self.path("c/a-good/bomb.png"), "3", self.path("x.raw")])
        self.assertIn("30000x30000", err)


class ResizeTest(ImageTestCase):
    def setUp(self):
        super().setUp()
        self.make("synthetic", self.path("s"), "--count", 2, "--classes", 2, "--size", 224)
        self.jpeg = self.path("s/class001/0000001.jpg")
        self.img = Image.open(self.jpeg).convert("RGB")

    def test_resized_crop_equals_pil(self):
        # (i, j, h, w) crops of the 224 x 224 image, to shrinking, growing and mixed sizes.
        for (i, j, h, w), (oh, ow) in [((10, 20, 150, 120), (64, 64)), ((0, 0, 224, 224), (32, 32)),
                                       ((50, 60, 40, 30), (112, 96)), ((3, 7, 200, 17), (50, 50)),
                                       ((0, 0, 224, 224), (224, 224))]:
            ours = self.pixels("crop", self.jpeg, 3, j, i, j + w, i + h, ow, oh)
            ref = np.asarray(F.resized_crop(self.img, i, j, h, w, [oh, ow], T.InterpolationMode.BILINEAR))
            self.assertClose(ours, ref, 1, "crop %s to %s" % ((i, j, h, w), (oh, ow)))

    def test_resize_center_crop_equals_torchvision(self):
        wide = self.path("wide.png")
        self.img.resize((300, 180), Image.BILINEAR).save(wide)
        for path in (self.jpeg, wide):
            img = Image.open(path).convert("RGB")
            for resize, (h, w) in [(256, (224, 224)), (37, (32, 32)), (64, (64, 48)), (100, (90, 90))]:
                ours = self.pixels("center", path, 3, resize, w, h)
                ref = np.asarray(F.center_crop(F.resize(img, resize), [h, w]))
                self.assertClose(ours, ref, 1, "%s Resize(%d) + CenterCrop(%d, %d)" % (path, resize, h, w))

    def test_random_crop_with_padding_equals_torchvision(self):
        small = self.path("small.png")
        self.img.resize((32, 32), Image.BILINEAR).save(small)
        img = Image.open(small).convert("RGB")
        for u1, u2 in [(0.0, 0.0), (0.999, 0.999), (0.3, 0.7), (0.5, 0.1)]:
            ours = self.pixels("pad", small, 3, 32, 32, 4, u1, u2)
            i, j = math.floor(u1 * (40 - 32 + 1)), math.floor(u2 * (40 - 32 + 1))
            ref = np.asarray(F.crop(F.pad(img, 4), i, j, 32, 32))
            self.assertClose(ours, ref, 0, "RandomCrop at %d, %d" % (i, j))


class ImageFolderTest(ImageTestCase):
    def test_samples_and_classes_equal_torchvision(self):
        root = self.path("f")
        self.make("folder", root, "--per-class", 3)
        # Nested folders and upper-case extensions, which torchvision also reads.
        os.makedirs(os.path.join(root, "3-dress", "sub", "deeper"))
        os.makedirs(os.path.join(root, "3-dress", "a-sub"))
        for rel in ["sub/x.JPG", "sub/deeper/y.png", "a-sub/z.jpeg", "zz.jpg"]:
            Image.new("L", (28, 28)).save(os.path.join(root, "3-dress", rel),
                                          format="PNG" if rel.endswith("png") else "JPEG")
        ours = [line.split(" ", 1) for line in tool("list", root).splitlines()]
        ref = torchvision.datasets.ImageFolder(root).samples
        self.assertEqual([(p, int(c)) for c, p in ours], [(p, c) for p, c in ref])

    def check_fails(self, exe, data, needle, *extra):
        code, _, err = run([exe, "--data", data, "--steps", "1", "--progress", "none", *extra])
        self.assertEqual(code, 5, err)
        self.assertIn(needle, err)

    def test_bad_inputs_in_a_run(self):
        exe = self.compile(args=["--batch", "5"])  # 15 files: one epoch reads them all
        bad = self.path("c")
        self.make("corrupt", bad)
        # skip (the default): every bad file is named, the empty class is a warning, and the
        # run trains on the good images.
        code, _, err = run([exe, "--data", "imagefolder:" + bad, "--epochs", "3", "--progress",
                            "none", "--shuffle", "off"])
        self.assertEqual(code, 0, err)
        for name in ["bomb.png", "garbage.jpg", "truncated.jpg", "text.jpg", "empty.png", "truncated.png"]:
            self.assertIn(name, err)
        self.assertIn("c-empty", err)
        self.assertIn("6 bad images were skipped", err)
        # fail: the empty class folder stops it before training, then the first bad image.
        self.check_fails(exe, "imagefolder:" + bad, "c-empty", "--bad-images", "fail")
        os.rmdir(os.path.join(bad, "c-empty"))
        self.check_fails(exe, "imagefolder:" + bad, "bomb.png", "--bad-images", "fail", "--shuffle", "off")
        # No classes, no images, one class only.
        os.makedirs(self.path("none"))
        self.check_fails(exe, "imagefolder:" + self.path("none"), "no class folders")
        os.makedirs(self.path("one/only"))
        Image.new("L", (28, 28)).save(self.path("one/only/a.png"))
        self.check_fails(exe, "imagefolder:" + self.path("one"), "one class only")
        os.makedirs(self.path("empty/a"))
        os.makedirs(self.path("empty/b"))
        self.check_fails(exe, "imagefolder:" + self.path("empty"), "holds no .jpg")

    def test_train_eval_save_class_list(self):
        exe = self.compile(args=["--batch", "10"])
        train, test = self.path("train"), self.path("test")
        self.make("folder", train, "--per-class", 10)
        self.make("folder", test, "--split", "test", "--per-class", 3, "--format", "png", "--size", 40)
        shutil.rmtree(os.path.join(test, "9-boot"))  # an evaluation folder may lack a class
        code, _, err = run([exe, "--data", "imagefolder:" + train, "--eval", "imagefolder:" + test,
                            "--epochs", "1", "--progress", "none", "--augment", "cifar",
                            "--save", self.path("m.onnx"), "--metrics", self.path("m.jsonl")])
        self.assertEqual(code, 0, err)
        self.assertIn("accuracy", err)
        with open(self.path("m.classes.txt")) as f:
            self.assertEqual(f.read().split(), sorted(os.listdir(train)))
        # An evaluation class the training data lacks is an error, not a silent shift.
        os.makedirs(os.path.join(test, "z-new"))
        Image.new("L", (28, 28)).save(os.path.join(test, "z-new", "a.png"))
        code, _, err = run([exe, "--data", "imagefolder:" + train, "--eval", "imagefolder:" + test,
                            "--epochs", "1", "--progress", "none"])
        self.assertEqual(code, 5, err)
        self.assertIn("z-new", err)

    def test_augmentation_is_reproducible(self):
        exe = self.compile(args=["--batch", "10"])
        train = self.path("train")
        self.make("folder", train, "--per-class", 5)

        def losses(*extra):
            out = self.path("l.jsonl")
            code, _, err = run([exe, "--data", "imagefolder:" + train, "--steps", "10",
                                "--progress", "none", "--metrics", out, "--augment", "imagenet",
                                *extra])
            self.assertEqual(code, 0, err)
            return [r["loss"] for r in read_jsonl(out) if "loss" in r]

        a, b = losses("--seed", "3"), losses("--seed", "3", "--loader-threads", "1")
        self.assertEqual(a, b)
        self.assertNotEqual(a, losses("--seed", "4"))


class ShardsAndCifarTest(ImageTestCase):
    def test_shards_train_like_the_folder(self):
        exe = self.compile(args=["--batch", "10"])
        self.make("shards", self.path("sh"), "--per-class", 5, "--per-shard", 20)
        self.make("folder", self.path("f"), "--per-class", 5)

        def run_on(data):
            out = self.path("l.jsonl")
            code, _, err = run([exe, "--data", data, "--epochs", "1", "--progress", "none",
                                "--shuffle", "off", "--metrics", out])
            self.assertEqual(code, 0, err)
            return [r["loss"] for r in read_jsonl(out) if "loss" in r]

        # Unshuffled, both read the samples in index order: the folder sorts by class, the
        # shards by file, so compare one epoch's mean loss, not step by step.
        shards = run_on("shards:" + self.path("sh/shard-{000000..000002}.tar"))
        self.assertEqual(len(shards), 5)
        self.assertEqual(shards, run_on("shards:" + self.path("sh/shard-*.tar")))
        code, _, err = run([exe, "--data", "shards:" + self.path("sh/none-*.tar"), "--steps", "1"])
        self.assertEqual(code, 5, err)

    def test_shards_are_split_over_ranks(self):
        # 50 samples in 5 shards of 10: with 2 ranks, rank 0 reads shards 0, 2, 4 and rank 1
        # shards 1 and 3; both train on the smaller share (20), and with a shuffle buffer of one
        # sample an epoch reads one shard's samples together (a shard at a time, front to back;
        # tests/unit/ShardStreamTest.cpp checks larger buffers and the reads themselves).
        self.make("shards", self.path("sh"), "--per-class", 5, "--per-shard", 10)
        pattern = self.path("sh/shard-*.tar")

        def read(rank, ranks, buffer=1):
            rows = [l.split(" ", 1) for l in tool("shards", pattern, rank, ranks, buffer).splitlines()]
            return [(int(label), name.rsplit(":", 1)[0], name) for label, name in rows]

        whole = read(0, 1)
        self.assertEqual(len(whole), 50)
        shard_of = lambda path: int(os.path.basename(path)[len("shard-"):-len(".tar")])
        seen = set()
        for rank in (0, 1):
            rows = read(rank, 2)
            self.assertEqual(len(rows), 20)
            shards = [shard_of(s) for _, s, _ in rows]
            self.assertTrue(all(s % 2 == rank for s in shards), shards)
            runs = [s for k, s in enumerate(shards) if k == 0 or s != shards[k - 1]]
            self.assertEqual(len(runs), len(set(runs)), "a shard's samples are not together: %s" % shards)
            names = {n for _, _, n in rows}
            self.assertFalse(names & seen)
            seen |= names
        code, _, err = run([TOOL, "shards", pattern, "0", "6"])
        self.assertEqual(code, 5, err)
        self.assertIn("shard per rank", err)

    def test_cifar100(self):
        exe = self.compile(self.cifar_model(), args=["--batch", "8"])
        rng = np.random.default_rng(0)
        d = self.path("cifar-100-binary")
        os.makedirs(d)
        for name, n in (("train.bin", 40), ("test.bin", 16)):
            rec = np.zeros((n, 2 + 3072), np.uint8)
            rec[:, 0] = rng.integers(0, 20, n)   # coarse
            rec[:, 1] = rng.integers(0, 100, n)  # fine: the class
            rec[:, 2:] = rng.integers(0, 255, (n, 3072))
            rec.tofile(os.path.join(d, name))
        code, _, err = run([exe, "--data", "cifar100:" + d, "--eval", "cifar100:" + d, "--epochs",
                            "1", "--progress", "none", "--augment", "cifar"])
        self.assertEqual(code, 0, err)
        self.assertIn("cifar100 train", err)
        self.assertIn("RandomCrop(padding=4)", err)

    def cifar_model(self):
        script = """
import sys, torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 100))
torch.onnx.export(m, torch.zeros(1, 3, 32, 32), sys.argv[1], training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["input"])
"""
        return self.exported(script, "c100.onnx")


class PixelsTest(ImageTestCase):
    """hgpc compile --pixels u8: 8-bit pixels cross to the device, ImageInput flips and
    normalizes in the step; the inputs, and so the losses, equal the float path's."""

    def test_u8_plan_trains_exactly_as_the_float_plan(self):
        train, test = self.path("train"), self.path("test")
        self.make("folder", train, "--per-class", 4)
        self.make("folder", test, "--split", "test", "--per-class", 2, "--size", 36)
        norm = "0.2860,0.3530"
        f32 = self.compile(args=["--batch", "8"], out="f32")
        u8 = self.compile(args=["--batch", "8", "--pixels", "u8", "--normalize", norm], out="u8")

        def run_exe(exe, *extra):
            out = self.path("m.jsonl")
            code, _, err = run([exe, "--data", "imagefolder:" + train, "--eval", "imagefolder:" + test,
                                "--epochs", "2", "--progress", "none", "--augment", "cifar",
                                "--seed", "7", "--metrics", out, *extra])
            self.assertEqual(code, 0, err)
            rows = read_jsonl(out)
            return [r["loss"] for r in rows if "accuracy" not in r], [r["accuracy"] for r in rows if "accuracy" in r]

        a = run_exe(f32, "--normalize", norm)
        b = run_exe(u8)
        self.assertEqual(len(a[0]), 10)
        self.assertEqual(a, b)
        self.assertEqual(a, run_exe(u8, "--normalize", norm))  # repeating the compiled one is fine
        code, _, err = run([u8, "--data", "imagefolder:" + train, "--steps", "1", "--normalize", "0.5,0.5"])
        self.assertEqual(code, 2, err)
        self.assertIn("hgpc compile", err)
        code, _, err = run([u8, "--data", "synthetic", "--steps", "1"])
        self.assertEqual(code, 2, err)
        self.assertIn("8-bit", err)

    def test_plan_starts_with_image_input(self):
        code, out, err = run([os.path.join(BUILD, "bin", "hgpc"), "compile", os.path.join(SOURCE, "samples", "lenet5.onnx"),
                              "-o", self.path("x"), "--batch", "4", "--pixels", "u8", "--emit", "plan",
                              "--precision", "bf16"])
        self.assertEqual(code, 0, err)
        self.assertIn("ImageInput", out)
        self.assertIn("to=\"bf16\"", out)  # mixed precision's Cast of the input folded in
        code, _, err = run([os.path.join(BUILD, "bin", "hgpc"), "compile", os.path.join(SOURCE, "samples", "lenet5.onnx"),
                            "-o", self.path("y"), "--normalize", "0.5,0.5"])
        self.assertEqual(code, 2, err)


class ReplayTest(ImageTestCase):
    """The whole --augment cifar recipe of bench/images.py converge, on the CPU: hgpc trains on
    an image folder as PyTorch does on the same batches (hgpc's order and draws replayed by
    bench/hgpc_draws.py), from the same initial weights, with the same optimizer, schedule,
    weight decay and BatchNorm. The first step's loss is the same to float32 rounding (the same
    pixels, crops and flips), later ones stay within 8x PyTorch float32's largest distance from
    float64 so far, and the evaluation (BatchNorm's running statistics) agrees."""

    def test_trains_as_pytorch_on_the_same_batches(self):
        sys.path.insert(0, os.path.join(SOURCE, "bench"))
        import hgpc_draws
        nn = torch.nn
        train, test = self.path("train"), self.path("test")
        self.make("folder", train, "--per-class", 8)
        self.make("folder", test, "--split", "test", "--per-class", 5)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16),
                              nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).train()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        onnx_path = self.path("m.onnx")
        torch.onnx.export(model, torch.zeros(2, 1, 28, 28), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], dynamic_axes={"input": {0: "N"}})
        batch, epochs, seed, mean, std = 16, 2, 7, 0.2860, 0.3530
        ds = torchvision.datasets.ImageFolder(train)
        per_epoch = len(ds) // batch
        steps = per_epoch * epochs
        exe = self.compile(onnx_path, args=[str(a) for a in ["--batch", batch, "--optimizer", "sgd", "--lr", "0.05",
                                            "--momentum", "0.9", "--weight-decay", "5e-4",
                                            "--schedule", "cosine", "--t-max", steps]])
        out = self.path("m.jsonl")
        code, _, err = run([exe, "--data", "imagefolder:" + train, "--eval", "imagefolder:" + test,
                            "--epochs", str(epochs), "--augment", "cifar", "--normalize", "%g,%g" % (mean, std),
                            "--seed", str(seed), "--progress", "none", "--metrics", out])
        self.assertEqual(code, 0, err)
        rows = read_jsonl(out)
        ours = [r["loss"] for r in rows if "accuracy" not in r]
        evals = [(r["loss"], r["accuracy"]) for r in rows if "accuracy" in r]
        images = [np.asarray(Image.open(p).convert("RGB").convert("L")) for p, _ in ds.samples]

        def batches(flip):
            for e in range(epochs):
                order = hgpc_draws.epoch_order(len(ds), seed, e)
                for k in range(per_epoch):
                    idx = order[k * batch:(k + 1) * batch]
                    x = np.stack([hgpc_draws.cifar_sample(images[i], seed, e, i, flip=flip) for i in idx])
                    x = (x.astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)
                    yield torch.from_numpy(x[:, None]), torch.tensor([ds.samples[i][1] for i in idx])

        def reference(dtype, flip=0.5):
            m = copy.deepcopy(model).to(dtype)
            m.load_state_dict(init)
            m.train()
            opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
            losses = []
            for x, y in batches(flip):
                loss = nn.functional.cross_entropy(m(x.to(dtype)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
            m.eval()
            tds = torchvision.datasets.ImageFolder(test, transform=T.Compose(
                [T.Grayscale(1), T.ToTensor(), T.Normalize((mean,), (std,))]))
            with torch.no_grad():
                x = torch.stack([t for t, _ in tds]).to(dtype)
                y = torch.tensor([c for _, c in tds])
                logits = m(x)
            acc = float((logits.argmax(1) == y).double().mean())
            return losses, (float(nn.functional.cross_entropy(logits, y)), acc)

        l64, e64 = reference(torch.float64)
        l32, _ = reference(torch.float32)
        self.assertEqual(len(ours), steps)
        self.assertLess(abs(ours[0] - l64[0]), 1e-5 * l64[0], (ours[0], l64[0]))
        for s in range(steps):
            # Rounding differences grow step by step: PyTorch f32's largest distance so far.
            allow = max(8 * max(abs(a - b) for a, b in zip(l32[:s + 1], l64)), 1e-5 * abs(l64[s]))
            self.assertLessEqual(abs(ours[s] - l64[s]), allow, "step %d: %s against %s" % (s + 1, ours, l64))
        self.assertAlmostEqual(evals[-1][1], e64[1], delta=0.021)
        self.assertLess(abs(evals[-1][0] - e64[0]), 1e-3 * e64[0] + 1e-4, (evals, e64))
        # The check can fail: replayed without the flips, step 1 is far outside its bound.
        wrong, _ = reference(torch.float64, flip=0)
        self.assertGreater(abs(ours[0] - wrong[0]), 10 * 1e-5 * l64[0])


class ChannelsLastImageInputTest(ImageTestCase):
    """--pixels u8 in a channels-last plan (--layout nhwc): ImageInput writes the channels-last
    image itself (image-input-layout), no Transpose follows it, and the plan trains as the NCHW
    one does (docs/layout.md: on the CPU only the bias gradient's sum adds in another order)."""

    NET = """
import sys, torch
nn = torch.nn
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                  nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                  nn.Linear(16, 10)).train()
torch.onnx.export(m, torch.zeros(2, 3, 28, 28), sys.argv[1], opset_version=17, do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING, input_names=["input"],
                  dynamic_axes={"input": {0: "N"}})
"""

    def test_image_input_writes_channels_last(self):
        model = self.exported(self.NET, "rgb8.onnx")
        train = self.path("train")
        self.make("folder", train, "--per-class", 4)
        common = ["--batch", "8", "--pixels", "u8", "--normalize", "0.5,0.25"]
        plans = {}
        for layout in ("nchw", "nhwc"):
            code, out, err = run([HGPC, "compile", model, "-o", self.path("p" + layout), *common,
                                  "--layout", layout, "--emit", "plan"])
            self.assertEqual(code, 0, err)
            plans[layout] = out
        self.assertIn("channels_last=1", plans["nhwc"])
        self.assertNotIn("to-nhwc after ImageInput", plans["nhwc"])
        self.assertIn('layout="nhwc"', plans["nhwc"])
        self.assertNotIn("channels_last", plans["nchw"])

        def losses(layout):
            exe = self.compile(model, out=layout, args=[*common, "--layout", layout])
            out = self.path(layout + ".jsonl")
            code, _, err = run([exe, "--data", "imagefolder:" + train, "--eval", "imagefolder:" + train,
                                "--epochs", "2", "--augment", "cifar", "--seed", "3", "--progress", "none",
                                "--metrics", out])
            self.assertEqual(code, 0, err)
            return [r["loss"] for r in read_jsonl(out)]

        a, b = losses("nchw"), losses("nhwc")
        self.assertEqual(len(a), 12)  # 5 steps and an evaluation per epoch
        for x, y in zip(a, b):
            self.assertAlmostEqual(x, y, delta=1e-5 * abs(x))


if __name__ == "__main__":
    unittest.main()
