// ConvStaging.h - dense stand-ins for a convolution's pitched operands (internal to runtime/cuda).
//
// A pitched view (PlanTensor::row/pitch: a channel range of a channels-last tensor, a Concat part
// written in place or a Split result read in place) reaches cuDNN as a tensor descriptor whose
// pixel stride is larger than its channel count. cuDNN documents only that a routine "may" take
// such non-packed tensors; its engines check support per layer, and on the H200 (cuDNN 9.19,
// 2026-12-02) a deterministic search found no algorithm for one. ConvOps first asks cuDNN with the
// pitched descriptors (legacy algorithms and graph-API engines). When nothing qualifies, the phase
// is staged: described dense, and run on dense copies of its pitched operands that live at the
// front of the lane's workspace, copied in before the phase (the operands it reads) and out after
// it (the one it writes) by Concat's and Split's vectorized copy (StackCopy.h). The result is the
// same as the dense convolution's, and --verbose names every staged phase.
#pragma once

#include "runtime/cuda/CudaKernel.h"

namespace hgp::cuda {

/// Where a staged phase keeps its dense copies: x's at the start of the workspace, y's after it,
/// cuDNN's own workspace after both (each 256-byte aligned).
struct ConvStaging {
  bool on = false;
  size_t xBytes = 0, yBytes = 0; ///< The dense copies' sizes; 0 for a side that is not pitched.

  static size_t aligned(size_t b) { return (b + 255) / 256 * 256; }
  /// Workspace bytes the copies take, before cuDNN's workspace.
  size_t bytes() const { return aligned(xBytes) + aligned(yBytes); }
  /// The buffer cuDNN reads or writes for the x side: the copy, or `tensor` itself when dense.
  void* x(void* ws, void* tensor) const { return xBytes ? ws : tensor; }
  void* y(void* ws, void* tensor) const {
    return yBytes ? static_cast<char*>(ws) + aligned(xBytes) : tensor;
  }
  /// cuDNN's workspace when staged: what follows the copies.
  void* cudnnWorkspace(void* ws) const { return static_cast<char*>(ws) + bytes(); }
};

/// The buffers one execution of a phase hands cuDNN.
struct ConvBuffers {
  void *x, *y, *workspace;
};

/// The tensors `xt`, `yt` and the lane's workspace as they are, or (staged) their dense copies
/// and what follows them, the pitched operands the phase reads (`readsX`, `readsY`) copied in.
Expected<ConvBuffers> stagedBuffers(CudaArgs& a, const ConvStaging& st, const DeviceTensor& xt,
                                    const DeviceTensor& yt, bool readsX, bool readsY);

/// Dense buffers of a staging's sizes, to time the staged phase's candidates on before the
/// workspace holds the copies; freed when this goes.
struct StagingScratch {
  void *x = nullptr, *y = nullptr;
  StagingScratch() = default;
  StagingScratch(const StagingScratch&) = delete;
  StagingScratch& operator=(const StagingScratch&) = delete;
  ~StagingScratch();
  /// Allocates what `st` needs; OutOfMemory when the device has no room.
  Status allocate(const ConvStaging& st);
};

/// The bytes of a dense copy of the pitched view `v`.
size_t denseBytes(const DeviceTensor& v);

/// Copies the pitched view `v` into the dense buffer `dense` (rows of v.row elements, packed).
Status stageIn(CudaArgs& a, const DeviceTensor& v, void* dense);

/// Copies the dense buffer `dense` back into the pitched view `v`, leaving the other channels of
/// v's rows as they are.
Status stageOut(CudaArgs& a, const DeviceTensor& v, void* dense);

} // namespace hgp::cuda
