// LossOps.cpp - CPU executors for the losses and metrics: softmax cross-entropy, mean squared
// error, OneHot and CountCorrect.
//
// SoftmaxCrossEntropy is torch.nn.CrossEntropyLoss(label_smoothing=eps) with mean reduction:
//   loss_i = (1-eps) * -log p[i, y_i] + eps * mean_c(-log p[i, c]),
// and its gradient is dloss/N * (softmax - ((1-eps) * onehot + eps/C)). Labels outside [0, C)
// are a data error (ErrorCode::BadData) that names the label. Sums accumulate in double.
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

/// Checks logits f32[N,C] and labels i64[N], and that every label lies in [0, C).
Status checkLogitsAndLabels(const KernelArgs& a, int64_t& n, int64_t& c) {
  const TensorView &logits = a.in[0], &labels = a.in[1];
  HGP_TRY(checkF32(a, logits, "logits"));
  if (logits.rank() != 2) return a.fail("logits must be [N, C], got " + str(*logits.shape));
  n = logits.dim(0);
  c = logits.dim(1);
  if (labels.dtype != DType::I64) return a.fail("labels must be i64");
  HGP_TRY(checkShape(a, labels, {n}, "labels"));
  const int64_t* lab = labels.as<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (lab[i] < 0 || lab[i] >= c)
      return badData(a, "label " + std::to_string(lab[i]) + " of sample " + std::to_string(i) +
                            " is outside [0, " + std::to_string(c) + ")");
  return Status::ok();
}

double smoothingOf(const KernelArgs& a) {
  return a.attrs().getFloat("label_smoothing", 0.0);
}

/// The row's log-sum-exp, max-subtracted, in double.
double logSumExp(const float* row, int64_t c) {
  float mx = row[0];
  for (int64_t j = 1; j < c; ++j) mx = std::max(mx, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(double(row[j]) - double(mx));
  return double(mx) + std::log(sum);
}

} // namespace

Status execSoftmaxCrossEntropy(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "loss"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  double eps = smoothingOf(a);
  const float* logits = a.in[0].f32();
  const int64_t* labels = a.in[1].as<int64_t>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * c;
    double lse = logSumExp(row, c);
    double nll = lse - double(row[labels[i]]);
    double meanNll = 0; // mean over classes of -log p_c
    for (int64_t j = 0; j < c; ++j) meanNll += lse - double(row[j]);
    meanNll /= double(c);
    total += (1 - eps) * nll + eps * meanNll;
  }
  a.out[0].f32()[0] = float(total / double(n));
  return Status::ok();
}

Status execSoftmaxCrossEntropyBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "dloss"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  HGP_TRY(checkF32(a, a.out[0], "dlogits"));
  HGP_TRY(checkShape(a, a.out[0], {n, c}, "dlogits"));
  double eps = smoothingOf(a);
  double k = double(a.in[2].f32()[0]) / double(n);
  const float* logits = a.in[0].f32();
  const int64_t* labels = a.in[1].as<int64_t>();
  float* dx = a.out[0].f32();
  parallelFor(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* row = logits + i * c;
      double lse = logSumExp(row, c);
      for (int64_t j = 0; j < c; ++j) {
        double target = (j == labels[i] ? 1 - eps : 0.0) + eps / double(c);
        dx[i * c + j] = float(k * (std::exp(double(row[j]) - lse) - target));
      }
    }
  });
  return Status::ok();
}

namespace {
Status checkPredAndTarget(const KernelArgs& a) {
  HGP_TRY(checkF32(a, a.in[0], "prediction"));
  HGP_TRY(checkF32(a, a.in[1], "target"));
  return checkShape(a, a.in[1], *a.in[0].shape, "target");
}
} // namespace

Status execMseLoss(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkPredAndTarget(a));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "loss"));
  const float *p = a.in[0].f32(), *t = a.in[1].f32();
  int64_t n = a.in[0].numel();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(p[i]) - double(t[i]);
    sum += d * d;
  }
  a.out[0].f32()[0] = float(sum / double(n));
  return Status::ok();
}

Status execMseLossBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  HGP_TRY(checkPredAndTarget(a));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "dloss"));
  HGP_TRY(checkF32(a, a.out[0], "dpred"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dpred"));
  const float *p = a.in[0].f32(), *t = a.in[1].f32();
  float* dp = a.out[0].f32();
  int64_t n = a.in[0].numel();
  // PyTorch's order: (2/numel) * (p - t) * dloss.
  float norm = float(2.0 / double(n)), dloss = a.in[2].f32()[0];
  parallelElementwise(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dp[i] = norm * (p[i] - t[i]) * dloss;
  });
  return Status::ok();
}

Status execOneHot(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  const TensorView& labels = a.in[0];
  if (labels.dtype != DType::I64 || labels.rank() != 1) return a.fail("labels must be i64[N]");
  int64_t n = labels.dim(0), depth = a.attrs().getInt("depth", 0);
  if (depth < 1) return a.fail("depth must be positive");
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], {n, depth}, "result"));
  const int64_t* lab = labels.as<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (lab[i] < 0 || lab[i] >= depth)
      return badData(a, "label " + std::to_string(lab[i]) + " of sample " + std::to_string(i) +
                            " is outside [0, " + std::to_string(depth) + ")");
  float* y = a.out[0].f32();
  std::fill(y, y + n * depth, 0.f);
  for (int64_t i = 0; i < n; ++i) y[i * depth + lab[i]] = 1.f;
  return Status::ok();
}

Status execCountCorrect(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "correct"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  const float* logits = a.in[0].f32();
  const int64_t* labels = a.in[1].as<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (row[j] > row[best]) best = j; // strictly greater: the first maximum wins
    correct += best == labels[i];
  }
  a.out[0].f32()[0] = float(correct);
  return Status::ok();
}

} // namespace hgp::cpu
