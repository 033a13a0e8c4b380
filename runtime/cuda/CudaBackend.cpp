// CudaBackend.cpp - the CUDA backend's Backend interface: init, load, run, read, write (the parts
// are listed in CudaBackend.h).
#include "runtime/cuda/CudaBackend.h"

#include "runtime/plan/InitialValues.h"
#include "runtime/plan/Precision.h"

#include <algorithm>
#include <cstdio>

namespace hgp {
namespace cuda {

Status execOptimizerGroup(std::vector<CudaArgs>& steps, std::unique_ptr<StepState>& state);

namespace {

using ExecFn = Status (*)(CudaArgs&);
constexpr ExecFn kExec[] = {
#define HGP_OP(Name, ...) &exec##Name,
#include "runtime/plan/OpList.def"
};

/// Refuses a plan with a 16-bit tensor on an op whose CUDA executor is f32 only (an op without
/// CudaHalf in OpList.def), before anything runs.
Status checkHalfSupport(const Plan& plan) {
  for (const PlanProgram& p : plan.programs)
    for (const PlanStep& s : p.steps) {
      if (opHas(s.op, OpFlag::CudaHalf)) continue;
      std::vector<int> touched = s.inputs;
      touched.insert(touched.end(), s.outputs.begin(), s.outputs.end());
      for (int t : touched) {
        DType d = plan.tensors[size_t(t)].type.dtype;
        if (d != DType::BF16 && d != DType::F16) continue;
        return Status(ErrorCode::InvalidModel,
                      std::string("the CUDA backend cannot run this ") +
                          plan.meta.getString("precision", "?") + " plan yet: " + opName(s.op) +
                          " '" + s.loc + "' of program " + p.name + " reads or writes " +
                          dtypeName(d) + " tensor '" + plan.tensors[size_t(t)].name +
                          "' (docs/precision.md lists what runs in 16 bits)");
      }
    }
  return Status::ok();
}

} // namespace

CudaBackend::~CudaBackend() {
  // Nothing may be freed while a stream still uses it: wait for all of them first. The members
  // then free what they own, programs (graphs, events) before staging, memory and lanes.
  for (auto& l : lanes_)
    if (l->ctx.stream) (void)cudaStreamSynchronize(l->ctx.stream);
  programs_.clear();
}

Status CudaBackend::init() {
  HGP_TRY(device_.open(opts_.device));
  device_.deterministic = opts_.deterministic;
  device_.verbose = opts_.verbose;
  device_.cudnnFusion = opts_.cudnnFusion;
  device_.tuning = &tuning_;
  if (opts_.ranks > 1) {
    if (!opts_.shareUniqueId) return Status(ErrorCode::Internal, "no rendezvous for the NCCL id");
    HGP_ASSIGN_OR_RETURN(comm_, Communicator::create(opts_.rank, opts_.ranks, opts_.shareUniqueId));
    device_.comm = comm_.get();
  }
  HGP_ASSIGN_OR_RETURN(std::unique_ptr<Lane> mainLane, Lane::create(device_));
  lanes_.push_back(std::move(mainLane));
  HGP_TRY(staging_.init());
  if (!opts_.profile.empty() || !opts_.trace.empty()) {
    HGP_ASSIGN_OR_RETURN(profiler_, ActivityProfiler::open());
    profile_ = ProfileState::Pending;
  }
  return Status::ok();
}

Status CudaBackend::load(const Plan& plan, const InitData& data) {
  HGP_TRY(checkHalfSupport(plan));
  HGP_ASSIGN_OR_RETURN(Precision precision, planPrecision(plan.meta));
  // The generated kernels first: a plan compiled for another GPU fails here, before anything
  // is allocated.
  fusedKernels_ = std::make_unique<FusedKernels>();
  HGP_TRY(fusedKernels_->load(plan, device_.props));
  device_.kernels = fusedKernels_.get();
  device_.allowTf32 = allowsTf32(precision);
  plan_ = &plan;
  size_t freeBytes = 0, totalBytes = 0;
  HGP_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
  // The main lane's cuBLAS workspace is already allocated, and counted in `need`.
  freeBytes += kCublasWorkspace;
  size_t need = size_t(plan.persistentBytes + plan.transientBytes) + kCublasWorkspace;
  if (need + (size_t(64) << 20) > freeBytes)
    return makeError(ErrorCode::OutOfMemory,
                     "the plan needs %.1f MiB on %s (%.1f MiB of weights and state, %.1f MiB of "
                     "activations and gradients) but only %.1f MiB are free; compile with a "
                     "smaller --batch",
                     double(need) / (1 << 20), device_.props.name,
                     double(plan.persistentBytes) / (1 << 20),
                     double(plan.transientBytes) / (1 << 20), double(freeBytes) / (1 << 20));
  // Leave room for scratch: at most a quarter of what remains, within [64 MiB, 1 GiB].
  device_.workspaceLimit = std::clamp((freeBytes - need) / 4, size_t(64) << 20, size_t(1) << 30);
  for (auto& l : lanes_) device_.applyTo(l->ctx);
  HGP_ASSIGN_OR_RETURN(persistent_,
                       allocateDevice(std::max<size_t>(64, size_t(plan.persistentBytes))));
  HGP_ASSIGN_OR_RETURN(transient_,
                       allocateDevice(std::max<size_t>(64, size_t(plan.transientBytes))));
  HGP_CUDA_TRY(
      cudaMemsetAsync(persistent_.get(), 0, size_t(plan.persistentBytes), mainLane().stream));
  HGP_TRY(initialize(plan, data));
  int streams = 1;
  for (const PlanProgram& p : plan.programs)
    for (const PlanStep& s : p.steps) streams = std::max(streams, s.stream + 1);
  while (int(lanes_.size()) < streams) {
    HGP_ASSIGN_OR_RETURN(std::unique_ptr<Lane> l, Lane::create(device_));
    lanes_.push_back(std::move(l));
  }
  views_.clear();
  for (size_t i = 0; i < plan.tensors.size(); ++i)
    views_.push_back({plan.tensors[i].type.dtype, &plan.tensors[i].type.shape, address(int(i)),
                      plan.tensors[i].row, plan.tensors[i].pitch});
  HGP_TRY(staging_.allocate(plan, [this](int t) { return address(t); }));
  HGP_CUDA_TRY(cudaStreamSynchronize(mainLane().stream));
  return Status::ok();
}

Status CudaBackend::run(const std::string& name) {
  HGP_ASSIGN_OR_RETURN(Program * p, program(name));
  int slot = inputSlot_ = slot_;
  slot_ = (slot_ + 1) % kSlots;
  Status st;
  if (profile_ != ProfileState::Off && profile_ != ProfileState::Done && name == "train" &&
      p->runs >= 2 && p->prepared[slot]) {
    st = profileRun(*p, slot, opts_.eager || profile_ == ProfileState::EagerPending);
  } else if (!opts_.opTimes.empty() && !p->timed && p->runs > 0 && p->graphs[0] && !opts_.eager) {
    st = timeLaunches(*p, slot);
  } else if (opts_.eager || !p->prepared[slot]) {
    // A slot's first run is eager: executors build their state (and on the very first run
    // time algorithms and size the workspace) outside any capture.
    st = enqueue(*p, slot, nullptr, p->runs == 0 && lanes_.size() > 1);
    p->prepared[slot] = true;
    if (st && p->runs == 0) {
      tuning_.save();
      if (opts_.verbose)
        std::fprintf(stderr, "cuda: program %s prepared (tuning cache %s: %d hits, %d timed)\n",
                     name.c_str(), tuning_.path().c_str(), tuning_.hits(), tuning_.misses());
    }
  } else {
    // A later program's first run may have moved the workspace this graph points into.
    if (p->graphs[slot] && p->graphGeneration[slot] != workspaceGeneration())
      HGP_TRY(p->dropGraph(slot));
    if (!p->graphs[slot]) HGP_TRY(capture(*p, slot));
    HGP_CUDA_TRY(cudaGraphLaunch(p->graphs[slot], mainLane().stream));
  }
  ++p->runs;
  if (!st) return st;
  HGP_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status CudaBackend::read(int tensor, void* dst) {
  const PlanTensor& t = plan_->tensors[size_t(tensor)];
  const void* src =
      staging_.isInput(tensor) ? staging_.deviceInput(tensor, inputSlot_) : address(tensor);
  HGP_TRY(copyTensorAsync(t, dst, src, cudaMemcpyDeviceToHost, mainLane().stream));
  HGP_TRY_CTX(sync(), "reading '" + t.name + "'");
  return Status::ok();
}

Status CudaBackend::write(int tensor, const void* src) {
  const PlanTensor& t = plan_->tensors[size_t(tensor)];
  if (staging_.isInput(tensor))
    return staging_.write(tensor, src, size_t(t.bytes()), inputSlot_ = slot_, mainLane().stream);
  HGP_TRY(copyTensorAsync(t, address(tensor), src, cudaMemcpyHostToDevice, mainLane().stream));
  return sync();
}

Status CudaBackend::prefetch(int tensor, const void* src) {
  if (!staging_.isInput(tensor))
    return Status(ErrorCode::Internal, "prefetch of '" + plan_->tensors[size_t(tensor)].name +
                                           "', which is not an input");
  return staging_.prefetch(tensor, src, size_t(plan_->tensors[size_t(tensor)].bytes()),
                           (slot_ + 1) % kSlots);
}

int64_t CudaBackend::deviceMemoryBytes() const {
  if (!plan_) return 0;
  int64_t bytes = plan_->persistentBytes + plan_->transientBytes + int64_t(staging_.spareBytes());
  for (const auto& l : lanes_) bytes += int64_t(l->deviceBytes());
  return bytes;
}

uint64_t CudaBackend::workspaceGeneration() const {
  uint64_t g = 0;
  for (const auto& l : lanes_) g += l->ctx.workspaceGeneration;
  return g;
}

void CudaBackend::setCapturing(bool on) {
  for (auto& l : lanes_) l->ctx.capturing = on;
}

Status CudaBackend::sync(bool device) {
  cudaError_t e = device ? cudaDeviceSynchronize() : cudaStreamSynchronize(mainLane().stream);
  if (e != cudaSuccess)
    return Status(ErrorCode::Device, std::string("the GPU reported an error while running the "
                                                 "plan: ") +
                                         cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  return Status::ok();
}

uint8_t* CudaBackend::address(int i) const {
  const PlanTensor& t = plan_->tensors[size_t(i)];
  void* region = t.storage == StorageClass::Persistent ? persistent_.get() : transient_.get();
  return static_cast<uint8_t*>(region) + t.offset;
}

Status CudaBackend::initialize(const Plan& plan, const InitData& data) {
  std::vector<uint8_t> host;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    HGP_TRY(initialBytes(plan.tensors[i], data, host));
    if (host.empty()) continue;
    // On the main stream, after the memset that zeroed the region: that stream does not
    // synchronize with the legacy default stream, so a plain cudaMemcpy could land before the
    // memset (it did, on a GPU busy with other processes: every initial weight read as zero).
    // A pageable source is staged before the call returns, so `host` may be reused at once.
    HGP_CUDA_TRY(cudaMemcpyAsync(address(int(i)), host.data(), host.size(), cudaMemcpyHostToDevice,
                                 mainLane().stream));
  }
  return Status::ok();
}

Expected<Program*> CudaBackend::program(const std::string& name) {
  auto it = programs_.find(name);
  if (it != programs_.end()) return &it->second;
  const PlanProgram* src = plan_ ? plan_->findProgram(name) : nullptr;
  if (!src) return Status(ErrorCode::Internal, "the plan has no program '" + name + "'");
  Program& p = programs_[name];
  HGP_TRY(buildProgram(p, *plan_, *src, lanes_.size()));
  return &p;
}

CudaArgs CudaBackend::argsFor(const PlanStep& s, std::unique_ptr<StepState>& state) {
  CudaContext& c = lane(s.stream);
  CudaArgs a{s, {}, {}, c, c.stream, state};
  for (int i : s.inputs) a.in.push_back(views_[size_t(i)]);
  for (int o : s.outputs) a.out.push_back(views_[size_t(o)]);
  return a;
}

Status CudaBackend::enqueue(Program& p, int slot, std::vector<cudaEvent_t>* marks, bool serialize) {
  cudaStream_t mainStream = mainLane().stream;
  if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[0], mainStream));
  // This run computes on slot `slot`'s device inputs; the forked copy stream moves the
  // prefetched next batch (staging of the other slot) meanwhile.
  for (int t : p.inputs) views_[size_t(t)].data = staging_.deviceInput(t, slot);
  HGP_TRY(
      staging_.forkCopies(*plan_, p.inputs, (slot + 1) % kSlots, mainStream, mainLane().capturing));
  for (size_t k = 1; k < p.usesLane.size(); ++k)
    if (p.usesLane[k])
      HGP_CUDA_TRY(cudaStreamWaitEvent(lane(int(k)).stream, staging_.forkEvent(), 0));
  if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[1], mainStream));
  for (size_t i = 0; i < p.launches.size(); ++i) {
    Launch& l = p.launches[i];
    cudaStream_t stream = lane(l.lane).stream;
    if (marks) HGP_CUDA_TRY(cudaStreamWaitEvent(stream, (*marks)[i + 1], 0));
    for (int w : l.waits) HGP_CUDA_TRY(cudaStreamWaitEvent(stream, p.launches[size_t(w)].done, 0));
    if (serialize) HGP_TRY_CTX(sync(true), "before the first run of a step");
    const PlanStep& first = p.source->steps[size_t(l.steps[0])];
    std::string who = p.describeStep(l.steps[0]);
    if (profilingEager_) HGP_TRY(profiler_->pushStep(l.steps[0]));
    if (l.steps.size() == 1 && !opHas(first.op, OpFlag::Optimizer)) {
      CudaArgs a = argsFor(first, l.state(slot));
      HGP_TRY_CTX(kExec[int(first.op)](a), "step " + who);
    } else {
      std::vector<CudaArgs> group;
      // Each step needs a state slot; groups keep one shared state.
      for (int s : l.steps) group.push_back(argsFor(p.source->steps[size_t(s)], l.state(slot)));
      HGP_TRY_CTX(execOptimizerGroup(group, l.state(slot)),
                  "the optimizer update starting at " + who);
    }
    if (profilingEager_) HGP_TRY(profiler_->popStep());
    if (mainLane().capturing) noteCapturedNodes(p, l.steps[0], stream);
    if (l.done) HGP_CUDA_TRY(cudaEventRecord(l.done, stream));
    if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[i + 2], stream));
  }
  for (size_t k = 1; k < p.usesLane.size(); ++k) {
    if (!p.usesLane[k]) continue;
    Lane& l = *lanes_[k];
    HGP_CUDA_TRY(cudaEventRecord(l.joined, l.ctx.stream));
    HGP_CUDA_TRY(cudaStreamWaitEvent(mainStream, l.joined, 0));
  }
  return staging_.joinCopies(mainStream);
}

Status CudaBackend::capture(Program& p, int slot) {
  p.nodeStep.clear();
  cudaGraph_t graph = nullptr;
  {
    CaptureGuard guard(mainLane().stream, [this](bool on) { setCapturing(on); });
    HGP_TRY_CTX(guard.began(), "capturing program " + p.source->name);
    HGP_TRY_CTX(enqueue(p, slot), "capturing program " + p.source->name);
    Expected<cudaGraph_t> ended = guard.end();
    if (!ended) return ended.takeStatus().withContext("capturing program " + p.source->name);
    graph = *ended;
  }
  if (profiler_ && profiler_->running()) profiler_->noteCapturedNodes(p.nodeStep);
  HGP_TRY(instantiateGraph(p, slot, graph));
  p.graphGeneration[slot] = workspaceGeneration();
  return Status::ok();
}

} // namespace cuda

Expected<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions& options) {
  auto b = std::make_unique<cuda::CudaBackend>(options);
  HGP_TRY(b->init());
  return std::unique_ptr<Backend>(std::move(b));
}

} // namespace hgp
