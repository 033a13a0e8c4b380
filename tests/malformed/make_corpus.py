#!/usr/bin/python3
"""Writes the malformed-model corpus of the ONNX loader into this folder.

Every case is a small .onnx file the loader must reject with ErrorCode::InvalidModel and one
clear line; expected.txt pairs each file with a fragment of that line ("file<TAB>fragment").
OnnxMalformedTest runs them all; the fuzz smoke test (tests/fuzz/smoke.sh) seeds from them, plus
the valid models this script writes to tests/fuzz/seeds/.

Run it with Debian's /usr/bin/python3 (python3-onnx 1.12):
    /usr/bin/python3 tests/malformed/make_corpus.py
"""
import os
import struct

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "..", "fuzz", "seeds")
FLOAT = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, producer="hgp-corpus"):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, producer_name=producer,
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def tin(name, dims, elem=FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def fvals(n):
    return [float(i) for i in range(n)]


def relu_model(**kw):
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                 [tin("x", [2, 3])], [tin("y", None)], **kw)


def conv_model():
    w = helper.make_tensor("w", FLOAT, [4, 3, 3, 3], fvals(108))
    return model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", pads=[1, 1, 1, 1])],
                 [tin("x", [1, 3, 8, 8])], [tin("y", None)], [w])


def external(name, location, offset=None, length=None, dims=(4,)):
    t = TensorProto()
    t.name = name
    t.data_type = FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def add_with_init(init):
    return model([helper.make_node("Add", ["x", init.name], ["y"], name="add")],
                 [tin("x", [4])], [tin("y", None)], [init])


CASES = []


def case(fname, fragment, data):
    CASES.append((fname, fragment, data if isinstance(data, bytes) else data.SerializeToString()))


def build():
    valid = conv_model().SerializeToString()
    case("truncated.onnx", "cannot parse the model", valid[: len(valid) // 2])
    case("garbage.onnx", "cannot parse the model", b"\x0f\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
    case("empty.onnx", "has no IR version", b"")
    m = relu_model()
    m.ClearField("graph")
    case("missing_graph.onnx", "the model has no graph", m)
    case("ir_version_too_new.onnx", "IR version 11 is not supported", relu_model(ir=11))
    case("ir_version_too_old.onnx", "IR version 2 is not supported", relu_model(ir=2))
    case("opset_too_new.onnx", "opset 21 of the default domain is not supported",
         relu_model(opset=21))
    case("opset_too_old.onnx", "opset 5 of the default domain is not supported",
         relu_model(opset=5))
    m = relu_model()
    del m.opset_import[:]
    m.opset_import.extend([helper.make_opsetid("com.example", 1)])
    case("no_default_opset.onnx", "imports no opset of the default ONNX domain", m)

    case("cycle.onnx", "the graph has a cycle through node 'a' (Add)", model(
        [helper.make_node("Add", ["x", "c"], ["a"], name="a"),
         helper.make_node("Relu", ["a"], ["c"], name="b"),
         helper.make_node("Relu", ["c"], ["y"], name="after")],
        [tin("x", [2])], [tin("y", None)]))
    case("dangling_input.onnx", "input 'nowhere' is not defined", model(
        [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")],
        [tin("x", [2])], [tin("y", None)]))
    case("negative_dim.onnx", "graph input 'x' has an invalid dim -3", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", [2, -3])], [tin("y", None)]))
    case("zero_dim.onnx", "graph input 'x' has an invalid dim 0", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", [2, 0])], [tin("y", None)]))
    case("huge_dims.onnx", "graph input 'x' has more than 2^40 elements", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", [1 << 21, 1 << 21])],
        [tin("y", None)]))
    t = TensorProto(name="w", data_type=FLOAT, dims=[1 << 30, 1 << 30], raw_data=b"\0" * 16)
    case("huge_initializer.onnx", "initializer 'w' has more than 2^40 elements", add_with_init(t))
    m = conv_model()
    m.graph.node[0].attribute.append(helper.make_attribute("strides", [1.0, 1.0]))
    case("wrong_attr_type.onnx", "attribute 'strides' must be INTS, got FLOATS", m)
    m = conv_model()
    m.graph.node[0].attribute.append(helper.make_attribute("pads", [0, 0, 0, 0]))
    case("duplicate_attribute.onnx", "attribute 'pads' is given twice", m)
    t = TensorProto(name="b", data_type=FLOAT, dims=[4], raw_data=b"\0" * 12)
    case("initializer_size_mismatch.onnx",
         "initializer 'b' raw_data has 12 bytes, its dims and type need 16", add_with_init(t))
    t = TensorProto(name="b", data_type=FLOAT, dims=[4], float_data=[1.0, 2.0, 3.0])
    case("initializer_count_mismatch.onnx", "initializer 'b' has 3 values in float_data",
         add_with_init(t))
    case("external_dotdot.onnx", "escapes the model folder",
         add_with_init(external("b", "ext/../../secret.bin")))
    case("external_absolute.onnx", "'/etc/hostname' is an absolute path",
         add_with_init(external("b", "/etc/hostname")))
    case("external_symlink.onnx", "goes through a symlink",
         add_with_init(external("b", "ext/link.bin")))
    case("external_out_of_range.onnx", "runs past the end of 'ext/weights.bin'",
         add_with_init(external("b", "ext/weights.bin", offset=8, length=16)))
    case("external_length_mismatch.onnx", "does not match its dims and type (16 bytes)",
         add_with_init(external("b", "ext/weights.bin", offset=0, length=8)))
    case("external_missing.onnx", "external data file 'ext/nothere.bin' does not exist",
         add_with_init(external("b", "ext/nothere.bin")))
    m = model([helper.make_node("Constant", [], ["c"], name="const", value=external("", "w.bin")),
               helper.make_node("Add", ["x", "c"], ["y"])], [tin("x", [4])], [tin("y", None)])
    case("external_in_attribute.onnx", "uses external data, which is not allowed here", m)

    t = TensorProto(name="s", data_type=TensorProto.STRING, dims=[1], string_data=[b"hello"])
    case("dtype_string.onnx", "initializer 's' has unsupported element type STRING",
         add_with_init(t))
    m = model([helper.make_node("Relu", ["x"], ["y"])], [tin("x", [4], 17)], [tin("y", None)])
    case("dtype_float8.onnx", "graph input 'x' has unsupported element type FLOAT8E4M3FN", m)
    t = TensorProto(name="q", data_type=22, dims=[4], raw_data=b"\0\0")
    case("dtype_int4.onnx", "initializer 'q' has unsupported element type INT4", add_with_init(t))

    case("duplicate_output.onnx", "value 'y' is defined twice", model(
        [helper.make_node("Relu", ["x"], ["y"], name="r1"),
         helper.make_node("Sigmoid", ["x"], ["y"], name="r2")],
        [tin("x", [2])], [tin("y", None)]))
    w = helper.make_tensor("w", FLOAT, [2], [1.0, 2.0])
    case("duplicate_initializer.onnx", "initializer 'w' is defined twice", model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [tin("x", [2])], [tin("y", None)], [w, w]))
    case("input_defined_by_node.onnx", "value 'x' is defined twice", model(
        [helper.make_node("Relu", ["z"], ["x"], name="r")], [tin("x", [2]), tin("z", [2])],
        [tin("x", None)]))
    case("unsupported_ops.onnx",
         "unsupported ops: NonMaxSuppression (node 'nms_1'), com.example.Foo (node 'x')", model(
             [helper.make_node("NonMaxSuppression", ["b", "s"], ["i"], name="nms_1"),
              helper.make_node("Foo", ["i"], ["y"], name="x", domain="com.example")],
             [tin("b", [1, 4, 4]), tin("s", [1, 1, 4])], [tin("y", None)]))
    case("symbolic_batch.onnx", "has a symbolic batch dim ('N'); pass --batch", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", ["N", 3])], [tin("y", None)]))
    case("symbolic_channel.onnx", "graph input 'x' dim 1 is symbolic ('C')", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", [2, "C"])], [tin("y", None)]))
    case("undefined_output.onnx", "graph output 'nothing' is not computed", model(
        [helper.make_node("Relu", ["x"], ["y"])], [tin("x", [2])], [tin("nothing", None)]))
    case("no_outputs.onnx", "the graph has no outputs", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], [tin("x", [2, 3])], []))
    case("runtime_reshape_shape.onnx",
         "node 'reshape' (Reshape): shape 's' must be known at compile time", model(
             [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
             [tin("x", [2, 6]), tin("s", [2], TensorProto.INT64)], [tin("y", None)]))
    case("dropout_mask.onnx", "node 'drop' (Dropout): the mask output is not supported", model(
        [helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")],
        [tin("x", [2])], [tin("y", None), tin("mask", None, TensorProto.BOOL)]))
    w = helper.make_tensor("w", FLOAT, [4, 2, 3, 3], fvals(72))
    case("conv_channel_mismatch.onnx", "node Conv 'conv1': input channels 3 do not match", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], [tin("x", [1, 3, 8, 8])],
        [tin("y", None)], [w]))
    case("wrong_arity.onnx", "node 'relu' (Relu): has 2 inputs, Relu takes 1", model(
        [helper.make_node("Relu", ["x", "x"], ["y"], name="relu")], [tin("x", [2])],
        [tin("y", None)]))
    m = relu_model()
    m.graph.sparse_initializer.add().values.name = "sp"
    case("sparse_initializer.onnx", "sparse initializers are not supported (tensor 'sp')", m)
    seq = helper.make_tensor_sequence_value_info("x", FLOAT, [2])
    case("input_not_tensor.onnx", "graph input 'x' is not a tensor", model(
        [helper.make_node("Identity", ["x"], ["y"])], [seq], [tin("y", None)]))
    s = helper.make_tensor("sizes", TensorProto.INT64, [2], [2, 2])
    case("split_bad_sizes.onnx", "split sizes add up to 4, the axis has 5", model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], name="split")],
        [tin("x", [5])], [tin("a", None), tin("b", None)], [s]))
    st = helper.make_tensor("st", TensorProto.INT64, [1], [3])
    en = helper.make_tensor("en", TensorProto.INT64, [1], [1])
    case("slice_empty.onnx", "the slice is empty along axis 0", model(
        [helper.make_node("Slice", ["x", "st", "en"], ["y"], name="slice")],
        [tin("x", [5])], [tin("y", None)], [st, en]))
    case("bn_bad_momentum.onnx", "momentum 2.000000 is not in [0, 1]", model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                          name="bn", momentum=2.0, training_mode=1)],
        [tin("x", [2, 2])], [tin("y", None)],
        [helper.make_tensor(n, FLOAT, [2], [1.0, 1.0]) for n in "sbmv"]))


def write_seeds():
    os.makedirs(SEEDS, exist_ok=True)
    w = helper.make_tensor("w", FLOAT, [4, 3, 3, 3], fvals(108))
    bn = [helper.make_tensor(n, FLOAT, [4], [1.0] * 4) for n in ("s", "b", "m", "v")]
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [0, -1])
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n", "rm", "rv"],
                         training_mode=1),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["sh"]),
        helper.make_node("Constant", [], ["i0"], value=helper.make_tensor("", 7, [], [0])),
        helper.make_node("Gather", ["sh", "i0"], ["n0"]),
        helper.make_node("Reshape", ["p", "shape"], ["y"]),
    ]
    m = model(nodes, [tin("x", ["N", 3, 8, 8])], [tin("y", None)], [w, shape] + bn,
              producer="pytorch")
    with open(os.path.join(SEEDS, "valid_convnet.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    with open(os.path.join(SEEDS, "valid_relu.onnx"), "wb") as f:
        f.write(relu_model().SerializeToString())


def main():
    build()
    ext = os.path.join(HERE, "ext")
    os.makedirs(ext, exist_ok=True)
    with open(os.path.join(ext, "weights.bin"), "wb") as f:
        f.write(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))
    link = os.path.join(ext, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("weights.bin", link)
    for name in os.listdir(HERE):
        if name.endswith(".onnx"):
            os.remove(os.path.join(HERE, name))
    with open(os.path.join(HERE, "expected.txt"), "w") as exp:
        for fname, fragment, data in CASES:
            with open(os.path.join(HERE, fname), "wb") as f:
                f.write(data)
            exp.write(f"{fname}\t{fragment}\n")
    write_seeds()


if __name__ == "__main__":
    main()
