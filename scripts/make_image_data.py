#!/usr/bin/python3
"""Makes image data sets for hgpc's tests, demos and benchmarks (docs/data.md).

  make_image_data.py folder OUT [--split train|test] [--format jpg|png] [--size N] [--per-class K]
      Fashion-MNIST (Debian's dataset-fashion-mnist) as an ImageFolder: OUT/<class>/<n>.<fmt>,
      the ten class names of Fashion-MNIST prefixed by their index so that sorting keeps the
      original labels. K images per class (default all); N x N pixels (default 28).
  make_image_data.py shards OUT [--per-shard M] (and the folder options)
      The same samples as WebDataset tar shards OUT/shard-000000.tar, ...: key.jpg|png + key.cls.
  make_image_data.py synthetic OUT [--count N] [--first I] [--size S] [--classes C] [--quality Q] [--shards]
      Natural-image-like RGB JPEGs (smooth gradients, blobs, edges and noise) for timing the
      input pipeline; S x S pixels (default 224), quality Q (default 90).
  make_image_data.py corrupt OUT
      A corpus of bad and unusual inputs in ImageFolder layout: truncated and garbage JPEGs, a
      text file named .jpg, a zero-byte file, a decompression-bomb header, CMYK and grayscale
      JPEGs, 16-bit, palette and RGBA PNGs, and an empty class folder.

Only PIL and numpy are needed (Debian's python3-pil, python3-numpy).
"""
import argparse
import gzip
import io
import os
import struct
import sys
import tarfile
import zlib

import numpy as np
from PIL import Image

FASHION = "/usr/share/datasets/fashion-mnist"
CLASSES = ["0-tshirt", "1-trouser", "2-pullover", "3-dress", "4-coat", "5-sandal", "6-shirt",
           "7-sneaker", "8-bag", "9-boot"]


def read_idx(split, root):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(root, prefix + "-images-idx3-ubyte.gz")) as f:
        data = f.read()
    n, h, w = struct.unpack(">III", data[4:16])
    images = np.frombuffer(data, np.uint8, offset=16).reshape(n, h, w)
    with gzip.open(os.path.join(root, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels


def encode(img, fmt, quality=90):
    buf = io.BytesIO()
    if fmt == "jpg":
        img.save(buf, format="JPEG", quality=quality)
    else:
        img.save(buf, format="PNG")
    return buf.getvalue()


def fashion_samples(args):
    images, labels = read_idx(args.split, args.fashion)
    counts = [0] * 10
    for i in range(len(labels)):
        c = int(labels[i])
        if args.per_class and counts[c] >= args.per_class:
            continue
        counts[c] += 1
        img = Image.fromarray(images[i], mode="L")
        if args.size != 28:
            img = img.resize((args.size, args.size), Image.BILINEAR)
        yield "%06d" % i, c, encode(img, args.format)


def write_folder(out, samples):
    for c in CLASSES:
        os.makedirs(os.path.join(out, c), exist_ok=True)
    n = 0
    for key, c, data in samples:
        ext = "jpg" if data[:2] == b"\xff\xd8" else "png"
        with open(os.path.join(out, CLASSES[c] if c < len(CLASSES) else "class%03d" % c,
                               key + "." + ext), "wb") as f:
            f.write(data)
        n += 1
    return n


def write_shards(out, samples, per_shard, first=0):
    """Shards numbered from first // per_shard, so that processes writing parts don't collide
    (give each a --first that is a multiple of --per-shard)."""
    os.makedirs(out, exist_ok=True)
    tar, n, shard = None, 0, first // per_shard

    def add(name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(data))

    for key, c, data in samples:
        if tar is None or n % per_shard == 0:
            if tar:
                tar.close()
            tar = tarfile.open(os.path.join(out, "shard-%06d.tar" % shard), "w",
                               format=tarfile.USTAR_FORMAT)
            shard += 1
        ext = "jpg" if data[:2] == b"\xff\xd8" else "png"
        add(key + "." + ext, data)
        add(key + ".cls", str(c).encode())
        n += 1
    if tar:
        tar.close()
    return n


def synthetic_samples(args):
    s = args.size
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
    rng = np.random.default_rng([args.seed, args.first])
    for i in range(args.first, args.first + args.count):
        c = i % args.classes
        img = np.zeros((s, s, 3), np.float32)
        for ch in range(3):  # smooth gradients
            a, b, d = rng.uniform(-1, 1, 3)
            img[..., ch] = 128 + 80 * (a * xx + b * yy) + 30 * np.sin(6.28 * (d * xx + yy) * (1 + c % 4))
        for _ in range(int(rng.integers(3, 8))):  # blobs with hard edges
            cx, cy, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.05, 0.3)
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
            img[mask] = rng.uniform(0, 255, 3)
        img += rng.normal(0, 8, img.shape)  # sensor noise
        pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
        yield "%07d" % i, c, encode(pil, "jpg", args.quality)


def jpeg_bytes(img, **kw):
    buf = io.BytesIO()
    img.save(buf, format="JPEG", **kw)
    return buf.getvalue()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_corrupt(out):
    """Good images in classes a-good and b-good; bad ones spread over them; c-empty is empty."""
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8), "RGB")
    gray = Image.fromarray(rng.integers(0, 255, (40, 48), dtype=np.uint8), "L")
    for c in ("a-good", "b-good", "c-empty"):
        os.makedirs(os.path.join(out, c), exist_ok=True)
    files = {
        "a-good/rgb.jpg": jpeg_bytes(rgb, quality=90),
        "a-good/gray.jpg": jpeg_bytes(gray, quality=90),
        "a-good/cmyk.jpg": jpeg_bytes(rgb.convert("CMYK"), quality=90),
        "a-good/rgb.png": encode(rgb, "png"),
        "b-good/gray.png": encode(gray, "png"),
        "b-good/palette.png": encode(rgb.convert("P"), "png"),
        "b-good/rgba.png": encode(rgb.convert("RGBA"), "png"),
        "b-good/gray16.png": encode(Image.fromarray(
            (rng.integers(0, 65535, (40, 48))).astype(np.uint16)), "png"),
        "a-good/UPPER.JPG": jpeg_bytes(rgb, quality=75),
    }
    full = jpeg_bytes(rgb, quality=90)
    bad = {
        "a-good/truncated.jpg": full[: len(full) // 2],
        "a-good/garbage.jpg": b"\xff\xd8\xff" + bytes(rng.integers(0, 255, 500, dtype=np.uint8)),
        "b-good/text.jpg": b"this is not an image\n",
        "b-good/empty.png": b"",
        "b-good/truncated.png": encode(rgb, "png")[:200],
        # A valid PNG header that promises 30,000 x 30,000 pixels, with no data behind it.
        "a-good/bomb.png": b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)),
    }
    for name, data in {**files, **bad}.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "a-good", "notes.txt"), "w") as f:
        f.write("not an image, and not named like one: ignored\n")
    return len(files), len(bad)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["folder", "shards", "synthetic", "corrupt"])
    p.add_argument("out")
    p.add_argument("--split", choices=["train", "test"], default="train")
    p.add_argument("--fashion", default=FASHION, help="the Fashion-MNIST idx.gz files")
    p.add_argument("--format", choices=["jpg", "png"], default="jpg")
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--per-class", type=int, default=0)
    p.add_argument("--per-shard", type=int, default=1000)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--first", type=int, default=0,
                   help="synthetic: the first image's index (several processes write one set)")
    p.add_argument("--shards", action="store_true", help="synthetic: write shards, not a folder")
    a = p.parse_args()
    if a.kind == "corrupt":
        good, bad = write_corrupt(a.out)
        print("wrote %d good and %d bad files to %s" % (good, bad, a.out))
        return
    if a.kind == "synthetic":
        a.size = a.size or 224
        samples = synthetic_samples(a)
        CLASSES[:] = ["class%03d" % c for c in range(a.classes)]
    else:
        a.size = a.size or 28
        samples = fashion_samples(a)
    if a.kind == "shards" or a.shards:
        n = write_shards(a.out, samples, a.per_shard, a.first)
    else:
        n = write_folder(a.out, samples)
    print("wrote %d images to %s" % (n, a.out))


if __name__ == "__main__":
    sys.exit(main())
