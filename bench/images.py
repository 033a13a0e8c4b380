#!/usr/bin/env python3
"""Training from JPEG files: hgpc's input pipeline against its held-batch step and PyTorch's
DataLoader, and the Fashion-MNIST JPEG convergence of issue 21 (docs/data.md).

    python3 bench/images.py throughput --out OUT --work DIR [--count 20000]
        [--cases resnet50:128:bf16,resnet18:256:bf16] [--steps 200] [--workers 15]
  For each case: hgpc's step on one batch held on the device (--hold-batch), hgpc trained end
  to end from the synthetic 224 x 224 JPEG set (--augment imagenet: RandomResizedCrop + flip +
  Normalize, decoded on --loader-threads), with float input and compiled with --pixels u8
  (8-bit pixels to the device, flip and Normalize in the step), the loader alone
  (--data-only), and PyTorch
  (torchvision ImageFolder, the same transforms, DataLoader with num_workers, pin_memory,
  channels_last, autocast in bf16) feeding the same model. Writes images.md and images.json.

    python3 bench/images.py converge --out OUT --work DIR [--epochs 10]
  ResNet-18 (28 x 28 variant, samples/make_resnet18_28.py) on Fashion-MNIST read as a JPEG image
  folder with --augment cifar (RandomCrop(28, padding=4) + flip + Normalize), against the same
  recipe in PyTorch (DataLoader + torchvision transforms): SGD lr 0.1 momentum 0.9 wd 5e-4,
  cosine over the run, batch 128, the same epochs, the same initial weights. --seeds N runs
  each side N times (data seeds 0..N-1: order, crops and flips; the curves are the means);
  --replay also trains PyTorch on hgpc's own batches (bench/hgpc_draws.py), so that a gap can
  be put down to the random draws (replay tracks hgpc) or to hgpc's arithmetic (replay tracks
  PyTorch's DataLoader run). Prints the curves; writes converge.md and converge.json.

Both make their data with scripts/make_image_data.py (cached in --work).
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAKE = os.path.join(ROOT, "scripts", "make_image_data.py")
sys.path.insert(0, HERE)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def sh(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(map(str, cmd[:3])), p.returncode, p.stderr[-800:]))
    return p


def make_parallel(kind, out, count, jobs, extra=()):
    """make_image_data.py in `jobs` processes, each writing its own range of keys."""
    if os.path.exists(out + ".done"):
        return
    per = (count + jobs - 1) // jobs
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        list(ex.map(lambda k: sh([sys.executable, MAKE, kind, out, "--count", min(per, count - k * per),
                                  "--first", k * per, *extra]), range(jobs)))
    open(out + ".done", "w").close()


def windows_ms(metrics, batch):
    """The median step time of the metrics windows after the first two (tuning, capture)."""
    ips = []
    for line in open(metrics):
        r = json.loads(line)
        if "eval" in r or "images_per_s" not in r:
            continue
        if not ips or ips[-1] != r["images_per_s"]:
            ips.append(r["images_per_s"])
    if len(ips) < 3:
        raise RuntimeError("too few metrics windows (%d)" % len(ips))
    return statistics.median(batch / v * 1000 for v in ips[2:])


def hgpc_compile(hgpc, onnx_path, exe, batch, precision, extra=()):
    sh([hgpc, "compile", onnx_path, "-o", exe, "--batch", batch, "--precision", precision,
        "--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9", "--weight-decay", "5e-4",
        "--metrics-every", "16", *extra])


def torch_dataloader_ms(name, batch, precision, root, steps, workers):
    """PyTorch's step fed by its DataLoader from the JPEG folder: median over windows of 16."""
    import torch
    import torchvision
    import torchvision.transforms as T
    from models import make
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    model, shape, classes = make(name)
    model = model.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    tf = T.Compose([T.RandomResizedCrop(shape[1]), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     pin_memory=True, drop_last=True, persistent_workers=True,
                                     prefetch_factor=4)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    loss_fn = torch.nn.CrossEntropyLoss()
    times, done, t0 = [], 0, None
    while done < steps:
        for x, y in dl:
            x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            y = y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done += 1
            if done % 16 == 0:
                torch.cuda.synchronize()
                now = time.perf_counter()
                if t0 is not None and done > 32:
                    times.append((now - t0) / 16 * 1000)
                t0 = now
            if done >= steps:
                break
    return statistics.median(times)


def throughput(args):
    import bench
    os.makedirs(args.work, exist_ok=True)
    root = os.path.join(args.work, "jpeg224")
    t0 = time.time()
    make_parallel("synthetic", root, args.count, args.jobs, ["--size", 224, "--classes", 1000])
    print("data: %d JPEGs in %s (%.0f s)" % (args.count, root, time.time() - t0), flush=True)
    rows = []
    for case in args.cases.split(","):
        name, batch, precision = case.split(":")
        batch = int(batch)
        onnx_path = os.path.join(args.work, name + ".onnx")
        if not os.path.exists(onnx_path):
            bench.export(name, onnx_path)
        exe = os.path.join(args.work, "%s-b%d-%s" % (name, batch, precision))
        hgpc_compile(args.hgpc, onnx_path, exe, batch, precision)
        row = dict(case=case)
        m = exe + ".jsonl"
        sh([exe, "--data", "synthetic", "--hold-batch", "--steps", args.steps, "--device", "cuda",
            "--metrics", m, "--progress", "none"])
        row["held_ms"] = windows_ms(m, batch)
        common = ["--data", "imagefolder:" + root, "--augment", "imagenet", "--steps", args.steps,
                  "--device", "cuda", "--progress", "none", "--loader-threads", args.threads]
        p = sh([exe, *common, "--metrics", m])
        row["jpeg_ms"] = windows_ms(m, batch)
        p = sh([exe, *common, "--data-only"])
        row["loader_ips"] = float(re.search(r"data only: .*\(([\d.]+) images/s\)", p.stderr).group(1))
        # --pixels u8: 8-bit pixels cross to the device, ImageInput flips and normalizes in the step.
        exe8 = exe + "-u8"
        hgpc_compile(args.hgpc, onnx_path, exe8, batch, precision,
                     ["--pixels", "u8", "--normalize", ",".join(map(str, MEAN + STD))])
        sh([exe8, *common, "--metrics", m])
        row["jpeg_u8_ms"] = windows_ms(m, batch)
        try:
            row["torch_ms"] = torch_dataloader_ms(name, batch, precision, root, args.steps, args.workers)
        except Exception as e:  # noqa: BLE001 - the hgpc figures stand without it
            row["torch_error"] = repr(e)[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = ["| case | held batch ms | from JPEG ms (f32 input) | from JPEG ms (--pixels u8) | "
             "fraction of held (best) | loader alone img/s | PyTorch DataLoader ms | "
             "hgpc / PyTorch |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r.get("torch_ms")
        best = min(r["jpeg_ms"], r["jpeg_u8_ms"])
        lines.append("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %s | %s |" % (
            r["case"], r["held_ms"], r["jpeg_ms"], r["jpeg_u8_ms"], r["held_ms"] / best,
            r["loader_ips"], "%.2f" % t if t else r.get("torch_error", "")[:60],
            "%.2fx" % (t / best) if t else ""))
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "images.md"), "w") as f:
        f.write("%d synthetic 224x224 JPEGs, --augment imagenet, %s loader threads; PyTorch "
                "num_workers=%d, pin_memory, channels_last, autocast\n\n%s\n" % (
                    args.count, args.threads, args.workers, table))
    with open(os.path.join(args.out, "images.json"), "w") as f:
        json.dump(rows, f, indent=1)


def model_r18_28():
    """The model samples/make_resnet18_28.py exports, with the same initial weights (seed 0)."""
    import torch
    import torch.nn as nn
    import torchvision.models as tvm
    torch.manual_seed(0)
    m = tvm.resnet18(num_classes=10)
    m.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    m.maxpool = nn.Identity()
    return m


def replay_batches(images, labels, batch, epoch, seed):
    """hgpc's batches of one epoch under --augment cifar --seed SEED (bench/hgpc_draws.py)."""
    import numpy as np
    import torch
    import hgpc_draws
    order = hgpc_draws.epoch_order(len(labels), seed, epoch)
    for k in range(len(labels) // batch):
        idx = order[k * batch:(k + 1) * batch]
        x = np.stack([hgpc_draws.cifar_sample(images[i], seed, epoch, i) for i in idx])
        yield torch.from_numpy(x[:, None]), torch.tensor([labels[i] for i in idx])


def torch_converge(train_dir, test_dir, epochs, batch, steps_total, workers, data_seed, replay=False):
    """PyTorch's run of the recipe: the DataLoader with torchvision's transforms (its shuffling and
    draws seeded by data_seed), or, with replay, hgpc's own batches for --seed data_seed."""
    import numpy as np
    import torch
    import torch.nn as nn
    import torchvision
    import torchvision.transforms as T
    m = model_r18_28().cuda()
    torch.manual_seed(1000 + data_seed)
    mean, std = 0.2860, 0.3530
    norm = T.Normalize((mean,), (std,))
    gray = T.Grayscale(1)
    train = torchvision.datasets.ImageFolder(train_dir, transform=T.Compose([
        gray, T.RandomCrop(28, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), norm]))
    test = torchvision.datasets.ImageFolder(test_dir, transform=T.Compose([gray, T.ToTensor(), norm]))
    if replay:
        from PIL import Image
        images = [np.asarray(Image.open(p).convert("RGB").convert("L")) for p, _ in train.samples]
        labels = [c for _, c in train.samples]
    else:
        dl = torch.utils.data.DataLoader(train, batch, shuffle=True, num_workers=workers, drop_last=True,
                                         pin_memory=True, persistent_workers=True)
    tl = torch.utils.data.DataLoader(test, 1000, num_workers=workers)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps_total)
    loss_fn = nn.CrossEntropyLoss()
    curve = []
    for epoch in range(epochs):
        m.train()
        for x, y in (replay_batches(images, labels, batch, epoch, data_seed) if replay else dl):
            x = x.cuda(non_blocking=True)
            if replay:
                x = (x.float() / 255 - mean) / std
            loss = loss_fn(m(x), y.cuda(non_blocking=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        m.eval()
        correct = n = 0
        with torch.no_grad():
            for x, y in tl:
                correct += (m(x.cuda()).argmax(1).cpu() == y).sum().item()
                n += len(y)
        curve.append(100.0 * correct / n)
        print("pytorch%s seed %d epoch %d: %.2f%%" % (" (hgpc's batches)" if replay else "", data_seed,
                                                     epoch + 1, curve[-1]), flush=True)
    return curve


def mean_curve(curves):
    return [statistics.mean(c[e] for c in curves) for e in range(min(map(len, curves)))] if curves else []


def converge(args):
    os.makedirs(args.work, exist_ok=True)
    train_dir, test_dir = os.path.join(args.work, "fm-train"), os.path.join(args.work, "fm-test")
    for d, split in ((train_dir, "train"), (test_dir, "test")):
        if not os.path.exists(d + ".done"):
            sh([sys.executable, MAKE, "folder", d, "--split", split, "--fashion", args.fashion])
            open(d + ".done", "w").close()
    onnx_path = os.path.join(args.work, "r18_28.onnx")
    sh([sys.executable, os.path.join(ROOT, "samples", "make_resnet18_28.py"), onnx_path])
    batch, per_epoch = 128, 60000 // 128
    steps = per_epoch * args.epochs
    exe = os.path.join(args.work, "r18c")
    sh([args.hgpc, "compile", onnx_path, "-o", exe, "--batch", batch, "--optimizer", "sgd", "--lr",
        "0.1", "--momentum", "0.9", "--weight-decay", "5e-4", "--schedule", "cosine", "--t-max",
        steps, "--precision", args.precision])
    runs = dict(hgpc=[], pytorch=[], replay=[])
    secs = dict(hgpc=0.0, pytorch=0.0, replay=0.0)
    # Every seed changes the data order and the crops and flips, never the initial weights.
    for seed in range(args.seeds):
        t0 = time.time()
        p = sh([exe, "--data", "imagefolder:" + train_dir, "--eval", "imagefolder:" + test_dir,
                "--epochs", args.epochs, "--augment", "cifar", "--normalize", "0.2860,0.3530",
                "--device", "cuda", "--progress", "plain", "--seed", seed])
        secs["hgpc"] += time.time() - t0
        runs["hgpc"].append([float(x) for x in re.findall(r"eval after epoch \d+ .*?accuracy ([\d.]+)%", p.stderr)])
        print("hgpc seed %d: %s" % (seed, runs["hgpc"][-1]), flush=True)
        for kind in ("pytorch", "replay") if args.replay else ("pytorch",):
            t0 = time.time()
            runs[kind].append(torch_converge(train_dir, test_dir, args.epochs, batch, steps, args.workers,
                                             seed, replay=kind == "replay"))
            secs[kind] += time.time() - t0
    ours, theirs, replayed = (mean_curve(runs[k]) for k in ("hgpc", "pytorch", "replay"))
    head = "| epoch | hgpc accuracy % | PyTorch accuracy % |" + (" PyTorch on hgpc's batches % |" if replayed else "")
    lines = [head, "|---|---|---|" + ("---|" if replayed else "")]
    cell = lambda c, e: "%.2f" % c[e] if e < len(c) else ""
    for e in range(args.epochs):
        lines.append("| %d | %s | %s |" % (e + 1, cell(ours, e), cell(theirs, e)) +
                     (" %s |" % cell(replayed, e) if replayed else ""))
    table = "\n".join(lines)
    finals = lambda k: ", ".join("%.2f" % c[-1] for c in runs[k] if c)
    summary = ("ResNet-18 28x28, Fashion-MNIST JPEG folder, --augment cifar, %d epochs, %s, mean of %d "
               "seed(s): hgpc %.2f%% (%.0f s; finals %s), PyTorch %.2f%% (%.0f s; finals %s)" % (
                   args.epochs, args.precision, args.seeds, ours[-1] if ours else float("nan"),
                   secs["hgpc"], finals("hgpc"), theirs[-1], secs["pytorch"], finals("pytorch")))
    if replayed:
        summary += ", PyTorch on hgpc's batches %.2f%% (finals %s)" % (replayed[-1], finals("replay"))
    print(summary)
    print(table)
    with open(os.path.join(args.out, "converge.md"), "w") as f:
        f.write(summary + "\n\n" + table + "\n")
    with open(os.path.join(args.out, "converge.json"), "w") as f:
        json.dump(dict(hgpc=ours, pytorch=theirs, replay=replayed, runs=runs, hgpc_s=secs["hgpc"],
                       torch_s=secs["pytorch"]), f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["throughput", "converge"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--hgpc", default="hgpc")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--cases", default="resnet50:128:bf16,resnet18:256:bf16")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--precision", default="tf32")
    ap.add_argument("--seeds", type=int, default=1,
                    help="converge: runs per side, data seeds 0..N-1 (the curves are their means)")
    ap.add_argument("--replay", action="store_true",
                    help="converge: also train PyTorch on hgpc's own batches (its order, crops and "
                         "flips for the same --seed), which separates the draws from the arithmetic")
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist",
                    help="converge: the Fashion-MNIST idx.gz files")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    throughput(args) if args.what == "throughput" else converge(args)


if __name__ == "__main__":
    main()
