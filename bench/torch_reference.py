"""PyTorch's side of bench/bench.py: the step time of a torchvision-zoo model trained the way
the anchor script trains it (eager, one CUDA graph of the whole step, or torch.compile), and its
eager CUDA kernels summed by name (--op-times). bench.py sets PRECISION from its --precision
before it calls these; bench.py's docstring says what each mode and precision means.
"""
import statistics

import torch
import torch.nn as nn

from models import make

# --precision: hgpc's --precision, and what PyTorch runs for it. bf16/fp16 is PyTorch's automatic
# mixed precision (autocast; fp32 weights and optimizer) with channels_last, its fastest form;
# tf32 is channels_last too, as hgpc's --layout auto is there (issue 19).
PRECISION = "tf32"

# torch.compile's mode in fp16. reduce-overhead captures CUDA graphs (cudagraph trees), and with
# GradScaler that fails ("Offset increment outside graph capture"), so fp16 compiles without
# capture: Inductor's fused kernels, launched eagerly, with GradScaler's dynamic loss scale.
FP16_COMPILE_MODE = "default"


def torch_step_ms(name, batch, mode, iters=30, reps=5):
    """PyTorch's median step time, as the anchor script measures it."""
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model, shape, ncls = make(name)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    lossf = nn.CrossEntropyLoss()
    x = torch.randn(batch, *shape, device="cuda")
    y = torch.randint(0, ncls, (batch,), device="cuda")
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(PRECISION)
    if PRECISION == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    # graph-nchw: the whole-step graph without channels_last, to show what the layout is worth.
    nchw = mode == "graph-nchw"
    if nchw:
        mode = "graph"
    # channels_last wherever hgpc's --layout auto gives it: tf32 as well as bf16/fp16.
    if PRECISION != "fp32" and len(shape) == 3 and not nchw:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    scaler = torch.amp.GradScaler("cuda") if half == torch.float16 else None
    if scaler is not None and mode == "graph":
        # GradScaler's inf check and scale update are not capturable: capture fails with
        # "operation failed due to a previous error during capture". fp16's PyTorch references
        # are eager and torch.compile without CUDA graphs (FP16_COMPILE_MODE).
        raise RuntimeError("fp16: GradScaler cannot be captured in a CUDA graph; "
                           "use --torch-modes eager,compile")

    def forward():
        if half is None:
            return lossf(model(x), y)
        # No autocast cache: a captured graph must not keep casts from its capture.
        with torch.autocast("cuda", dtype=half, cache_enabled=False):
            return lossf(model(x), y)

    def step():
        opt.zero_grad(set_to_none=(mode == "eager"))
        loss = forward()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss
        loss.backward()
        opt.step()
        return loss

    # The peak from here on: a captured graph allocates its private pool during capture, which
    # later replays only reuse.
    torch.cuda.reset_peak_memory_stats()
    run = step
    if mode == "graph":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    elif mode == "compile":
        # A fresh Dynamo per case, with static shapes: one process compiles several models that
        # share torchvision's forward code, and Dynamo would otherwise recompile the later ones
        # with a dynamic batch dimension (slower kernels, and no hit in Inductor's cache).
        torch._dynamo.reset()
        cm = torch.compile(model, mode=FP16_COMPILE_MODE if scaler is not None else "reduce-overhead",
                           dynamic=False)

        def run():
            opt.zero_grad(set_to_none=True)
            if half is None:
                lossf(cm(x), y).backward()
            else:
                with torch.autocast("cuda", dtype=half):
                    loss = lossf(cm(x), y)
                (scaler.scale(loss) if scaler else loss).backward()
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            run()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / iters)
    peak = torch.cuda.max_memory_allocated()
    del model, opt
    torch.cuda.empty_cache()
    return statistics.median(times), peak


def torch_kernel_summary(name, batch, top=14):
    """PyTorch's eager step, its CUDA kernels summed by name (profiler), largest first."""
    from torch.profiler import ProfilerActivity, profile
    torch.backends.cudnn.benchmark = True
    model, shape, ncls = make(name)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(batch, *shape, device="cuda")
    y = torch.randint(0, ncls, (batch,), device="cuda")
    # The same precision as the timed variants: AMP autocast with channels_last for bf16/fp16
    # (fp16 without a GradScaler: the kernels are the same, and no step is skipped on random data).
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(PRECISION)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = PRECISION != "fp32"
    if PRECISION != "fp32" and len(shape) == 3:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=half or torch.bfloat16, enabled=half is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    rows = [(e.key, e.count / 3, e.device_time_total / 3000.0) for e in prof.key_averages()
            if e.device_time_total > 0]
    total = sum(r[2] for r in rows)
    out = ["  torch eager kernels (%s): %.3f ms per step" % (PRECISION, total)]
    for k, n, ms in sorted(rows, key=lambda r: -r[2])[:top]:
        out.append("    %-60.60s %5.0f %8.3f ms" % (k, n, ms))
    del model, opt
    torch.cuda.empty_cache()
    return out
