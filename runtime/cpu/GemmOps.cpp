// GemmOps.cpp - CPU executors for Gemm and MatMul, both on the blocked sgemm of Gemm.h.
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelUtil.h"

namespace hgp::cpu {

Status execGemm(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 3, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  const Shape &sa = *a.in[0].shape, &sb = *a.in[1].shape;
  if (sa.size() != 2 || sb.size() != 2) return a.fail("Gemm needs 2-D A and B");
  bool ta = a.attrs().getInt("transA", 0) != 0, tb = a.attrs().getInt("transB", 0) != 0;
  int64_t m = ta ? sa[1] : sa[0], k = ta ? sa[0] : sa[1];
  int64_t kb = tb ? sb[1] : sb[0], n = tb ? sb[0] : sb[1];
  if (k != kb) return a.fail("inner dims differ: A " + str(sa) + ", B " + str(sb));
  HGP_TRY(checkShape(a, a.out[0], {m, n}, "Y"));
  float alpha = float(a.attrs().getFloat("alpha", 1.0));
  float beta = float(a.attrs().getFloat("beta", 1.0));
  float* y = a.out[0].f32();
  bool withC = a.in.size() == 3 && beta != 0.f;
  if (withC) {
    // Y = C broadcast to [M, N]; sgemm then adds alpha * op(A) op(B) to beta * Y.
    const Shape& sc = *a.in[2].shape;
    if (sc.size() > 2) return a.fail("C " + str(sc) + " does not broadcast to [M, N]");
    for (size_t i = 0; i < sc.size(); ++i) {
      int64_t want = i + 2 - sc.size() == 0 ? m : n;
      if (sc[i] != 1 && sc[i] != want)
        return a.fail("C " + str(sc) + " does not broadcast to [M, N]");
    }
    stridedCopy(y, a.in[2].data, {m, n}, broadcastStrides(sc, {m, n}), 0, sizeof(float));
  }
  sgemm(ta, tb, m, n, k, alpha, a.in[0].f32(), sa[1], a.in[1].f32(), sb[1], withC ? beta : 0.f, y,
        n);
  return Status::ok();
}

Status execMatMul(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  Shape sa = *a.in[0].shape, sb = *a.in[1].shape;
  if (sa.empty() || sb.empty()) return a.fail("MatMul operands must have rank 1 or more");
  // numpy: a 1-D A is a row vector, a 1-D B a column vector; the added dim is dropped after.
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k) return a.fail("inner dims differ: " + str(sa) + " x " + str(sb));
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  size_t r = std::max(ba.size(), bb.size());
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i + ba.size() >= r ? ba[i + ba.size() - r] : 1;
    int64_t db = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    if (da != db && da != 1 && db != 1) return a.fail("batch dims do not broadcast");
    batch[i] = da == 1 ? db : da;
  }
  Shape y = batch;
  if (!va) y.push_back(m);
  if (!vb) y.push_back(n);
  HGP_TRY(checkShape(a, a.out[0], y, "Y"));
  const float *pa = a.in[0].f32(), *pb = a.in[1].f32();
  float* py = a.out[0].f32();
  int64_t numBatch = numElements(batch);
  if (numElements(bb) == 1 && numElements(ba) == numBatch) {
    // B is shared by every batch entry and A's matrices are stacked: one tall GEMM.
    sgemm(false, false, numBatch * m, n, k, 1.f, pa, k, pb, n, 0.f, py, n);
    return Status::ok();
  }
  // Offsets of each batch entry's matrices (in matrices, 0 along broadcast dims).
  std::vector<int64_t> offA(static_cast<size_t>(numBatch)), offB(offA.size());
  forEachStrided(batch, broadcastStrides(ba, batch), 0,
                 [&](int64_t i, int64_t off) { offA[size_t(i)] = off; });
  forEachStrided(batch, broadcastStrides(bb, batch), 0,
                 [&](int64_t i, int64_t off) { offB[size_t(i)] = off; });
  for (int64_t i = 0; i < numBatch; ++i)
    sgemm(false, false, m, n, k, 1.f, pa + offA[size_t(i)] * m * k, k, pb + offB[size_t(i)] * k * n,
          n, 0.f, py + i * m * n, n);
  return Status::ok();
}

} // namespace hgp::cpu
