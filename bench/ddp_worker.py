#!/usr/bin/env python3
"""One PyTorch DDP training benchmark, the torch side of bench/scaling.py. Launch it with

    python3 -m torch.distributed.run --standalone --nproc_per_node N bench/ddp_worker.py \
        --model resnet50 --batch 128 --modes eager,graph --out RESULT.json

Every rank trains the model of bench/models.py on its own synthetic batch of --batch images
(the per-GPU batch) with cross-entropy and SGD (lr 0.01, momentum 0.9, weight decay 5e-4),
wrapped in DistributedDataParallel over NCCL (default buckets). Timing follows
../shared/anchors/torch_train_bench.py: 5 warm-up steps, then --reps repeats of --iters steps
between CUDA events; a rank's time is the median repeat. The ranks' times are combined with a
max (the step is synchronous, so they differ only by timing noise) and the global throughput is
ranks x batch / time.

Modes: eager, and graph (the whole step - forward, backward with DDP's all-reduces, optimizer -
captured as one CUDA graph). For graph, DDP is built with static_graph=True inside a side-stream
context and runs 15 eager steps there before the capture on that same stream (PyTorch's
CUDA-graph notes ask for at least 11 DDP iterations before capturing a full backward). Rank 0 rewrites --out after each mode,
so a mode that fails, or hangs until the caller's timeout, keeps the earlier modes' results.

--precision: tf32 (fp32 storage, TF32 tensor cores: PyTorch's default for convolutions), fp32
(TF32 off) or bf16 (autocast to bfloat16 and channels_last, as the anchors' bf16 runs).
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import make  # noqa: E402


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_mode(args, mode, rank, world, local):
    cuda = args.device == "cuda"
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model, shape, ncls = make(args.model)
    model = model.to(dev)
    bf16 = args.precision == "bf16"
    if bf16:
        model = model.to(memory_format=torch.channels_last)
    x = torch.randn(args.batch, *shape, device=dev)
    if bf16:
        x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, ncls, (args.batch,), device=dev)
    lossf = nn.CrossEntropyLoss()

    def build():
        ddp = DDP(model, device_ids=[local] if cuda else None, static_graph=(mode == "graph"))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        return ddp, opt

    def make_step(ddp, opt):
        def step():
            opt.zero_grad(set_to_none=(mode == "eager"))
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = lossf(ddp(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    if mode == "eager":
        ddp, opt = build()
        run = make_step(ddp, opt)
    elif mode == "graph":
        if not cuda:
            raise RuntimeError("the graph mode needs CUDA")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            ddp, opt = build()
            step = make_step(ddp, opt)
            for _ in range(15):
                step()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        dist.barrier()
        g = torch.cuda.CUDAGraph()
        # Captured on the stream DDP was built and warmed up on: its reducer's autograd hooks
        # and AccumulateGrad nodes then all belong to the capturing stream.
        with torch.cuda.graph(g, stream=s):
            step()
        run = g.replay
    else:
        raise ValueError("unknown mode " + mode)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for _ in range(5):
        run()
    sync()
    dist.barrier()
    times = []
    for _ in range(args.reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            run()
        if cuda:
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / args.iters)
        else:
            times.append((time.perf_counter() - t0) * 1e3 / args.iters)
    mine = statistics.median(times)
    peak = float(torch.cuda.max_memory_allocated()) if cuda else 0.0
    t = torch.tensor([mine, peak], device=dev, dtype=torch.float64)
    every = [torch.zeros_like(t) for _ in range(world)]
    dist.all_gather(every, t)
    per_rank = [float(v[0]) for v in every]
    ms = max(per_rank)
    return dict(ms=ms, per_rank_ms=per_rank, images_per_s=world * args.batch / ms * 1000,
                spread=(max(times) - min(times)) / mine,
                peak_bytes=max(float(v[1]) for v in every))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True, help="per-GPU batch")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--precision", default="tf32", choices=["tf32", "fp32", "bf16"])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a smoke test of this script (gloo, eager only), not a benchmark")
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cpu":
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        try:
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        except TypeError:  # a torch without device_id (before 2.3)
            dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cudnn.benchmark = True
    tf32 = args.precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32

    try:
        nccl = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a CPU build
        nccl = None
    result = dict(model=args.model, batch=args.batch, ranks=world, precision=args.precision,
                  torch=torch.__version__,
                  nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl))
    for mode in args.modes.split(","):
        t0 = time.time()
        try:
            result[mode] = run_mode(args, mode, rank, world, local)
        except Exception as e:  # noqa: BLE001 - recorded; the other modes still run
            result[mode + "_error"] = repr(e)[:400]
            if rank == 0:
                traceback.print_exc()
        result[mode + "_wall_s"] = round(time.time() - t0, 1)
        if args.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        if rank == 0:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(result, f, indent=1)
            os.replace(tmp, args.out)
            print(json.dumps(result), flush=True)
        if mode + "_error" in result:
            break  # a failed capture can leave NCCL or the stream in a state not worth timing
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
