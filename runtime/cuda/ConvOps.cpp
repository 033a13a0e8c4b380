// CUDA executors for the convolution family, through cuDNN.
//
// Each phase (forward, backward-data, backward-filter) of each layer chooses its own algorithm,
// as HyConv does: the best of the legacy algorithms (cudnnFind*AlgorithmEx, within the workspace
// limit) and the first engines cuDNN's graph-API heuristics offer (ConvGraph.h) are timed on the
// layer's own buffers, the fastest (deterministic ones only with --deterministic) wins, and the
// choice goes into the tuning cache. 1-D convolutions run as 2-D ones with a height of 1. Bias is
// added by a kernel (ConvBias.cu). ConvBwdFilter with accumulate=1 (a batch slice after the
// first) runs with beta = 1, adding to dW, and times its candidates on a scratch dW so that the
// timing does not clobber the sum so far. Mixed precision: bf16 (or f16) x, w and y with float
// compute (cuDNN's BFLOAT16/PSEUDO_HALF configurations), tensor cores allowed; the bias is added
// by the same kernel, which rounds y + bias once more. Channels-last (layout="nhwc",
// runtime/plan/Layout.h): the same NCHW-ordered dims with NHWC strides for x and y, and the
// filter in cuDNN's NHWC (KRSC) format, which is what the tensor-core kernels read natively.
// Epilogue (Conv's bias and activation="relu", fuse-conv-epilogue): hgpc's kernel adds the bias
// and applies the Relu in one pass after the convolution; where cuDNN's graph API has engines
// for convolution + bias + Relu as one graph (its runtime fusion), those are timed against the
// convolution plus that kernel and the faster way is kept (--no-cudnn-fusion: never fused).
// Statistics (Conv stats=1, fuse-conv-bn): the per-channel sums of y and y^2 for the BatchNorm
// that reads y, either from cuDNN's conv + GenStats graph (the ConvBNfprop engines) or from
// hgpc's sums kernel after the convolution (NormOps.cu's statistics pass, finalized into plain
// sums); the two are timed and the faster kept, and --verbose says per layer which won, or why
// cuDNN had no engine for the layer.
// Pitched operands (strided views): cuDNN is asked with strided descriptors first; a phase for
// which neither a legacy algorithm nor a graph engine qualifies runs on dense copies of them in
// the workspace (ConvStaging.h), and --verbose says so.
#include "runtime/cuda/ConvChoice.h"
#include "runtime/cuda/ConvGraph.h"
#include "runtime/cuda/ConvStaging.h"
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/TuningCache.h"
#include "runtime/plan/Layout.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace hgp::cuda {

namespace {

using Phase = ConvPhase;

/// Graph-API candidates timed per phase (the heuristics' first ones).
constexpr size_t kGraphCandidates = 6;

const char* phaseName(Phase p) {
  return p == Phase::Forward ? "fwd" : p == Phase::BackwardData ? "bwd-data" : "bwd-filter";
}

/// cuDNN wants at least 4-D tensors: a 1-D convolution gets a unit height.
std::vector<int> cudnnDims(const Shape& s) {
  std::vector<int> d(s.begin(), s.end());
  if (d.size() == 3) d.insert(d.begin() + 2, 1);
  return d;
}

struct ConvState final : StepState {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr; ///< "x" is the input side, "y" the output side
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool ready = false; ///< Described and an algorithm chosen.
  int algo = -1;      ///< The legacy algorithm, unless `graph` is set.
  std::unique_ptr<ConvGraphPlan> graph;
  /// Forward with an epilogue: the cuDNN graph that runs convolution, bias and Relu in one, when
  /// it timed faster than `algo`/`graph` followed by the epilogue kernel.
  std::unique_ptr<ConvGraphPlan> fused;
  ConvEpilogue epilogue;
  ConvGeometry geom;
  size_t workspace = 0;
  float beta = 0.f; ///< 1 when the phase adds to its result (accumulate=1)
  void* sumsScratch = nullptr; ///< stats=1: the sums kernel's partials, when it runs
  size_t sumsBytes = 0;
  ConvStaging staging; ///< Pitched operands cuDNN has no algorithm for: their dense copies
  /// Destroys the descriptors (to describe the phase again, dense).
  void release() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    x = y = nullptr, w = nullptr, conv = nullptr;
    algo = -1, graph.reset(), fused.reset(), workspace = 0;
  }
  ~ConvState() override {
    if (sumsScratch) cudaFree(sumsScratch);
    release();
  }
};

/// cuDNN's name for a tensor dtype (float, bf16, half); the compute type stays float.
Expected<cudnnDataType_t> cudnnTypeOf(const CudaArgs& a, DType t) {
  switch (t) {
  case DType::F32: return CUDNN_DATA_FLOAT;
  case DType::BF16: return CUDNN_DATA_BFLOAT16;
  case DType::F16: return CUDNN_DATA_HALF;
  default: return a.fail(std::string("cuDNN convolutions take f32, bf16 or f16, not ") + dtypeName(t));
  }
}

/// Whether tensor cores may be used: always for 16-bit data, for f32 only under TF32.
bool tensorCoresAllowed(const CudaArgs& a, const ConvState& s) {
  return a.ctx.allowTf32 || s.geom.dataType != CUDNN_DATA_FLOAT;
}

/// Describes an NCHW-ordered shape `s`, stored channels-last when `channelsLast` is set, with
/// pixels `pitch` elements apart when that is not 0 (a pitched view, OpList.def's HGP_PITCHED).
Status setTensor(cudnnTensorDescriptor_t d, const Shape& s, cudnnDataType_t type, bool channelsLast,
                 int64_t pitch = 0) {
  std::vector<int> dims = cudnnDims(s);
  std::vector<int64_t> wide = convStrides({dims.begin(), dims.end()}, channelsLast, pitch);
  std::vector<int> strides(wide.begin(), wide.end());
  HGP_CUDNN_TRY(cudnnSetTensorNdDescriptor(d, type, int(dims.size()), dims.data(), strides.data()));
  return Status::ok();
}

/// Builds the descriptors. `xs` is the convolution's input shape, `ws` its weights, `ys` its output
/// as stored (channels-last under layout="nhwc"); all three have the dtype `dt`. `xt` and `yt`
/// are the input-side and output-side tensors, for their pitches (pitched views: channel ranges
/// of larger channels-last tensors); `dense` describes them packed (a staged phase).
Status describe(CudaArgs& a, ConvState& s, const Shape& stored_xs, const Shape& stored_ws,
                const Shape& stored_ys, DType dt, const DeviceTensor& xt, const DeviceTensor& yt,
                bool dense = false) {
  HGP_ASSIGN_OR_RETURN(Layout layout, layoutOf(a.step.op, a.attrs()));
  bool last = layout == Layout::NHWC;
  if (last && stored_xs.size() != 4) return a.fail("layout=nhwc needs 2-D convolutions");
  Shape xs = channelsFirstShape(stored_xs), ws = channelsFirstShape(stored_ws),
        ys = channelsFirstShape(stored_ys);
  if (!last) xs = stored_xs, ws = stored_ws, ys = stored_ys;
  for (const DeviceTensor& v : a.in)
    if (v.dtype != dt) return a.fail("operands of one convolution must share a dtype");
  // Result 0 only: a convolution with stats=1 (fuse-conv-bn) also gives f32 channel sums.
  if (a.out[0].dtype != dt) return a.fail("the result must have the operands' dtype");
  HGP_ASSIGN_OR_RETURN(cudnnDataType_t type, cudnnTypeOf(a, dt));
  HGP_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.x));
  HGP_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.y));
  HGP_CUDNN_TRY(cudnnCreateFilterDescriptor(&s.w));
  HGP_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s.conv));
  for (const DeviceTensor* t : {&xt, &yt})
    if (t->pitched() && (!last || t->row != t->dim(3)))
      return a.fail("a pitched operand must be a channel range of a channels-last tensor");
  int64_t xPitch = xt.pitched() && !dense ? xt.pitch : 0;
  int64_t yPitch = yt.pitched() && !dense ? yt.pitch : 0;
  HGP_TRY(setTensor(s.x, xs, type, last, xPitch));
  HGP_TRY(setTensor(s.y, ys, type, last, yPitch));
  std::vector<int> wd = cudnnDims(ws);
  HGP_CUDNN_TRY(cudnnSetFilterNdDescriptor(s.w, type, last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                           int(wd.size()), wd.data()));
  std::vector<int64_t> strides = a.attrs().getInts("strides"), pads = a.attrs().getInts("pads"),
                       dil = a.attrs().getInts("dilations");
  size_t r = strides.size();
  std::vector<int> p, st, d;
  if (r == 1) p.push_back(0), st.push_back(1), d.push_back(1);
  for (size_t i = 0; i < r; ++i) {
    if (pads[i] != pads[r + i])
      return a.fail("asymmetric padding is not supported by the cuDNN path");
    p.push_back(int(pads[i]));
    st.push_back(int(strides[i]));
    d.push_back(int(dil[i]));
  }
  auto wide = [](const std::vector<int>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  s.geom = {wide(cudnnDims(xs)), wide(wd), wide(cudnnDims(ys)), wide(p), wide(st), wide(d),
            type, last, xPitch, yPitch};
  HGP_CUDNN_TRY(cudnnSetConvolutionNdDescriptor(s.conv, int(p.size()), p.data(), st.data(), d.data(),
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  HGP_CUDNN_TRY(cudnnSetConvolutionGroupCount(s.conv, int(a.attrs().getInt("group", 1))));
  HGP_CUDNN_TRY(cudnnSetConvolutionMathType(s.conv, tensorCoresAllowed(a, s) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return Status::ok();
}

std::string tuningKey(CudaArgs& a, const ConvState& s, Phase phase, const Shape& xs, const Shape& ws,
                      const Shape& ys) {
  std::ostringstream k;
  k << "conv;" << a.ctx.props.name << ";sm" << a.ctx.props.multiProcessorCount << ";cudnn"
    << cudnnGetVersion() << ";" << phaseName(phase) << ";x" << shapeToString(xs) << ";w"
    << shapeToString(ws) << ";y" << shapeToString(ys) << ";" << a.attrs().toString() << ";"
    << (s.geom.dataType == CUDNN_DATA_BFLOAT16 ? "bf16"
        : s.geom.dataType == CUDNN_DATA_HALF   ? "fp16"
        : a.ctx.allowTf32                      ? "tf32"
                                               : "fp32")
    << ";" << (a.ctx.deterministic ? "det" : "any") << (gemmOnly() ? ",gemm" : "");
  if (s.geom.xPitch || s.geom.yPitch) k << ";pitch=" << s.geom.xPitch << "," << s.geom.yPitch;
  if (s.epilogue.any())
    k << ";ep=" << (s.epilogue.bias ? "bias" : "") << (s.epilogue.relu ? "+relu" : "")
      << (s.epilogue.stats ? "stats" : "") << (a.ctx.cudnnFusion ? "" : ",unfused");
  return k.str();
}

/// The math type to run an algorithm with. Without TF32 it is always FMA: under
/// CUDNN_DEFAULT_MATH, which cudnnFind reports for many algorithms, cuDNN may round float inputs
/// to TF32 on Ampere and later.
cudnnMathType_t mathFor(const CudaArgs& a, const ConvState& s, cudnnMathType_t found) {
  return tensorCoresAllowed(a, s) ? found : CUDNN_FMA_MATH;
}

/// Times the candidates of one phase and returns the fastest acceptable one.
template <typename Perf>
Status pick(CudaArgs& a, const Perf* perf, int n, ConvState& s, const char* phase) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (a.ctx.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    if (perf[i].memory > a.ctx.workspaceLimit) continue;
    if (gemmOnly() && isTransform(perf[i].algo)) continue;
    if (!tensorCoresAllowed(a, s) && (perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                             perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    s.algo = int(perf[i].algo);
    s.workspace = perf[i].memory;
    HGP_CUDNN_TRY(cudnnSetConvolutionMathType(s.conv, mathFor(a, s, perf[i].mathType)));
    return Status::ok();
  }
  return a.fail(std::string("cuDNN has no usable ") + phase + " algorithm for this layer" +
                (a.ctx.deterministic ? " in deterministic mode" : ""));
}

/// Runs the phase with the legacy algorithm in `s` or with `plan`.
bool runPhase(CudaArgs& a, ConvState& s, Phase phase, const ConvGraphPlan* plan, void* xp,
              void* wp, void* yp, void* ws) {
  const float one = 1.f, zero = 0.f;
  if (plan) return bool(plan->execute(a.ctx.cudnn, xp, wp, yp, ws));
  switch (phase) {
  case Phase::Forward:
    return cudnnConvolutionForward(a.ctx.cudnn, &one, s.x, xp, s.w, wp, s.conv,
                                   cudnnConvolutionFwdAlgo_t(s.algo), ws, s.workspace, &zero, s.y,
                                   yp) == CUDNN_STATUS_SUCCESS;
  case Phase::BackwardData:
    return cudnnConvolutionBackwardData(a.ctx.cudnn, &one, s.w, wp, s.y, yp, s.conv,
                                        cudnnConvolutionBwdDataAlgo_t(s.algo), ws, s.workspace,
                                        &zero, s.x, xp) == CUDNN_STATUS_SUCCESS;
  case Phase::BackwardFilter:
    return cudnnConvolutionBackwardFilter(a.ctx.cudnn, &one, s.x, xp, s.y, yp, s.conv,
                                          cudnnConvolutionBwdFilterAlgo_t(s.algo), ws, s.workspace,
                                          &zero, s.w, wp) == CUDNN_STATUS_SUCCESS;
  }
  return false;
}

/// Times the legacy choice in `s` against the graph-API candidates and keeps the fastest in `s`.
/// A graph API that fails leaves the legacy choice.
Status tryGraphEngines(CudaArgs& a, ConvState& s, Phase phase, void* xp, void* wp, void* yp,
                       void* scratch, size_t scratchBytes) {
  auto plans = convGraphPlans(a.ctx.cudnn, phase, s.geom, tensorCoresAllowed(a, s),
                              a.ctx.deterministic, kGraphCandidates, -1, s.beta);
  if (!plans) return Status::ok();
  // No legacy algorithm qualified (s.algo < 0): any engine that runs is better.
  double best = s.algo < 0 ? INFINITY : timeRuns(a.stream, [&] {
    return runPhase(a, s, phase, nullptr, xp, wp, yp, scratch);
  });
  for (auto& plan : *plans) {
    if (size_t(plan->workspace()) > scratchBytes) continue;
    double t = timeRuns(a.stream, [&] { return runPhase(a, s, phase, plan.get(), xp, wp, yp, scratch); });
    if (t < best) {
      best = t;
      s.graph = std::move(plan);
      s.workspace = size_t(s.graph->workspace());
    }
  }
  if (a.ctx.verbose && (s.graph || s.algo >= 0))
    std::fprintf(stderr, "cuda: %s '%s': %s, %.3f ms\n", phaseName(phase), a.step.loc.c_str(),
                 s.graph ? ("graph engine " + std::to_string(s.graph->index())).c_str()
                         : ("legacy algorithm " + std::to_string(s.algo)).c_str(),
                 best);
  HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
  return Status::ok();
}

/// The epilogue kernel over the result `y` of a convolution: add `bias` (when given) per channel,
/// then Relu (when `relu`).
Status runEpilogue(CudaArgs& a, const DeviceTensor& y, const DeviceTensor* bias, bool relu) {
  // Channels-last: the channel is the innermost index, so every element is its own "plane".
  bool last = a.attrs().getString("layout") == "nhwc";
  int64_t c = last ? y.dim(y.rank() - 1) : y.dim(1);
  int64_t plane = last ? 1 : y.numel() / (y.dim(0) * c);
  return launchConvEpilogue(a, y, bias, c, plane, relu);
}

/// The channel sums of a stats=1 convolution's result (a.out[1], a.out[2]) by hgpc's kernel.
Status runSums(CudaArgs& a, const ConvState& s, const DeviceTensor& y) {
  size_t bytes = 0; // the split depends on y's alignment, fixed in the arena; check it is
  HGP_TRY(channelSumsScratch(a, y, s.geom.channelsLast, bytes));
  if (bytes > s.sumsBytes)
    return a.fail("the channel sums need " + std::to_string(bytes) + " bytes of scratch, " +
                  std::to_string(s.sumsBytes) + " were reserved");
  return launchChannelSums(a, y, s.geom.channelsLast, s.sumsScratch, a.out[1].f32(),
                           a.out[2].f32());
}

/// What runs after the convolution when no cuDNN graph does it all: the sums or the epilogue.
Status runTail(CudaArgs& a, const ConvState& s, const DeviceTensor& y, const DeviceTensor* bias) {
  if (s.epilogue.stats) return runSums(a, s, y);
  return runEpilogue(a, y, bias, s.epilogue.relu);
}

/// The layer, for the lines --verbose prints about it: its shapes, dtype and layout.
std::string layerText(const CudaArgs& a, const ConvState& s) {
  return "x" + shapeToString(*a.in[0].shape) + " w" + shapeToString(*a.in[1].shape) + " " +
         dtypeName(a.in[0].dtype) + (s.geom.channelsLast ? " nhwc" : " nchw");
}

/// Times cuDNN's fused convolution + epilogue graphs against the forward choice in `s` followed
/// by the epilogue kernel, and keeps the fastest fused plan in `s.fused` when it beats that. A
/// statistics engine is kept only when, run on guarded outputs, it writes nothing else, its y
/// equals the unfused y and its sums agree with the kernel's (ConvChoice.h, checkedRun).
Status tryFusedEngines(CudaArgs& a, ConvState& s, void* xp, void* wp, const DeviceTensor& y,
                       const DeviceTensor* bias, void* scratch, size_t scratchBytes) {
  auto plans = convGraphPlans(a.ctx.cudnn, Phase::Forward, s.geom, tensorCoresAllowed(a, s),
                              a.ctx.deterministic, kGraphCandidates, -1, 0.f, s.epilogue);
  const char* what = s.epilogue.stats ? "the statistics (conv + GenStats)" : "the epilogue";
  if (!plans || plans->empty()) {
    if (a.ctx.verbose)
      std::fprintf(stderr, "cuda: fwd '%s': no cuDNN engine fuses %s for %s%s%s\n",
                   a.step.loc.c_str(), what, layerText(a, s).c_str(), plans ? "" : ": ",
                   plans ? "" : plans.status().message().c_str());
    return Status::ok();
  }
  void* b = bias ? bias->data : nullptr;
  void* sum = s.epilogue.stats ? a.out[1].data : nullptr;
  void* sumsq = s.epilogue.stats ? a.out[2].data : nullptr;
  double unfused = timeRuns(a.stream, [&] {
    return runPhase(a, s, Phase::Forward, s.graph.get(), xp, wp, y.data, scratch) &&
           bool(runTail(a, s, y, bias));
  });
  std::vector<float> want;
  std::vector<uint8_t> wantY(size_t(y.numel()) * dtypeSize(y.dtype));
  double count = 0; // elements per channel; the step has outputs 1 and 2 only with stats
  if (s.epilogue.stats) {
    HGP_ASSIGN_OR_RETURN(want, readSums(a));
    HGP_CUDA_TRY(cudaMemcpy(wantY.data(), y.data, wantY.size(), cudaMemcpyDeviceToHost));
    count = double(y.numel()) / double(a.out[1].numel());
  }
  double best = unfused;
  for (auto& plan : *plans) {
    if (size_t(plan->workspace()) > scratchBytes) continue;
    double t = timeRuns(a.stream, [&] {
      return bool(plan->execute(a.ctx.cudnn, xp, wp, y.data, scratch, b, sum, sumsq));
    });
    if (t < best && s.epilogue.stats) { // kept only when it writes just y, right, and the sums
      std::string distance, why = statisticsFault(
          a.stream, wantY, y.dtype, want, count, size_t(plan->workspace()), xp,
          size_t(a.in[0].numel()) * dtypeSize(a.in[0].dtype), distance, [&](void* gy, void* gs, void* gq, void* gw) {
            return bool(plan->execute(a.ctx.cudnn, xp, wp, gy, gw, b, gs, gq));
          });
      if (a.ctx.verbose && !distance.empty())
        std::fprintf(stderr, "cuda: fwd '%s': cuDNN fused engine %ld: %s\n", a.step.loc.c_str(),
                     long(plan->index()), distance.c_str());
      if (!why.empty() && a.ctx.verbose)
        std::fprintf(stderr, "cuda: fwd '%s': cuDNN fused engine %ld not used: %s\n",
                     a.step.loc.c_str(), long(plan->index()), why.c_str());
      if (!why.empty()) continue;
    }
    if (t < best) {
      best = t;
      s.fused = std::move(plan);
    }
  }
  if (s.fused) s.workspace = size_t(s.fused->workspace());
  if (a.ctx.verbose)
    std::fprintf(stderr, "cuda: fwd '%s': %s %s, %.3f ms (unfused %.3f ms, %zu fused engines timed) for %s\n",
                 a.step.loc.c_str(), s.epilogue.stats ? "statistics" : "epilogue",
                 s.fused ? ("cuDNN fused engine " + std::to_string(s.fused->index())).c_str() : "kernel",
                 best, unfused, plans->size(), layerText(a, s).c_str());
  HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
  return Status::ok();
}

/// Chooses the algorithm of one phase: from the tuning cache, or by timing.
/// `xp`, `wp`, `yp` are the input-side, weight and output-side buffers the timing may overwrite
/// the outputs of. A forward phase with an epilogue also passes its result `y` and `bias`.
/// With `none` given (pitched operands), finding no algorithm is not an error: *none is set,
/// and the tuning cache remembers it ("staged").
Status choose(CudaArgs& a, ConvState& s, Phase phase, const Shape& xs, const Shape& ws,
              const Shape& ys, void* xp, void* wp, void* yp, bool* none,
              const DeviceTensor* y = nullptr, const DeviceTensor* bias = nullptr) {
  std::string key = tuningKey(a, s, phase, xs, ws, ys);
  if (auto hit = a.ctx.tuning->lookup(key)) {
    if (none && *hit == "staged") return *none = true, Status::ok();
    int algo = 0, math = 0;
    unsigned long long bytes = 0;
    long index = -1;
    if (std::sscanf(hit->c_str(), "algo=%d math=%d ws=%llu", &algo, &math, &bytes) == 3) {
      s.algo = algo;
      s.workspace = bytes;
      HGP_CUDNN_TRY(cudnnSetConvolutionMathType(s.conv, mathFor(a, s, cudnnMathType_t(math))));
      return a.ctx.reserveWorkspace(s.workspace);
    }
    if (std::sscanf(hit->c_str(), "fused=%ld", &index) == 1 && s.epilogue.any()) {
      auto plans = convGraphPlans(a.ctx.cudnn, phase, s.geom, tensorCoresAllowed(a, s),
                                  a.ctx.deterministic, 1, index, 0.f, s.epilogue);
      if (plans && !plans->empty()) {
        s.fused = std::move(plans->front());
        s.workspace = size_t(s.fused->workspace());
        return a.ctx.reserveWorkspace(s.workspace);
      }
    }
    if (std::sscanf(hit->c_str(), "graph=%ld", &index) == 1) {
      auto plans = convGraphPlans(a.ctx.cudnn, phase, s.geom, tensorCoresAllowed(a, s),
                                  a.ctx.deterministic, 1, index, s.beta);
      if (plans && !plans->empty()) {
        s.graph = std::move(plans->front());
        s.workspace = size_t(s.graph->workspace());
        return a.ctx.reserveWorkspace(s.workspace);
      }
    }
  }
  // Scratch for the search, as large as the limit allows.
  void* scratch = nullptr;
  size_t scratchBytes = a.ctx.workspaceLimit;
  while (cudaMalloc(&scratch, scratchBytes) != cudaSuccess && scratchBytes > (size_t(1) << 20)) {
    (void)cudaGetLastError();
    scratchBytes /= 2;
  }
  if (!scratch) return Status(ErrorCode::OutOfMemory, "no memory left to time convolution algorithms");
  HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int n = 0;
  Status st;
  if (phase == Phase::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    cudnnStatus_t e = cudnnFindConvolutionForwardAlgorithmEx(a.ctx.cudnn, s.x, xp, s.w, wp, s.conv, s.y, yp,
                                                             16, &n, perf, scratch, scratchBytes);
    st = e == CUDNN_STATUS_SUCCESS ? pick(a, perf, n, s, "forward") : cudnnError(e, "cudnnFindConvolutionForwardAlgorithmEx", __FILE__, __LINE__);
    if (st) for (int i = 0; i < n; ++i) if (int(perf[i].algo) == s.algo) math = perf[i].mathType;
  } else if (phase == Phase::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[16];
    cudnnStatus_t e = cudnnFindConvolutionBackwardDataAlgorithmEx(a.ctx.cudnn, s.w, wp, s.y, yp, s.conv, s.x, xp,
                                                                  16, &n, perf, scratch, scratchBytes);
    st = e == CUDNN_STATUS_SUCCESS ? pick(a, perf, n, s, "backward-data") : cudnnError(e, "cudnnFindConvolutionBackwardDataAlgorithmEx", __FILE__, __LINE__);
    if (st) for (int i = 0; i < n; ++i) if (int(perf[i].algo) == s.algo) math = perf[i].mathType;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
    cudnnStatus_t e = cudnnFindConvolutionBackwardFilterAlgorithmEx(a.ctx.cudnn, s.x, xp, s.y, yp, s.conv, s.w, wp,
                                                                    16, &n, perf, scratch, scratchBytes);
    st = e == CUDNN_STATUS_SUCCESS ? pick(a, perf, n, s, "backward-filter") : cudnnError(e, "cudnnFindConvolutionBackwardFilterAlgorithmEx", __FILE__, __LINE__);
    if (st) for (int i = 0; i < n; ++i) if (int(perf[i].algo) == s.algo) math = perf[i].mathType;
  }
  // Without a legacy algorithm the graph API's engines may still have one (pitched operands).
  Status legacy = st;
  if (!st) s.algo = -1;
  st = tryGraphEngines(a, s, phase, xp, wp, yp, scratch, scratchBytes);
  if (st && s.algo < 0 && !s.graph) {
    if (none) {
      HGP_CUDA_TRY(cudaFree(scratch));
      a.ctx.tuning->insert(key, "staged");
      return *none = true, Status::ok();
    }
    st = legacy;
  }
  if (st && phase == Phase::Forward && s.epilogue.any() && a.ctx.cudnnFusion && y)
    st = tryFusedEngines(a, s, xp, wp, *y, bias, scratch, scratchBytes);
  cudaFree(scratch);
  HGP_TRY(st);
  if (s.fused)
    a.ctx.tuning->insert(key, "fused=" + std::to_string(s.fused->index()) +
                                  " ws=" + std::to_string(s.workspace));
  else if (s.graph)
    a.ctx.tuning->insert(key, "graph=" + std::to_string(s.graph->index()) +
                                  " ws=" + std::to_string(s.workspace));
  else
    a.ctx.tuning->insert(key, "algo=" + std::to_string(s.algo) + " math=" +
                                  std::to_string(int(mathFor(a, s, math))) + " ws=" + std::to_string(s.workspace));
  return a.ctx.reserveWorkspace(s.workspace);
}

const float kOne = 1.0f, kZero = 0.0f;

/// Chooses the phase's algorithm after describe(): for the pitched operands as they are when
/// cuDNN has one, else staged (ConvStaging.h): described again dense, timed on dense buffers, and
/// the workspace reserved for the copies too. `xt`/`yt` are the input-side and output-side
/// tensors, `wp` the filter (or dW's timing target), `y`/`bias` as for choose().
Status prepare(CudaArgs& a, ConvState& s, Phase phase, const DeviceTensor& xt, const Shape& ws,
               void* wp, const DeviceTensor& yt, const DeviceTensor* y = nullptr,
               const DeviceTensor* bias = nullptr) {
  bool pitched = xt.pitched() || yt.pitched(), none = false;
  HGP_TRY(choose(a, s, phase, *xt.shape, ws, *yt.shape, xt.data, wp, yt.data,
                 pitched ? &none : nullptr, y, bias));
  if (!none) return Status::ok();
  s.release();
  HGP_TRY(describe(a, s, *xt.shape, ws, *yt.shape, xt.dtype, xt, yt, /*dense=*/true));
  s.staging = {true, xt.pitched() ? denseBytes(xt) : 0, yt.pitched() ? denseBytes(yt) : 0};
  StagingScratch timing; // the workspace holds the copies when the phase runs
  HGP_TRY(timing.allocate(s.staging));
  HGP_TRY(choose(a, s, phase, *xt.shape, ws, *yt.shape, timing.x ? timing.x : xt.data, wp,
                 timing.y ? timing.y : yt.data, nullptr, y, bias));
  if (a.ctx.verbose)
    std::fprintf(stderr,
                 "cuda: %s '%s': cuDNN has no algorithm for the pitched operands (x pitch %lld, y "
                 "pitch %lld)%s; staged through dense copies (%zu bytes of workspace)\n",
                 phaseName(phase), a.step.loc.c_str(), (long long)xt.pitch, (long long)yt.pitch,
                 a.ctx.deterministic ? " in deterministic mode" : "", s.staging.bytes());
  return a.ctx.reserveWorkspace(s.staging.bytes() + s.workspace);
}

/// Y = act(conv(X, W) + B): forward, with the epilogue (bias, activation) when there is one.
Status forward(CudaArgs& a, const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y,
               const DeviceTensor* bias) {
  ConvState& s = a.stateAs<ConvState>();
  if (!s.ready) {
    std::string act = a.attrs().getString("activation", "none");
    if (act != "none" && act != "relu") return a.fail("unknown activation '" + act + "'");
    s.epilogue = {bias != nullptr, act == "relu", a.attrs().getInt("stats", 0) != 0};
    if (s.epilogue.stats && (s.epilogue.bias || s.epilogue.relu || a.out.size() != 3))
      return a.fail("stats=1 takes no bias and no activation and gives three results");
    if (!s.epilogue.stats && a.out.size() != 1) return a.fail("Conv without stats=1 has one result");
    if (s.epilogue.any() && y.pitched())
      return a.fail("the epilogue kernel and the channel sums cannot write or read a pitched result");
    HGP_TRY(describe(a, s, *x.shape, *w.shape, *y.shape, x.dtype, x, y));
    if (s.epilogue.stats) {
      for (size_t i = 1; i < 3; ++i)
        if (a.out[i].dtype != DType::F32 || *a.out[i].shape != Shape{s.geom.y[1]})
          return a.fail("the channel sums must be f32[" + std::to_string(s.geom.y[1]) + "], got " +
                        dtypeName(a.out[i].dtype) + shapeToString(*a.out[i].shape));
      size_t bytes = 0;
      HGP_TRY(channelSumsScratch(a, y, s.geom.channelsLast, bytes));
      s.sumsBytes = std::max<size_t>(bytes, 256);
      HGP_CUDA_TRY(cudaMalloc(&s.sumsScratch, s.sumsBytes));
    }
    HGP_TRY(prepare(a, s, Phase::Forward, x, *w.shape, w.data, y, &y, bias));
    s.ready = true;
    if (a.ctx.verbose && s.epilogue.any())
      std::fprintf(stderr, "cuda: conv '%s': %s %s\n", a.step.loc.c_str(),
                   s.epilogue.stats ? "statistics" : "epilogue",
                   s.fused ? "in a cuDNN fused graph" : "by hgpc's kernel");
  }
  HGP_ASSIGN_OR_RETURN(ConvBuffers b, stagedBuffers(a, s.staging, x, y, /*readsX=*/true, /*readsY=*/false));
  // An epilogue's y is never pitched (checked above), so b.y is y itself where one runs.
  if (s.fused)
    return s.fused->execute(a.ctx.cudnn, b.x, w.data, b.y, b.workspace,
                            bias ? bias->data : nullptr, s.epilogue.stats ? a.out[1].data : nullptr,
                            s.epilogue.stats ? a.out[2].data : nullptr);
  if (s.graph) HGP_TRY(s.graph->execute(a.ctx.cudnn, b.x, w.data, b.y, b.workspace));
  else
    HGP_CUDNN_TRY(cudnnConvolutionForward(a.ctx.cudnn, &kOne, s.x, b.x, s.w, w.data, s.conv,
                                          cudnnConvolutionFwdAlgo_t(s.algo), b.workspace,
                                          s.workspace, &kZero, s.y, b.y));
  if (s.staging.on && y.pitched()) HGP_TRY(stageOut(a, y, b.y));
  return s.epilogue.any() ? runTail(a, s, y, bias) : Status::ok();
}

/// dX = conv^T(dY, W): the gradient of a convolution whose input has dx's shape.
Status backwardData(CudaArgs& a, const DeviceTensor& dy, const DeviceTensor& w, const DeviceTensor& dx) {
  ConvState& s = a.stateAs<ConvState>();
  if (!s.ready) {
    HGP_TRY(describe(a, s, *dx.shape, *w.shape, *dy.shape, dy.dtype, dx, dy));
    HGP_TRY(prepare(a, s, Phase::BackwardData, dx, *w.shape, w.data, dy));
    s.ready = true;
  }
  HGP_ASSIGN_OR_RETURN(ConvBuffers b, stagedBuffers(a, s.staging, dx, dy, /*readsX=*/false, /*readsY=*/true));
  if (s.graph) HGP_TRY(s.graph->execute(a.ctx.cudnn, b.x, w.data, b.y, b.workspace));
  else
    HGP_CUDNN_TRY(cudnnConvolutionBackwardData(a.ctx.cudnn, &kOne, s.w, w.data, s.y, b.y, s.conv,
                                               cudnnConvolutionBwdDataAlgo_t(s.algo), b.workspace,
                                               s.workspace, &kZero, s.x, b.x));
  if (s.staging.on && dx.pitched()) HGP_TRY(stageOut(a, dx, b.x));
  return Status::ok();
}

/// dW: the filter gradient of a convolution from x to dy.
Status backwardFilter(CudaArgs& a, const DeviceTensor& x, const DeviceTensor& dy, const DeviceTensor& dw) {
  ConvState& s = a.stateAs<ConvState>();
  if (!s.ready) {
    s.beta = a.attrs().getInt("accumulate", 0) ? 1.f : 0.f;
    HGP_TRY(describe(a, s, *x.shape, *dw.shape, *dy.shape, x.dtype, x, dy));
    // Timing writes the result; an accumulating phase must keep the sum so far, so it times on
    // a scratch copy of dW's shape.
    void* target = dw.data;
    if (s.beta != 0.f) HGP_CUDA_TRY(cudaMalloc(&target, size_t(dw.numel() * dtypeSize(dw.dtype))));
    Status st = prepare(a, s, Phase::BackwardFilter, x, *dw.shape, target, dy);
    if (target != dw.data) {
      cudaError_t e = cudaFree(target);
      if (st && e != cudaSuccess) st = cudaError(e, "cudaFree", __FILE__, __LINE__);
    }
    HGP_TRY(st);
    s.ready = true;
  }
  HGP_ASSIGN_OR_RETURN(ConvBuffers b, stagedBuffers(a, s.staging, x, dy, /*readsX=*/true, /*readsY=*/true));
  if (s.graph) return s.graph->execute(a.ctx.cudnn, b.x, dw.data, b.y, b.workspace);
  HGP_CUDNN_TRY(cudnnConvolutionBackwardFilter(a.ctx.cudnn, &kOne, s.x, b.x, s.y, b.y,
                                               s.conv, cudnnConvolutionBwdFilterAlgo_t(s.algo),
                                               b.workspace, s.workspace,
                                               s.beta != 0.f ? &kOne : &kZero, s.w, dw.data));
  return Status::ok();
}

} // namespace

Status execConv(CudaArgs& a) {
  return forward(a, a.in[0], a.in[1], a.out[0], a.in.size() == 3 ? &a.in[2] : nullptr);
}

// ConvTranspose(X, W) is the data gradient of a convolution from Y to X.
Status execConvTranspose(CudaArgs& a) {
  HGP_TRY(backwardData(a, a.in[0], a.in[1], a.out[0]));
  return a.in.size() == 3 ? runEpilogue(a, a.out[0], &a.in[2], false) : Status::ok();
}

Status execConvBwdData(CudaArgs& a) { return backwardData(a, a.in[0], a.in[1], a.out[0]); }

Status execConvBwdFilter(CudaArgs& a) { return backwardFilter(a, a.in[0], a.in[1], a.out[0]); }

} // namespace hgp::cuda
