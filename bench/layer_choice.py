"""Step 1 of bench/layers.py, on the build machine: the conv layers and the width hgpc chooses.

The layers are those of the anchor study (../shared/anchors/conv_concurrency.py, read without
running it) and every distinct Conv2d of the benchmark zoo (bench/models.py at its benchmark
batch sizes). For each, `hgpc plan` on a one-conv training model says how many sub-batches its
Conv and ConvBwdData steps get; choose() writes them to the data file that step 2 (layers.py on
the GPU machine) measures against. layers.py's docstring says what is timed and why the query
is what it is.
"""
import ast
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The zoo's benchmark cases whose conv layers are studied (bench/models.py names, batch).
ZOO = [("resnet18_cifar", 128), ("resnet18", 32), ("resnet50", 32), ("resnet50", 128),
       ("vgg16", 32), ("alexnet", 128), ("mobilenet_v2", 64), ("googlenet", 64), ("lenet5", 64)]
# The layers were measured in NCHW (PyTorch's default layout, tf32), so the plans asked about
# them are NCHW too (hgpc's tf32 default is channels-last, docs/layout.md).
QUERY = ("--target", "h200", "--max-streams", "8", "--no-pipeline", "--layout", "nchw")
DEFAULT_QUERY = ("--target", "h200", "--layout", "nchw")
SHAPE_KEYS = ("N", "C", "H", "W", "K", "R", "S", "stride", "pad", "groups", "dilation")


def key(layer):
    """What makes two layers the same: every shape field (pairs as tuples)."""
    return tuple(tuple(layer[k]) if isinstance(layer[k], list) else layer[k] for k in SHAPE_KEYS)



def anchor_layers(path):
    """The `layers = [...]` list of conv_concurrency.py, read without running it (it needs CUDA):
    name, N, C, H, W, K, R, stride, with pad R // 2."""
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "layers" for t in node.targets):
            rows = ast.literal_eval(node.value)
            break
    else:
        sys.exit("no `layers = [...]` in " + path)
    out = []
    for name, n, c, h, w, k, r, st in rows:
        out.append(dict(name=name, source="anchor", N=n, C=c, H=h, W=w, K=k, R=r, S=r,
                        stride=[st, st], pad=[r // 2, r // 2], groups=1, dilation=[1, 1]))
    return out


def zoo_layers():
    """Every distinct Conv2d of each zoo case, in network order, found by forward hooks."""
    import torch
    sys.path.insert(0, HERE)
    from models import make
    out = []
    for name, batch in ZOO:
        model, shape, _ = make(name)
        model.eval()
        names = {m: n for n, m in model.named_modules()}
        found = []

        def hook(mod, inp, _out):
            x = inp[0]
            found.append(dict(name="%s.b%d:%s" % (name, batch, names[mod]), source="zoo",
                              case="%s:%d" % (name, batch), N=batch, C=int(x.shape[1]),
                              H=int(x.shape[2]), W=int(x.shape[3]), K=mod.out_channels,
                              R=mod.kernel_size[0], S=mod.kernel_size[1], stride=list(mod.stride),
                              pad=list(mod.padding), groups=mod.groups, dilation=list(mod.dilation)))

        hooks = [m.register_forward_hook(hook) for m in model.modules()
                 if isinstance(m, torch.nn.Conv2d)]
        with torch.no_grad():
            model(torch.zeros(1, *shape))
        for h in hooks:
            h.remove()
        out += found
        print("%-16s b%-3d %3d conv layers" % (name, batch, len(found)), flush=True)
    return out


def dedupe(layers):
    """First occurrence of each shape; later ones are listed in its `also`."""
    seen, out = {}, []
    for l in layers:
        k = key(l)
        if k in seen:
            seen[k].setdefault("also", []).append(l["name"])
        else:
            l = dict(l)
            seen[k] = l
            out.append(l)
    return out


def one_conv_onnx(l, path):
    """x -> Add(learned per-channel shift) -> Conv (no bias) -> GlobalAveragePool -> Flatten."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.RandomState(0)
    w = (rng.randn(l["K"], l["C"] // l["groups"], l["R"], l["S"]) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(np.zeros((1, l["C"], 1, 1), np.float32), "shift"),
             numpy_helper.from_array(w, "conv.weight")]
    (ph, pw) = l["pad"]
    nodes = [helper.make_node("Add", ["x", "shift"], ["a"]),
             helper.make_node("Conv", ["a", "conv.weight"], ["c"], kernel_shape=[l["R"], l["S"]],
                              strides=l["stride"], pads=[ph, pw, ph, pw], group=l["groups"],
                              dilations=l["dilation"]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Flatten", ["p"], ["logits"], axis=1)]
    graph = helper.make_graph(
        nodes, "one_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [l["N"], l["C"], l["H"], l["W"]])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [l["N"], l["K"]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def plan_widths(hgpc, path, batch, flags):
    """Sub-batches of the Conv and ConvBwdData steps in `hgpc plan`'s step table (width x depth
    of the first slice; docs/plan-format.md)."""
    r = subprocess.run([hgpc, "plan", path, "--batch", str(batch)] + list(flags),
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("hgpc plan %s: exit %d\n%s" % (path, r.returncode, r.stderr[-2000:]))
    got = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) > 6 and f[0].isdigit() and f[1] in ("Conv", "ConvBwdData") and f[1] not in got:
            got[f[1]] = int(f[4]) * int(f[5])
    if set(got) != {"Conv", "ConvBwdData"}:
        raise RuntimeError("hgpc plan %s: no Conv/ConvBwdData step in\n%s" % (path, r.stdout[:3000]))
    return {"fwd": got["Conv"], "dgrad": got["ConvBwdData"]}


def choose(args):
    layers = anchor_layers(args.anchors)
    n_anchor = len(layers)
    zoo = zoo_layers()
    layers = dedupe(layers + zoo)
    print("%d anchor layers + %d zoo conv layers -> %d distinct" % (n_anchor, len(zoo), len(layers)))
    version = subprocess.run([args.hgpc, "--version"], capture_output=True, text=True).stdout.strip()
    # The compiler's last change in the checkout the binary sits in (its HEAD may have moved on
    # in parts that do not touch planning).
    repo = os.path.dirname(os.path.abspath(args.hgpc))
    rev = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h", "--", ":/compiler",
                          ":/passes", ":/frontends"], capture_output=True, text=True).stdout.strip()
    if rev:
        version += ", compiler sources at " + rev
    with tempfile.TemporaryDirectory() as tmp:
        for i, l in enumerate(layers):
            path = os.path.join(tmp, "l%d.onnx" % i)
            one_conv_onnx(l, path)
            l["chosen"] = plan_widths(args.hgpc, path, l["N"], QUERY)
            l["default"] = plan_widths(args.hgpc, path, l["N"], DEFAULT_QUERY)
    data = {
        "about": "conv layers for bench/layers.py and the split width hgpc chooses for each "
                 "(written by bench/layers.py --choose; do not edit by hand)",
        "hgpc": version,
        "query": "hgpc plan ONE_CONV.onnx --batch N " + " ".join(QUERY),
        "default_query": "hgpc plan ONE_CONV.onnx --batch N " + " ".join(DEFAULT_QUERY),
        "model": "x -> Add(learned shift [1,C,1,1]) -> Conv(no bias) -> GlobalAveragePool -> "
                 "Flatten; cross-entropy, SGD",
        "widths": "sub-batches of the Conv (fwd) and ConvBwdData (dgrad) steps: width x depth",
        "layers": layers,
    }
    with open(args.data, "w") as f:
        json.dump(data, f, indent=None, separators=(",", ":"))
        f.write("\n")
    # One layer per line, for diffs.
    text = open(args.data).read()
    text = text.replace(',"layers":[{', ',"layers":[\n{').replace('},{"name"', '},\n{"name"')
    open(args.data, "w").write(text)
    json.loads(text)
    print("wrote %s: %d layers" % (args.data, len(layers)))
    print("chosen widths (fwd/dgrad) over all %d layers: %s" % (len(layers), distribution(layers)))
    print("under the compile defaults: %s" % distribution(layers, "default"))


def distribution(layers, field="chosen"):
    counts = {}
    for l in layers:
        c = l[field]
        k = str(c["fwd"]) if c["fwd"] == c["dgrad"] else "f%d/d%d" % (c["fwd"], c["dgrad"])
        counts[k] = counts.get(k, 0) + 1
    return ", ".join("k=%s: %d" % (k, counts[k]) for k in sorted(counts, key=lambda s: (len(s), s)))
