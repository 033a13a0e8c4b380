#include "runtime/cuda/GraphProgram.h"

#include <algorithm>

namespace hgp::cuda {

namespace {

/// Consecutive optimizer steps that can share one multi-tensor launch: same op, same attributes,
/// same scalar operands (lr, ok, step, and the loss scale with grad_scale=1).
bool groupable(const PlanStep& a, const PlanStep& b) {
  return opHas(a.op, OpFlag::Optimizer) && a.op == b.op && a.attrs == b.attrs &&
         a.inputs[2] == b.inputs[2] && a.inputs[3] == b.inputs[3] && a.inputs[4] == b.inputs[4] &&
         a.inputs.size() == b.inputs.size() &&
         (!a.attrs.getInt("grad_scale", 0) || a.inputs.back() == b.inputs.back());
}

} // namespace

Program::~Program() {
  for (cudaGraphExec_t g : graphs)
    if (g) (void)cudaGraphExecDestroy(g);
  for (Launch& l : launches)
    if (l.done) (void)cudaEventDestroy(l.done);
}

Status Program::dropGraph(int slot) {
  if (!graphs[slot]) return Status::ok();
  cudaGraphExec_t g = graphs[slot];
  graphs[slot] = nullptr;
  HGP_CUDA_TRY(cudaGraphExecDestroy(g));
  return Status::ok();
}

std::string Program::describeStep(int step) const {
  const PlanStep& s = source->steps[size_t(step)];
  return std::string(opName(s.op)) + " '" + s.loc + "'";
}

Status buildProgram(Program& p, const Plan& plan, const PlanProgram& src, size_t lanes) {
  p.source = &src;
  // Every input is copied in, also one that only a binding reads (a graph that returns its
  // input unchanged).
  for (size_t t = 0; t < plan.tensors.size(); ++t)
    if (plan.tensors[t].role == TensorRole::Input) p.inputs.push_back(int(t));
  std::vector<int> launchOf(src.steps.size());
  p.usesLane.assign(lanes, false);
  for (size_t i = 0; i < src.steps.size(); ++i) {
    const PlanStep& s = src.steps[i];
    const PlanStep* prev =
        p.launches.empty() ? nullptr : &src.steps[size_t(p.launches.back().steps.back())];
    if (prev && prev->stream == s.stream && groupable(*prev, s)) {
      p.launches.back().steps.push_back(int(i));
    } else {
      p.launches.emplace_back().steps = {int(i)};
      p.launches.back().lane = s.stream;
    }
    Launch& l = p.launches.back();
    launchOf[i] = int(p.launches.size() - 1);
    p.usesLane[size_t(s.stream)] = true;
    for (int w : s.waits) l.waits.push_back(launchOf[size_t(w)]);
    for (int t : s.inputs) l.perSlot |= plan.tensors[size_t(t)].role == TensorRole::Input;
  }
  for (Launch& l : p.launches) {
    std::sort(l.waits.begin(), l.waits.end());
    l.waits.erase(std::unique(l.waits.begin(), l.waits.end()), l.waits.end());
    for (int w : l.waits) {
      Launch& from = p.launches[size_t(w)];
      if (!from.done) HGP_CUDA_TRY(cudaEventCreateWithFlags(&from.done, cudaEventDisableTiming));
    }
  }
  return Status::ok();
}

void noteCapturedNodes(Program& p, int step, cudaStream_t stream) {
  // Edge data must be asked for: cuDNN's kernels may be joined by programmatic (PDL) edges, and
  // a query without it fails as lossy and leaves an error behind for the next launch to find.
  // Failed queries only cost the naming of nodes, so their errors are cleared, not returned.
  cudaStreamCaptureStatus status;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t n = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, &edges, &n) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  std::vector<cudaGraphNode_t> todo(deps, deps + n), up;
  std::vector<cudaGraphEdgeData> upEdges;
  while (!todo.empty()) {
    cudaGraphNode_t node = todo.back();
    todo.pop_back();
    if (!p.nodeStep.emplace(node, step).second) continue;
    size_t k = 0;
    if (cudaGraphNodeGetDependencies(node, nullptr, nullptr, &k) != cudaSuccess || k == 0) {
      (void)cudaGetLastError();
      continue;
    }
    up.resize(k);
    upEdges.resize(k);
    if (cudaGraphNodeGetDependencies(node, up.data(), upEdges.data(), &k) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    todo.insert(todo.end(), up.begin(), up.begin() + long(k));
  }
}

CaptureGuard::CaptureGuard(cudaStream_t stream, std::function<void(bool)> mark)
    : stream_(stream), mark_(std::move(mark)) {
  cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    began_ = cudaError(e, "cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)",
                       __FILE__, __LINE__);
    return;
  }
  open_ = true;
  mark_(true);
}

CaptureGuard::~CaptureGuard() {
  if (!open_) return;
  mark_(false);
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) (void)cudaGraphDestroy(graph);
  // The failed capture's error (cudaErrorStreamCaptureInvalidated and the like) must not be
  // found by the next launch.
  (void)cudaGetLastError();
}

Expected<cudaGraph_t> CaptureGuard::end() {
  if (!open_) return began_.isOk() ? Status(ErrorCode::Internal, "no capture to end") : began_;
  open_ = false;
  mark_(false);
  cudaGraph_t graph = nullptr;
  HGP_CUDA_TRY(cudaStreamEndCapture(stream_, &graph));
  return graph;
}

Status instantiateGraph(Program& p, int slot, cudaGraph_t graph) {
  cudaGraphInstantiateParams params{};
  cudaError_t e = cudaGraphInstantiateWithParams(&p.graphs[slot], graph, &params);
  if (e != cudaSuccess) {
    p.graphs[slot] = nullptr;
    std::string who = "an unknown node";
    auto it = p.nodeStep.find(params.errNode_out);
    if (it != p.nodeStep.end()) who = p.describeStep(it->second);
    (void)cudaGraphDestroy(graph);
    return Status(ErrorCode::Device, "instantiating the CUDA graph of program " + p.source->name +
                                         " failed at " + who + ": " + cudaGetErrorString(e));
  }
  HGP_CUDA_TRY(cudaGraphDestroy(graph));
  return Status::ok();
}

} // namespace hgp::cuda
