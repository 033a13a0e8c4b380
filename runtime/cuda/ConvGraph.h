// ConvGraph.h - one convolution phase as a cuDNN graph-API (backend) execution plan.
//
// The legacy cudnnFind*AlgorithmEx entry points time only the algorithms of cuDNN 7's
// enumeration. cuDNN 9's graph API offers every engine of the library for the same operation,
// among them the Hopper kernels PyTorch reaches through cudnn-frontend. ConvOps times the
// candidates from here alongside the legacy ones and keeps the fastest per phase; a tuning-cache
// hit names the candidate by its position in cuDNN's heuristic list, which is stable for a given
// cuDNN version, GPU and shape (all in the cache key).
#pragma once

#include "runtime/cuda/CudaCheck.h"

#include <memory>
#include <vector>

namespace hgp::cuda {

enum class ConvPhase { Forward, BackwardData, BackwardFilter };

/// Packed NCHW-style (or, with channelsLast, NHWC) geometry of one convolution, in cuDNN's terms (tensors of 4 or more dims; a
/// grouped convolution shows in w[1] being x[1] / groups).
struct ConvGeometry {
  std::vector<int64_t> x, w, y; ///< The input side, the filter and the output side.
  std::vector<int64_t> pads, strides, dilations;
  /// The element type of x, w and y: float, or bf16/half under mixed precision (the convolution
  /// computes in float either way).
  cudnnDataType_t dataType = CUDNN_DATA_FLOAT;
  /// x, w and y are stored channels-last (layout="nhwc", runtime/plan/Layout.h); the dims above
  /// stay in NCHW order and the strides say where each element lives.
  bool channelsLast = false;
  /// Channels-last only: elements from one pixel of x (or y) to the next when it is a pitched
  /// view (a channel range of a larger tensor: a Concat part written in place, a Split read in
  /// place); 0 when it is dense (the pitch is its channel count).
  int64_t xPitch = 0, yPitch = 0;
};

/// What a forward phase does after the convolution, inside the same cuDNN graph: add a
/// per-channel bias (a [K] vector, the tensor's dtype) and apply Relu, in float, rounding once
/// when the result is stored. cuDNN's runtime-fusion engines run such a graph as one kernel;
/// ConvOps times them against the convolution followed by hgpc's own epilogue kernel.
struct ConvEpilogue {
  bool bias = false, relu = false;
  /// Conv stats=1 (fuse-conv-bn): the result y is stored, and a GenStats operation (cuDNN's
  /// ConvBNfprop pattern "conv + GenStats") reads it and writes the per-channel sum and sum of
  /// squares, f32 [1,K,1,1]. Not with bias or relu.
  bool stats = false;
  bool any() const { return bias || relu || stats; }
};

/// Strides of NCHW-ordered dims, stored as laid out: row-major, or channels-last (C innermost,
/// pixels `pitch` elements apart when it is not 0, a pitched view; C apart otherwise). The legacy
/// descriptors (ConvOps) and the graph API's tensors share it.
std::vector<int64_t> convStrides(const std::vector<int64_t>& dims, bool channelsLast,
                                 int64_t pitch = 0);

struct ConvGraphDescriptors; // the descriptors one plan keeps alive (ConvGraph.cpp)

/// A finalized execution plan for one phase.
class ConvGraphPlan {
public:
  ConvGraphPlan(std::shared_ptr<ConvGraphDescriptors> d, size_t index, int64_t workspace);
  ~ConvGraphPlan();
  ConvGraphPlan(const ConvGraphPlan&) = delete;
  ConvGraphPlan& operator=(const ConvGraphPlan&) = delete;

  /// The candidate's position in cuDNN's heuristic list.
  size_t index() const { return index_; }
  int64_t workspace() const { return workspace_; }
  /// Runs the phase on `stream`'s handle: (x, w, y) for Forward, (dx, w, dy) for BackwardData,
  /// (x, dw, dy) for BackwardFilter. `bias` is the epilogue's bias vector, when it has one;
  /// `sum` and `sumsq` the statistics epilogue's results.
  Status execute(cudnnHandle_t h, void* x, void* w, void* y, void* workspace,
                 void* bias = nullptr, void* sum = nullptr, void* sumsq = nullptr) const;

private:
  std::shared_ptr<ConvGraphDescriptors> d_;
  size_t index_;
  int64_t workspace_;
};

/// The plans cuDNN's heuristics offer for the phase, in heuristic order, leaving out those that
/// use tensor cores when `allowTf32` is off and the nondeterministic ones when `deterministic` is
/// on, and those that fail to finalize. At most `limit` plans; with `only` set, just the
/// candidate at that position of the heuristic list (none if it no longer qualifies). `beta`
/// scales what the result held before (1: accumulate into it). A forward phase with an
/// `epilogue` builds the fused graph (beta must then be 0); an empty list, not an error, when
/// no engine supports the fusion.
Expected<std::vector<std::unique_ptr<ConvGraphPlan>>>
convGraphPlans(cudnnHandle_t h, ConvPhase phase, const ConvGeometry& g, bool allowTf32,
               bool deterministic, size_t limit, long only = -1, float beta = 0.f,
               ConvEpilogue epilogue = {});

} // namespace hgp::cuda
