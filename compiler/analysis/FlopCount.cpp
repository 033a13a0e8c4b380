#include "compiler/analysis/FlopCount.h"

namespace hgp {

namespace {
int64_t numel(const Value* v) { return v->type().numElements(); }

/// 2 x (elements of the convolution's output side) x (weights each output element reads):
/// `out` is [N, M, *O] and `w` is [M, C/group, *K].
int64_t convFlops(const Shape& out, const Shape& w) {
  int64_t perOut = 2 * w[1];
  for (size_t i = 2; i < w.size(); ++i) perOut *= w[i];
  return numElements(out) * perOut;
}
} // namespace

int64_t flopsOf(const Node& n) {
  switch (n.op()) {
  case OpKind::Conv:
  case OpKind::ConvBwdData:
    return convFlops(n.op() == OpKind::Conv ? n.output(0)->shape() : n.input(0)->shape(),
                     n.input(1)->shape());
  case OpKind::ConvBwdFilter:
    return convFlops(n.input(1)->shape(), n.output(0)->shape());
  case OpKind::ConvTranspose: // the same products as ConvBwdData with dY = X
    return convFlops(n.input(0)->shape(), n.input(1)->shape());
  case OpKind::Gemm: {
    const Shape& a = n.input(0)->shape();
    int64_t k = n.attrs().getInt("transA", 0) ? a[0] : a[1];
    return 2 * numel(n.output(0)) * k;
  }
  case OpKind::MatMul: {
    const Shape& a = n.input(0)->shape();
    return 2 * numel(n.output(0)) * a.back();
  }
  case OpKind::BatchNorm:
  case OpKind::BatchNormTrain:
  case OpKind::BatchNormBwd:
  case OpKind::LRN:
  case OpKind::LRNBwd:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return 4 * numel(n.input(0));
  case OpKind::MaxPool:
  case OpKind::AveragePool: {
    int64_t window = 1;
    for (int64_t k : n.attrs().getInts("kernel_shape")) window *= k;
    return numel(n.output(0)) * window;
  }
  default: {
    int64_t total = 0;
    for (const Value* o : n.outputs()) total += numel(o);
    return total;
  }
  }
}

} // namespace hgp
