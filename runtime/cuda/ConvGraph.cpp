#include "runtime/cuda/ConvGraph.h"

#include <utility>

// The graph API's handle attributes are deprecated in favour of device properties, but cuDNN 9
// still reads them, and they are what ties a plan to our handle.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace hgp::cuda {

namespace {

/// An owned backend descriptor.
struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d(o.d) { o.d = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d, o.d);
    return *this;
  }
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
};

Status create(cudnnBackendDescriptorType_t type, Desc& out) {
  HGP_CUDNN_TRY(cudnnBackendCreateDescriptor(type, &out.d));
  return Status::ok();
}

Status set(Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void* values) {
  HGP_CUDNN_TRY(cudnnBackendSetAttribute(d.d, name, type, count, values));
  return Status::ok();
}

/// Tensor uids in the variant pack; the last two are the epilogue's bias and its virtual
/// intermediates.
constexpr int64_t kX = 1, kW = 2, kY = 3, kBias = 4, kConvOut = 5, kBiased = 6, kSum = 7,
                  kSumSq = 8;

Status tensor(Desc& t, int64_t uid, const std::vector<int64_t>& dims, cudnnDataType_t type,
              bool channelsLast, bool isVirtual = false, int64_t pitch = 0) {
  std::vector<int64_t> strides = convStrides(dims, channelsLast, pitch);
  int64_t align = 16; // the memory plan and every staging buffer align tensors to 256 bytes
  HGP_TRY(create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
  if (isVirtual) HGP_TRY(set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual));
  HGP_TRY(set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  HGP_TRY(set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()), dims.data()));
  HGP_TRY(set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()), strides.data()));
  HGP_TRY(set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  HGP_TRY(set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  HGP_CUDNN_TRY(cudnnBackendFinalize(t.d));
  return Status::ok();
}

/// Whether the engine config's numerical notes allow it under the run's precision rules.
bool acceptable(cudnnBackendDescriptor_t cfg, bool allowTf32, bool deterministic) {
  Desc engine;
  if (!create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, engine)) return false;
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &n, &engine.d) != CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                               notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (!allowTf32 && (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                       notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
      return false;
    if (deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return false;
  }
  return true;
}

/// A pointwise operation y = mode(x[, b]) computed in float.
Status pointwise(Desc& pw, Desc& op, cudnnPointwiseMode_t mode, Desc& x, Desc* b, Desc& y) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  auto bd = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  HGP_TRY(create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw));
  HGP_TRY(set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  HGP_TRY(set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32));
  HGP_CUDNN_TRY(cudnnBackendFinalize(pw.d));
  HGP_TRY(create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op));
  HGP_TRY(set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, bd, 1, &pw.d));
  HGP_TRY(set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, bd, 1, &x.d));
  if (b) HGP_TRY(set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bd, 1, &b->d));
  HGP_TRY(set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, bd, 1, &y.d));
  HGP_CUDNN_TRY(cudnnBackendFinalize(op.d));
  return Status::ok();
}

} // namespace

std::vector<int64_t> convStrides(const std::vector<int64_t>& dims, bool channelsLast, int64_t pitch) {
  std::vector<int64_t> strides(dims.size());
  std::vector<size_t> order(dims.size()); // innermost first
  for (size_t i = 0; i < dims.size(); ++i) order[i] = dims.size() - 1 - i;
  if (channelsLast && dims.size() > 2) {
    order.clear();
    order.push_back(1);
    for (size_t i = dims.size(); i-- > 2;) order.push_back(i);
    order.push_back(0);
  }
  int64_t s = 1;
  for (size_t i : order) {
    strides[i] = s;
    s *= channelsLast && pitch && i == 1 ? pitch : dims[i];
  }
  return strides;
}


struct ConvGraphDescriptors {
  Desc x, w, y, conv, op, graph;
  /// The epilogue: the bias vector, the float intermediates and the pointwise operations.
  Desc bias, convOut, biased, addPw, addOp, reluPw, reluOp;
  /// The statistics epilogue: GenStats over y into sum and sumsq.
  Desc sum, sumsq, genStats;
  bool hasBias = false, hasStats = false;
  std::vector<Desc> configs;
  std::vector<Desc> plans; ///< Parallel to configs; empty where not built.
};

ConvGraphPlan::ConvGraphPlan(std::shared_ptr<ConvGraphDescriptors> d, size_t index,
                             int64_t workspace)
    : d_(std::move(d)), index_(index), workspace_(workspace) {}

ConvGraphPlan::~ConvGraphPlan() = default;

Status ConvGraphPlan::execute(cudnnHandle_t h, void* x, void* w, void* y, void* workspace,
                              void* bias, void* sum, void* sumsq) const {
  Desc pack;
  int64_t uids[5] = {kX, kW, kY, kBias, kSumSq};
  void* ptrs[5] = {x, w, y, bias, sumsq};
  int64_t n = d_->hasBias ? 4 : 3;
  if (d_->hasBias && !bias)
    return Status(ErrorCode::Internal, "a fused convolution plan needs its bias");
  if (d_->hasStats) {
    if (!sum || !sumsq)
      return Status(ErrorCode::Internal, "a convolution plan with statistics needs sum and sumsq");
    uids[3] = kSum;
    ptrs[3] = sum;
    n = 5;
  }
  HGP_TRY(create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack));
  HGP_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
  HGP_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
  HGP_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  HGP_CUDNN_TRY(cudnnBackendFinalize(pack.d));
  HGP_CUDNN_TRY(cudnnBackendExecute(h, d_->plans[index_].d, pack.d));
  return Status::ok();
}

Expected<std::vector<std::unique_ptr<ConvGraphPlan>>>
convGraphPlans(cudnnHandle_t h, ConvPhase phase, const ConvGeometry& g, bool allowTf32,
               bool deterministic, size_t limit, long only, float beta, ConvEpilogue epilogue) {
  if (epilogue.any() && (phase != ConvPhase::Forward || beta != 0.f))
    return Status(ErrorCode::Internal, "only a forward convolution that overwrites its result takes an epilogue");
  if (epilogue.stats && (epilogue.bias || epilogue.relu))
    return Status(ErrorCode::Internal, "the statistics epilogue takes no bias and no relu");
  auto d = std::make_shared<ConvGraphDescriptors>();
  HGP_TRY(tensor(d->x, kX, g.x, g.dataType, g.channelsLast, false, g.xPitch));
  HGP_TRY(tensor(d->w, kW, g.w, g.dataType, g.channelsLast));
  HGP_TRY(tensor(d->y, kY, g.y, g.dataType, g.channelsLast, false, g.yPitch));
  // With a pointwise epilogue the convolution writes a virtual float tensor the pointwise ops
  // read; GenStats reads the stored y itself (the sums of y as the BatchNorm will read it).
  bool pointwiseEpilogue = epilogue.bias || epilogue.relu;
  Desc& convY = pointwiseEpilogue ? d->convOut : d->y;
  if (pointwiseEpilogue)
    HGP_TRY(tensor(d->convOut, kConvOut, g.y, CUDNN_DATA_FLOAT, g.channelsLast, true));

  int64_t spatial = int64_t(g.pads.size());
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  HGP_TRY(create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, d->conv));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, spatial, g.pads.data()));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, spatial, g.pads.data()));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, spatial, g.strides.data()));
  HGP_TRY(set(d->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, spatial, g.dilations.data()));
  HGP_CUDNN_TRY(cudnnBackendFinalize(d->conv.d));

  float alpha = 1.f;
  auto bd = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  switch (phase) {
  case ConvPhase::Forward:
    HGP_TRY(create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, d->op));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, bd, 1, &d->x.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, bd, 1, &d->w.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, bd, 1, &convY.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, bd, 1, &d->conv.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    break;
  case ConvPhase::BackwardData:
    HGP_TRY(create(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, d->op));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, bd, 1, &d->x.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, bd, 1, &d->w.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, bd, 1, &d->y.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, bd, 1, &d->conv.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    break;
  case ConvPhase::BackwardFilter:
    HGP_TRY(create(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, d->op));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, bd, 1, &d->x.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, bd, 1, &d->w.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, bd, 1, &d->y.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, bd, 1, &d->conv.d));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    HGP_TRY(set(d->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    break;
  }
  HGP_CUDNN_TRY(cudnnBackendFinalize(d->op.d));

  std::vector<cudnnBackendDescriptor_t> ops = {d->op.d};
  if (epilogue.bias) {
    std::vector<int64_t> bdims(g.y.size(), 1);
    bdims[1] = g.y[1];
    d->hasBias = true;
    HGP_TRY(tensor(d->bias, kBias, bdims, g.dataType, g.channelsLast));
    Desc& out = epilogue.relu ? d->biased : d->y;
    if (epilogue.relu)
      HGP_TRY(tensor(d->biased, kBiased, g.y, CUDNN_DATA_FLOAT, g.channelsLast, true));
    HGP_TRY(pointwise(d->addPw, d->addOp, CUDNN_POINTWISE_ADD, d->convOut, &d->bias, out));
    ops.push_back(d->addOp.d);
  }
  if (epilogue.relu) {
    Desc& in = epilogue.bias ? d->biased : d->convOut;
    HGP_TRY(pointwise(d->reluPw, d->reluOp, CUDNN_POINTWISE_RELU_FWD, in, nullptr, d->y));
    ops.push_back(d->reluOp.d);
  }
  if (epilogue.stats) {
    std::vector<int64_t> sdims(g.y.size(), 1);
    sdims[1] = g.y[1];
    d->hasStats = true;
    HGP_TRY(tensor(d->sum, kSum, sdims, CUDNN_DATA_FLOAT, g.channelsLast));
    HGP_TRY(tensor(d->sumsq, kSumSq, sdims, CUDNN_DATA_FLOAT, g.channelsLast));
    cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    HGP_TRY(create(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, d->genStats));
    HGP_TRY(set(d->genStats, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode));
    HGP_TRY(set(d->genStats, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32));
    HGP_TRY(set(d->genStats, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, bd, 1, &d->y.d));
    HGP_TRY(set(d->genStats, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, bd, 1, &d->sum.d));
    HGP_TRY(set(d->genStats, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, bd, 1, &d->sumsq.d));
    // An error here is this cuDNN not knowing the operation for these tensors: no engine, which
    // the caller reports, not a failure.
    if (cudnnBackendFinalize(d->genStats.d) != CUDNN_STATUS_SUCCESS)
      return std::vector<std::unique_ptr<ConvGraphPlan>>{};
    ops.push_back(d->genStats.d);
  }
  HGP_TRY(create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, d->graph));
  HGP_TRY(set(d->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, bd, int64_t(ops.size()), ops.data()));
  HGP_TRY(set(d->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  using Plans = std::vector<std::unique_ptr<ConvGraphPlan>>;
  if (cudnnStatus_t e = cudnnBackendFinalize(d->graph.d); e != CUDNN_STATUS_SUCCESS) {
    if (epilogue.any()) return Plans{}; // this cuDNN cannot express the fusion
    return cudnnError(e, "cudnnBackendFinalize(operation graph)", __FILE__, __LINE__);
  }

  // The heuristics' engine configurations; a fused graph that mode A has nothing for is offered
  // to the fallback list (cuDNN's runtime-fusion engines).
  Desc heur;
  int64_t count = 0;
  for (cudnnBackendHeurMode_t heurMode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    heur = Desc();
    count = 0;
    HGP_TRY(create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, heur));
    HGP_TRY(set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, bd, 1, &d->graph.d));
    HGP_TRY(set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heurMode));
    cudnnStatus_t e = cudnnBackendFinalize(heur.d);
    if (e == CUDNN_STATUS_SUCCESS)
      e = cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, bd, 0, &count, nullptr);
    if (e != CUDNN_STATUS_SUCCESS && !epilogue.any())
      return cudnnError(e, "cudnnBackendFinalize(engine heuristics)", __FILE__, __LINE__);
    if (count > 0 || !epilogue.any()) break;
  }
  if (count == 0 && epilogue.any()) return Plans{};
  d->configs.resize(size_t(count));
  std::vector<cudnnBackendDescriptor_t> raw(static_cast<size_t>(count));
  for (size_t i = 0; i < raw.size(); ++i) {
    HGP_TRY(create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, d->configs[i]));
    raw[i] = d->configs[i].d;
  }
  int64_t got = 0;
  if (count > 0)
    HGP_CUDNN_TRY(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, bd, count, &got, raw.data()));
  d->plans.resize(size_t(got));

  std::vector<std::unique_ptr<ConvGraphPlan>> out;
  for (size_t i = 0; i < size_t(got) && out.size() < limit; ++i) {
    if (only >= 0 && i != size_t(only)) continue;
    if (!acceptable(raw[i], allowTf32, deterministic)) continue;
    Desc& plan = d->plans[i];
    if (!create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan)) continue;
    if (cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, bd, 1, &raw[i]) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(plan.d) != CUDNN_STATUS_SUCCESS) {
      plan = Desc();
      continue;
    }
    int64_t ws = 0, n = 0;
    if (cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                 1, &n, &ws) != CUDNN_STATUS_SUCCESS) {
      plan = Desc();
      continue;
    }
    out.push_back(std::make_unique<ConvGraphPlan>(d, i, ws));
  }
  return out;
}

} // namespace hgp::cuda
