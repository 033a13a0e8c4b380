#include "compiler/analysis/StepWork.h"

#include "ir/Graph.h"
#include "runtime/plan/Layout.h"

#include <algorithm>
#include <set>

namespace hgp {

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) p *= s[i];
  return p;
}

/// Fills the GEMM view of a convolution with input x [N,C,*S], filter w [M,C/g,*K] and output
/// y [N,M,*O], for the phase that produces `result` ("y", "x" or "w").
void convWork(StepWork& w, const Shape& x, const Shape& wt, const Shape& y, int64_t g, char result) {
  if (x.size() < 3 || wt.size() < 3 || y.size() < 3) return;
  int64_t n = x[0], c = x[1], m = y[1], s = product(x, 2, x.size()), o = product(y, 2, y.size()),
          kv = product(wt, 2, wt.size());
  g = std::max<int64_t>(1, g);
  // Depthwise-like convolutions (a handful of channels per group) run as direct kernels, not as
  // tensor-core GEMMs.
  w.gemm = (m / g) > 4 || (c / g) > 4;
  w.groups = g;
  w.flops = 2.0 * double(n) * double(m) * double(o) * double(c / g) * double(kv);
  if (result == 'y') w.m = n * o, w.n = m / g, w.k = (c / g) * kv;
  if (result == 'x') w.m = n * s, w.n = c / g, w.k = (m / g) * kv;
  if (result == 'w') w.m = m / g, w.n = (c / g) * kv, w.k = n * o;
}

bool isReduction(OpKind op) {
  switch (op) {
  case OpKind::BatchNormTrain: case OpKind::BatchNormBwd: case OpKind::ReduceSum:
  case OpKind::ReduceMean: case OpKind::GlobalAveragePool: case OpKind::SoftmaxCrossEntropy:
  case OpKind::MseLoss: case OpKind::CheckFinite: case OpKind::CountCorrect: case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return true;
  default:
    return false;
  }
}

/// How many times the executor streams its operands through memory, relative to reading each
/// operand and writing each result once (runtime/cuda): max pooling reads each input once per
/// covering window (mostly from cache, but issued); data movement ops are strided. BatchNorm
/// training and its gradient re-read some operands; rereadBytes counts those.
double memoryPasses(OpKind op) {
  switch (op) {
  case OpKind::MaxPool: case OpKind::AveragePool: return 2.0;
  case OpKind::MaxPoolBwd: case OpKind::AveragePoolBwd: return 3.0;
  case OpKind::Concat: case OpKind::Split: case OpKind::Slice: case OpKind::SliceBwd:
  case OpKind::Pad: case OpKind::PadBwd: case OpKind::Transpose:
    return 2.0;
  default:
    return 1.0;
  }
}

/// The bytes a two-pass BatchNorm reads a second time (runtime/cuda/NormOps.cu): training reads
/// X for the statistics and again to normalize (the residual of a fused +AddRelu only in the
/// second pass); the gradient reads dY (both parts of a folded +Sum), X, and the mask source Z of
/// a fused +ReluBwd, for the sums and again for dX; one that writes the masked gradient G (its
/// fourth result) in the sums pass reads G and X for dX instead.
/// fuse-conv-bn moves the statistics pass into the convolution (see below).
double rereadBytes(OpKind op, const Operands& inputs, const Operands& outputs) {
  auto bytes = [](const Operands& ts, size_t i) {
    return i < ts.size() ? double(ts[i]->bytes()) : 0.0;
  };
  // With the convolution's channel sums (given_stats=1, five or six operands) there is no
  // statistics pass; the Conv{stats=1} that wrote X is counted as reading its result once more,
  // which is what it costs where cuDNN has no engine for the sums and hgpc's sums kernel runs
  // (runtime/cuda/ConvOps.cpp): the prediction assumes no gain until the run measures one.
  if (op == OpKind::BatchNormTrain) return inputs.size() >= 5 ? 0.0 : bytes(inputs, 0);
  if (op == OpKind::Conv && outputs.size() == 3) return bytes(outputs, 0);
  if (op == OpKind::BatchNormBwd && outputs.size() == 4) return bytes(outputs, 3) + bytes(inputs, 1);
  if (op == OpKind::BatchNormBwd) {
    // Every operand but the per-channel vectors (scale, mean, var: operands 2 to 4).
    double b = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (i < 2 || i > 4) b += bytes(inputs, i);
    return b;
  }
  return 0;
}

} // namespace

StepWork opWork(OpKind op, const AttrMap& attrs, const Operands& inputs, const Operands& outputs) {
  StepWork w;
  // A channels-last convolution's GEMM view from its NCHW shapes (runtime/plan/Layout.h).
  bool nhwc = attrs.getString("layout") == "nhwc";
  auto shape = [&](const TensorType* t) { return nhwc ? channelsFirstShape(t->shape) : t->shape; };
  std::set<const TensorType*> touched(inputs.begin(), inputs.end());
  touched.insert(outputs.begin(), outputs.end());
  for (const TensorType* t : touched) {
    w.bytes += double(t->bytes());
    w.elements = std::max(w.elements, t->numElements());
  }
  int64_t g = attrs.getInt("group", 1);
  bool twoIn = inputs.size() >= 2 && !outputs.empty();
  switch (op) {
  case OpKind::Conv:
    if (twoIn) convWork(w, shape(inputs[0]), shape(inputs[1]), shape(outputs[0]), g, 'y');
    return w;
  case OpKind::ConvBwdData:
    if (twoIn) convWork(w, shape(outputs[0]), shape(inputs[1]), shape(inputs[0]), g, 'x');
    return w;
  case OpKind::ConvBwdFilter:
    if (twoIn) convWork(w, shape(inputs[0]), shape(outputs[0]), shape(inputs[1]), g, 'w');
    return w;
  case OpKind::ConvTranspose:
    // The data gradient of a convolution from the result back to the input.
    if (twoIn) convWork(w, shape(outputs[0]), shape(inputs[1]), shape(inputs[0]), g, 'x');
    return w;
  case OpKind::Gemm:
  case OpKind::MatMul: {
    if (!twoIn) return w;
    const Shape &a = shape(inputs[0]), &y = shape(outputs[0]);
    if (a.empty() || y.empty()) return w;
    bool transA = op == OpKind::Gemm && attrs.getInt("transA", 0) != 0;
    int64_t k = a.size() == 1 ? a[0] : transA ? a[0] : a.back();
    int64_t cols = y.back(), rows = numElements(y) / std::max<int64_t>(1, cols);
    w.gemm = true;
    w.m = rows, w.n = cols, w.k = k;
    w.flops = 2.0 * double(rows) * double(cols) * double(k);
    return w;
  }
  default:
    break;
  }
  w.reduction = isReduction(op);
  // Memory-bound: a few FLOPs per element (normalizations and losses a few more).
  w.flops = double(w.elements) * (w.reduction ? 4.0 : 1.0);
  w.bytes = w.bytes * memoryPasses(op) + rereadBytes(op, inputs, outputs);
  return w;
}

StepWork stepWork(const Plan& plan, const PlanStep& step) {
  auto types = [&](const std::vector<int>& ts) {
    Operands v;
    for (int t : ts) v.push_back(&plan.tensors[size_t(t)].type);
    return v;
  };
  return opWork(step.op, step.attrs, types(step.inputs), types(step.outputs));
}

StepWork nodeWork(const Node& n) {
  auto types = [](const std::vector<Value*>& vs) {
    Operands v;
    for (const Value* x : vs) v.push_back(&x->type());
    return v;
  };
  return opWork(n.op(), n.attrs(), types(n.inputs()), types(n.outputs()));
}

} // namespace hgp
