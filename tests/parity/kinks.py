#!/usr/bin/python3
"""Kinks: the discrete decisions of a training step that float32 rounding can tip, found in
hgpc's run, proven to be rounding, and forced in the float64 reference.

A training step is continuous in its inputs except at a few decisions, and each decision can go
the other way when a value lies within rounding distance of its threshold:

- relu: a ReLU's input element is on one side of zero (module ReLU or F.relu alike);
- maxpool: a max-pooling window picks its largest element, and two of them are near-equal;
- grad-sign: Adam's first step is lr x sign(g) per element, so a gradient element near zero
  moves its weight by a whole learning rate either way.

When hgpc's run takes the other side from float64 at such a decision (and PyTorch float32 takes
float64's side, or the difference would be in PyTorch's own drift already), every gradient
downstream of it legitimately differs. Such a decision is a `Kink`, named element by element:
the ONNX node (or the parameter) where it is decided, the element, the step, and the decisive
value in hgpc's run, PyTorch float32's and float64's, with the error `bound` of that tensor (the
larger of the two float32 runs' largest distance from float64 over it). `check_kink` shows that
it is one: the two float32 runs are on different sides and every value lies within the bound.
`forced` then makes the float64 reference take hgpc's side of each named decision, changing the
decisive value by no more than the bound: a ReLU input becomes +-1e-30, the window element hgpc
picked becomes the window's largest (by one ulp), a gradient element takes hgpc's sign with its
own magnitude. The forward edits pass gradients straight through, so the forced reference is
the float64 step of a model whose forward differs from float64's by less than float32 rounding.

The decisions are found at the functional level: F.relu and F.max_pool2d are replaced while a
run is watched (nn.ReLU and nn.MaxPool2d call them), and their calls in one forward pass come
in the order of the exported graph's Relu and MaxPool nodes; `find_kinks` checks that each pair
has one shape and near values, so a model whose order differs fails loudly.
"""
import contextlib
import os
import subprocess

import numpy as np
import torch
import torch.nn.functional as F

# The functions a watched run replaces, as PyTorch defines them.
RELU, MAX_POOL2D = F.relu, F.max_pool2d
TINY = 1e-30  # a forced ReLU input: hgpc's side, and as near zero as float64 allows


class Kink:
    """One decision on hgpc's side. `kind` is relu, maxpool or grad-sign; `node` the ONNX node
    name (a parameter's name for grad-sign); `index` the element (a ReLU input's or the
    parameter's element, a pooling output's for maxpool); `step` 0-based. For maxpool, `pick`
    and `chose` are the flat indices within the (n, c) plane of the input element that hgpc's
    window picks and that float64's picks, and each run's value is x[chose] - x[pick] (positive
    in float64, at most 0 in hgpc). For relu the value is the ReLU's input, for grad-sign the
    gradient element."""

    def __init__(self, kind, node, index, step, hgpc, torch, float64, bound, pick=None,
                 chose=None):
        self.kind, self.node, self.index, self.step = kind, node, tuple(index), step
        self.hgpc, self.torch, self.float64, self.bound = hgpc, torch, float64, bound
        self.pick, self.chose = pick, chose

    def key(self):
        return (self.kind, self.node, self.index, self.step, self.pick)

    def __repr__(self):
        picks = "" if self.pick is None else " picks %d (float64 %d)" % (self.pick, self.chose)
        return ("Kink(%s %s %s%s, step %d: hgpc %.3e, torch %.3e, float64 %.3e, error %.1e)"
                % (self.kind, self.node, list(self.index), picks, self.step + 1, self.hgpc,
                   self.torch, self.float64, self.bound))


def save(kinks, path):
    """Writes kinks as JSON, one object a kink (a case that crosses many names them in a file:
    parity.py's KINKS takes its path)."""
    import json
    with open(path, "w") as f:
        json.dump([dict(vars(k), index=list(k.index)) for k in kinks], f, indent=0)
        f.write("\n")


def load(path):
    import json
    with open(path) as f:
        return [Kink(**d) for d in json.load(f)]


def check_kink(k):
    """Raises ValueError unless `k` is a kink: hgpc and float64 on different sides, both values
    within the tensor's error. (PyTorch float32's value is the witness that float64's side is
    the one float32 takes without the error hgpc has; it lies within the error of float64 run
    without kinks forced, which after a forced kink may be farther from this one.)"""
    if k.kind == "maxpool":
        apart = k.hgpc <= 0 <= k.float64 and (k.hgpc, k.float64) != (0, 0)
    else:
        apart = (k.hgpc > 0) != (k.float64 > 0)
    if not apart:
        raise ValueError("%r: hgpc and float64 are on the same side; not a kink" % k)
    if max(abs(k.hgpc), abs(k.float64)) > k.bound:
        raise ValueError("%r: a value is farther from the threshold than the error" % k)


def decision_nodes(onnx_path):
    """The exported graph's decisions in graph order: (kind, node name, input tensor name)."""
    import onnx
    kinds = {"Relu": "relu", "MaxPool": "maxpool"}
    return [(kinds[n.op_type], n.name, n.input[0]) for n in onnx.load(onnx_path).graph.node
            if n.op_type in kinds]


def _pool_indices(x, args, kwargs):
    kwargs = dict(kwargs, return_indices=True)
    return MAX_POOL2D(torch.as_tensor(x), *args, **kwargs)[1].numpy()


@contextlib.contextmanager
def _watched(model, on_call):
    """While active, every F.relu and F.max_pool2d call of `model`'s forward passes its input
    through on_call(kind, ordinal, x, pool args) and uses what it returns; ordinals count per
    kind from each forward's start."""
    counts = {}
    handle = model.register_forward_pre_hook(lambda mod, inputs: counts.clear())

    def relu(input, inplace=False):
        c = counts["relu"] = counts.get("relu", -1) + 1
        return RELU(on_call("relu", c, input, None), inplace=inplace)

    def max_pool2d(input, *args, **kwargs):
        c = counts["maxpool"] = counts.get("maxpool", -1) + 1
        return MAX_POOL2D(on_call("maxpool", c, input, (args, kwargs)), *args, **kwargs)

    F.relu, F.max_pool2d = relu, max_pool2d
    try:
        yield
    finally:
        F.relu, F.max_pool2d = RELU, MAX_POOL2D
        handle.remove()


def _forcer(kinks, nodes, counter):
    """on_call for _watched: moves the named decisions of the current step to hgpc's side."""
    ordinal = {}
    for kind in ("relu", "maxpool"):
        names = [n for k2, n, _ in nodes if k2 == kind]
        ordinal.update({(kind, n): i for i, n in enumerate(names)})
    by_call = {}
    for k in kinks:
        if k.kind != "grad-sign":
            check_kink(k)
            by_call.setdefault((k.kind, ordinal[(k.kind, k.node)], k.step), []).append(k)

    def on_call(kind, c, x, pool):
        hit = by_call.get((kind, c, counter[0]))
        if not hit:
            return x
        xd = x.detach()
        value = xd.clone()
        if kind == "relu":
            for k in hit:
                value[k.index] = TINY if k.hgpc > 0 else -TINY
        else:
            now = _pool_indices(xd, *pool)
            for k in hit:
                n, ch = k.index[0], k.index[1]
                chose = int(now[k.index])
                if chose == k.pick:
                    continue
                plane = xd[n, ch].reshape(-1)
                top = torch.nextafter(plane[chose], torch.tensor(float("inf"), dtype=xd.dtype))
                value[n, ch].view(-1)[k.pick] = top
        # Straight through: x - xd is exactly 0 and carries x's gradient, so the result holds
        # the forced values exactly (x + (value - xd) would round 1e-30 away).
        return x - xd + value
    return on_call


@contextlib.contextmanager
def forced(model, kinks, counter, nodes):
    """While active, `model` (float64) takes hgpc's side of each named kink at its step
    (`counter`, a one-element list the training loop sets to the step). `nodes` is
    decision_nodes() of the model's export."""
    def clamp(k):
        def hook(g):
            if counter[0] != k.step:
                return None
            g = g.clone()
            g[k.index] = abs(g[k.index]) * (1 if k.hgpc > 0 else -1)
            return g
        return hook
    params = dict(model.named_parameters())
    handles = []
    for k in kinks:
        if k.kind == "grad-sign":
            check_kink(k)
            handles.append(params[k.node].register_hook(clamp(k)))
    try:
        if any(k.kind != "grad-sign" for k in kinks):
            with _watched(model, _forcer(kinks, nodes, counter)):
                yield
        else:
            yield
    finally:
        for h in handles:
            h.remove()


def decision_inputs(model, x, kinks=(), nodes=(), step=0):
    """PyTorch's forward of `model` on `x` with `kinks` of `step` forced: the input of every
    F.relu and F.max_pool2d call in call order, as (kind, float64 array, pool args)."""
    got = []
    counter = [step]
    force = _forcer(kinks, nodes, counter) if kinks else (lambda *a: a[2])

    def on_call(kind, c, xin, pool):
        xin = force(kind, c, xin, pool)
        got.append((kind, xin.detach().double().numpy().copy(), pool))
        return xin
    with torch.no_grad(), _watched(model, on_call):
        model(x)
    return got


def set_initializer(t, values):
    """Replaces the data of the ONNX initializer `t` by `values`, in the initializer's own dtype
    (a buffer of indices stays integer)."""
    import onnx.numpy_helper
    dtype = onnx.numpy_helper.to_array(t).dtype
    t.CopyFrom(onnx.numpy_helper.from_array(np.asarray(values).astype(dtype), t.name))


def hgpc_decision_inputs(onnx_path, weights, x, dump_exe, work, device="cpu"):
    """hgpc's forward (hgp_forward_dump on the CPU backend, or on CUDA with device "cuda") of
    `onnx_path` holding `weights` (name -> array, or None for the file's own) on batch `x`: the
    input of every Relu and MaxPool node, in graph order, as float64 arrays (flat)."""
    import onnx
    import onnx.numpy_helper
    m = onnx.load(onnx_path)
    if weights:
        for t in m.graph.initializer:
            if t.name in weights:
                set_initializer(t, weights[t.name])
    nodes = decision_nodes(onnx_path)
    if not nodes:
        return []  # a model without ReLU and max pooling (EfficientNet): nothing to dump
    tensors = list(dict.fromkeys(name for _, _, name in nodes))
    del m.graph.output[:]
    for n in tensors:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(n))
    probe, xin, out = (os.path.join(work, f) for f in ("probe.onnx", "probe_x.f32", "probe"))
    os.makedirs(out, exist_ok=True)
    onnx.save(m, probe)
    np.ascontiguousarray(x, dtype=np.float32).tofile(xin)
    flags = ["--device", "cuda"] if device == "cuda" else []
    p = subprocess.run([dump_exe, *flags, probe, xin, out], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("hgp_forward_dump failed (%d): %s" % (p.returncode, p.stderr))
    vals = {n: np.fromfile(os.path.join(out, "output_%d.f32" % i), dtype=np.float32)
            for i, n in enumerate(tensors)}
    return [vals[name].astype(np.float64) for _, _, name in nodes]


class Chaotic(ValueError):
    """PyTorch's own float32 forward is far from float64's at a step (a quarter of a decision
    tensor's largest value or more): the earlier steps' rounding has been amplified beyond the
    point where single decisions can be named. From that step on, the runs are judged against
    PyTorch float32's own drift alone, which is then large, and no more kinks are searched."""


def compare_decisions(nodes, h_inputs, runs, step):
    """The decisions hgpc takes on the other side from float64 while PyTorch float32 takes
    float64's: `h_inputs` from hgpc_decision_inputs, `runs` maps float32, float64 (the
    reference for hgpc, earlier kinks forced) and free64 (PyTorch float32's reference: float64
    with no kink forced) to decision_inputs' lists. The error bound of a tensor is the larger of
    hgpc's largest distance from float64 and PyTorch float32's from free64 (twice that for a
    difference of two pooling inputs). Returns Kinks (check_kink may still reject one whose
    values lie beyond the error: that is not rounding)."""
    if not (len(runs["float64"]) == len(runs["float32"]) == len(nodes)):
        raise ValueError("%d Relu/MaxPool nodes in the ONNX graph, %d F.relu/F.max_pool2d calls "
                         "in PyTorch" % (len(nodes), len(runs["float64"])))
    kinks = []
    for i, (kind, name, _) in enumerate(nodes):
        k64, e64, pool = runs["float64"][i]
        e32, f64 = runs["float32"][i][1], runs["free64"][i][1]
        if k64 != kind or h_inputs[i].size != e64.size:
            raise ValueError("node %s (%s) does not line up with PyTorch's call %d (%s, shape "
                             "%s)" % (name, kind, i, k64, list(e64.shape)))
        h = h_inputs[i].reshape(e64.shape)
        dh, d32 = float(np.abs(h - e64).max()), float(np.abs(e32 - f64).max())
        err = max(dh, d32)
        top = max(float(np.abs(e64).max()), 1e-30)
        if d32 > 0.25 * top:
            raise Chaotic("step %d, node %s: PyTorch float32's own input is %.1e from float64's "
                          "(largest |value| %.1e; hgpc's is %.1e from its reference)"
                          % (step + 1, name, d32, top, dh))
        if err > 0.25 * top:
            raise ValueError("node %s: hgpc's input is %.1e from float64's and PyTorch float32's "
                             "%.1e from its float64 (largest |value| %.1e): the graph's order "
                             "and PyTorch's calls differ, or the forward is wrong"
                             % (name, dh, d32, float(np.abs(e64).max())))
        if kind == "relu":
            flips = ((h > 0) != (e64 > 0)) & ((e32 > 0) == (f64 > 0))
            for idx in zip(*np.nonzero(flips)):
                idx = tuple(int(v) for v in idx)
                kinks.append(Kink(kind, name, idx, step, float(h[idx]), float(e32[idx]),
                                  float(e64[idx]), err))
            continue
        ih, i32, i64, if64 = (_pool_indices(a, *pool) for a in (h, e32, e64, f64))
        for idx in zip(*np.nonzero((ih != i64) & (i32 == if64))):
            idx = tuple(int(v) for v in idx)
            pick, chose = int(ih[idx]), int(i64[idx])
            planes = [a[idx[0], idx[1]].reshape(-1) for a in (h, e32, e64)]
            vals = [float(p[chose] - p[pick]) for p in planes]
            kinks.append(Kink(kind, name, idx, step, *vals, 2 * err, pick=pick, chose=chose))
    return kinks


def is_kink(k):
    try:
        check_kink(k)
        return True
    except ValueError:
        return False


def find_kinks(onnx_path, model, weights, x, step, dump_exe, work, forced_now=(), rejected=None,
               device="cpu"):
    """The ReLU and max-pooling decisions hgpc's forward takes on the other side at training
    step `step` (0-based) on batch `x` (float32 numpy). Each run starts the step from its own
    state: `weights` maps "hgpc", "float32", "float64" (earlier kinks forced) and "free64"
    (none forced) to that run's state before the step (None at step 0: the model's own), so a
    decision that the runs' slightly different weights tip counts as well as one that rounding
    tips. `forced_now`, kinks of this step already
    named, are forced in the float64 forward. A ReLU kink also tips a max-pooling window that
    follows it; the search runs twice, the second time with the first's ReLU kinks forced, so
    that only the ReLU is named. Decisions hgpc takes on the other side farther from the
    threshold than the error are no kinks: they go to `rejected` (a list) when one is given."""
    from judge import with_weights
    weights = weights or {}
    nodes = decision_nodes(onnx_path)
    h_inputs = hgpc_decision_inputs(onnx_path, weights.get("hgpc"), x, dump_exe, work, device)
    ref32 = with_weights(model, weights.get("float32"), torch.float32).train()
    ref64 = with_weights(model, weights.get("float64"), torch.float64).train()
    free64 = with_weights(model, weights.get("free64"), torch.float64).train()
    x64 = torch.from_numpy(x).double()
    base = dict(float32=decision_inputs(ref32, torch.from_numpy(x)),
                free64=decision_inputs(free64, x64))

    def search(named):
        runs = dict(base, float64=decision_inputs(ref64, x64, named, nodes, step))
        return compare_decisions(nodes, h_inputs, runs, step)
    def sort(found):
        if rejected is not None:
            rejected.extend(k for k in found if not is_kink(k))
        return [k for k in found if is_kink(k)]
    named = [k for k in forced_now if k.step == step and k.kind != "grad-sign"]
    first = sort(search(named))
    relus = [k for k in first if k.kind == "relu"]
    if not relus:
        return first
    return relus + [k for k in sort(search(named + relus)) if k.kind == "maxpool"]


def find_grad_kinks(g_hgpc, g32, g64, free64, step=0):
    """Adam's first-step decisions: gradient elements (name -> array, per parameter) whose sign
    in hgpc differs from float64's (`g64`, the step's forward kinks forced) while PyTorch
    float32's agrees with float64's own (`free64`), with the parameter's largest gradient error
    in either float32 run as the bound."""
    kinks = []
    for name in sorted(g64):
        h, e32, e64, f64 = g_hgpc[name], g32[name], g64[name], free64[name]
        err = max(float(np.abs(h - e64).max()), float(np.abs(e32 - f64).max()))
        flips = ((h > 0) != (e64 > 0)) & ((e32 > 0) == (f64 > 0)) & (h != 0)
        for idx in zip(*np.nonzero(flips)):
            idx = tuple(int(v) for v in idx)
            kinks.append(Kink("grad-sign", name, idx, step, float(h[idx]), float(e32[idx]),
                              float(e64[idx]), err))
    return kinks
