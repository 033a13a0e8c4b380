// CUDA executors for matrix products, through cuBLAS.
//
// hgpc's tensors are row-major and cuBLAS is column-major, so Y = op(A) op(B) is computed as
// Y^T = op(B)^T op(A)^T, which needs no copies. TF32 tensor cores are used unless the plan's
// precision is fp32. Mixed precision: bf16 (or f16) A, B and Y with float accumulation
// (CUBLAS_COMPUTE_32F), as PyTorch's autocast does.
#include "runtime/cuda/CudaKernel.h"

namespace hgp::cuda {

void launchBroadcastCopy(const void* src, const Dims& from, void* dst, int64_t total,
                         int64_t elemSize, cudaStream_t stream); // ConvBias.cu

namespace {

/// cuBLAS's name for the step's element type; every operand and the result must share it.
Expected<cudaDataType_t> dataType(const CudaArgs& a) {
  DType t = a.out[0].dtype;
  for (const DeviceTensor& v : a.in)
    if (v.dtype != t) return a.fail("operands and result of a matrix product must share a dtype");
  switch (t) {
  case DType::F32: return CUDA_R_32F;
  case DType::BF16: return CUDA_R_16BF;
  case DType::F16: return CUDA_R_16F;
  default: return a.fail(std::string("cuBLAS products take f32, bf16 or f16, not ") + dtypeName(t));
  }
}

/// Float accumulation always; TF32 rounding of f32 inputs only when the plan allows it.
cublasComputeType_t computeType(const CudaArgs& a, cudaDataType_t type) {
  return type == CUDA_R_32F && a.ctx.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/// Row-major Y[b] = alpha op(A[b]) op(B[b]) + beta Y[b] for `batch` matrices at the given strides
/// (in elements of `type`).
Status gemm(CudaArgs& a, cudaDataType_t type, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
            float alpha, const void* A, int64_t strideA, const void* B, int64_t strideB, float beta,
            void* Y, int64_t strideY, int64_t batch) {
  int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  HGP_CUBLAS_TRY(cublasGemmStridedBatchedEx(
      a.ctx.cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m),
      int(k), &alpha, B, type, ldb, strideB, A, type, lda, strideA, &beta, Y, type, int(n), strideY,
      int(batch), computeType(a, type), CUBLAS_GEMM_DEFAULT));
  return Status::ok();
}

} // namespace

Status execGemm(CudaArgs& a) {
  bool ta = a.attrs().getInt("transA", 0), tb = a.attrs().getInt("transB", 0);
  float alpha = float(a.attrs().getFloat("alpha", 1.0)), beta = float(a.attrs().getFloat("beta", 1.0));
  const DeviceTensor &A = a.in[0], &B = a.in[1], &Y = a.out[0];
  int64_t m = Y.dim(0), n = Y.dim(1), k = ta ? A.dim(0) : A.dim(1);
  HGP_ASSIGN_OR_RETURN(cudaDataType_t type, dataType(a));
  if (a.in.size() == 3 && beta != 0.f) {
    launchBroadcastCopy(a.in[2].data, broadcastTo(*a.in[2].shape, *Y.shape), Y.data, Y.numel(),
                        dtypeSize(Y.dtype), a.stream);
    HGP_TRY(checkLaunch(a, "broadcastCopy"));
  } else {
    beta = 0.f;
  }
  return gemm(a, type, ta, tb, m, n, k, alpha, A.data, 0, B.data, 0, beta, Y.data, 0, 1);
}

Status execMatMul(CudaArgs& a) {
  Shape sa = *a.in[0].shape, sb = *a.in[1].shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  int64_t na = numElements(ba), nb = numElements(bb), batch = std::max(na, nb);
  HGP_ASSIGN_OR_RETURN(cudaDataType_t type, dataType(a));
  int64_t es = dtypeSize(a.out[0].dtype);
  const char *A = a.in[0].as<const char>(), *B = a.in[1].as<const char>();
  char* Y = a.out[0].as<char>();
  // A batch against a single B (a Linear layer at every position): the batch is more rows of
  // one product, which cuBLAS runs far better than thousands of small matrices.
  if (nb == 1 && na > 1)
    return gemm(a, type, false, false, na * m, n, k, 1.f, A, 0, B, 0, 0.f, Y, 0, 1);
  // One strided-batched call covers equal batches and a batch against a single matrix.
  if (na == nb || na == 1 || nb == 1) {
    if ((na == nb && ba != bb) )
      return a.fail("batch dims that broadcast element by element are not supported");
    return gemm(a, type, false, false, m, n, k, 1.f, A, na == 1 ? 0 : m * k, B,
                nb == 1 ? 0 : k * n, 0.f, Y, m * n, batch);
  }
  // General broadcasting: one call per output matrix.
  Shape out(a.out[0].shape->begin(), a.out[0].shape->end());
  size_t outBatchRank = std::max(ba.size(), bb.size());
  Shape ob(out.begin(), out.begin() + long(outBatchRank));
  Dims da = broadcastTo(ba, ob), db = broadcastTo(bb, ob);
  for (int64_t i = 0; i < numElements(ob); ++i) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int d = int(ob.size()) - 1; d >= 0; --d) {
      int64_t idx = rest % ob[size_t(d)];
      rest /= ob[size_t(d)];
      ia += idx * da.stride[d];
      ib += idx * db.stride[d];
    }
    HGP_TRY(gemm(a, type, false, false, m, n, k, 1.f, A + ia * m * k * es, 0, B + ib * k * n * es,
                 0, 0.f, Y + i * m * n * es, 0, 1));
  }
  return Status::ok();
}

} // namespace hgp::cuda
