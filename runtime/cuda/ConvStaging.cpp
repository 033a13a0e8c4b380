// ConvStaging.cpp - the copies between a pitched view and its dense stand-in (ConvStaging.h).
#include "runtime/cuda/ConvStaging.h"

#include "runtime/cuda/StackCopy.h"

#include <string>
#include <utility>

namespace hgp::cuda {

namespace {

/// The view's rows as one part (the dense copy, [rows, row]) at column 0 of a whole of rows
/// `pitch` elements long that starts where the view starts; StackCopy touches only the part's
/// columns of the whole.
Status stage(CudaArgs& a, const DeviceTensor& v, void* dense, bool in) {
  if (!v.pitched() || v.row <= 0 || v.numel() % v.row)
    return a.fail("staging a convolution operand that is not a pitched view of whole rows");
  int64_t rows = v.numel() / v.row;
  Shape partShape{rows, v.row}, wholeShape{rows, v.pitch};
  DeviceTensor part{v.dtype, &partShape, dense}, whole{v.dtype, &wholeShape, v.data};
  return stackCopy(a, {part}, whole, /*axis=*/1, /*toWhole=*/!in);
}

} // namespace

size_t denseBytes(const DeviceTensor& v) { return size_t(v.numel()) * size_t(dtypeSize(v.dtype)); }

Status stageIn(CudaArgs& a, const DeviceTensor& v, void* dense) { return stage(a, v, dense, true); }

Status stageOut(CudaArgs& a, const DeviceTensor& v, void* dense) { return stage(a, v, dense, false); }

Expected<ConvBuffers> stagedBuffers(CudaArgs& a, const ConvStaging& st, const DeviceTensor& xt,
                                    const DeviceTensor& yt, bool readsX, bool readsY) {
  void* ws = a.ctx.workspace;
  if (!st.on) return ConvBuffers{xt.data, yt.data, ws};
  ConvBuffers b{st.x(ws, xt.data), st.y(ws, yt.data), st.cudnnWorkspace(ws)};
  if (readsX && xt.pitched()) HGP_TRY(stageIn(a, xt, b.x));
  if (readsY && yt.pitched()) HGP_TRY(stageIn(a, yt, b.y));
  return b;
}

StagingScratch::~StagingScratch() {
  if (x) cudaFree(x);
  if (y) cudaFree(y);
}

Status StagingScratch::allocate(const ConvStaging& st) {
  for (auto [p, bytes] : {std::pair{&x, st.xBytes}, std::pair{&y, st.yBytes}})
    if (bytes && cudaMalloc(p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return Status(ErrorCode::OutOfMemory, "no memory left to time a staged convolution (" +
                                                std::to_string(bytes) + " bytes)");
    }
  return Status::ok();
}

} // namespace hgp::cuda
