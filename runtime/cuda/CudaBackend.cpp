// CudaBackend.cpp - executes a plan on one GPU, each program as one replayed CUDA graph.
//
// Memory: the persistent and transient regions of the plan are one cudaMalloc each; the memory
// plan already decided every offset, so nothing is allocated while training. Before allocating,
// the backend checks that the plan fits in the free device memory.
//
// Streams: a step runs on the plan's stream for it (PlanStep::stream). Each stream of the plan is a
// lane: a CUDA stream with its own cuDNN and cuBLAS handles, cuBLAS workspace and scratch memory,
// so steps on different lanes never share scratch. Lane 0 is the backend's main stream; the other
// lanes fork from it at the start of a run and join it at the end, and a step that waits for
// steps on other lanes (PlanStep::waits) waits for the events recorded after them. In a capture
// these become the graph's edges, so the replayed graph has exactly the plan's dependencies.
//
// Programs: the first run of a program on each slot (below) executes its steps eagerly;
// executors use it to build descriptors and, the very first time, to time algorithms
// (TuningCache). The next run on that slot captures the whole program into a CUDA graph; every
// later run replays it. Runs never synchronize with the host.
//
// Inputs: runs alternate between two slots, and every input tensor has a pinned staging buffer
// and a device buffer per slot (slot 0's is the tensor's place in the plan). A run on slot s
// computes on the device buffers of s and, on a second stream forked inside its graph, copies
// staging s^1 to device s^1: the next batch, which the runner prefetch()ed before the run, moves
// while this step computes. write() instead stages and copies at once, before the next run. An
// event recorded after each copy out of a staging buffer lets the host refill it without
// waiting for anything else. There is one graph per program and slot.
//
// --op-times: the first run after a program's graph exists is executed op by op instead, with an
// event after every launch, and each launch's time is appended to the file (the launches of a
// step run back to back, so the times are kernel times plus any gap the host leaves).
//
// --profile / --trace: the train program's first run on an already prepared slot (its third
// run) is captured afresh while CUPTI listens, replayed once and recorded (Profiler.h says how
// kernels are tied to steps); the records and the Chrome trace are written right after.
#include "runtime/Backend.h"
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/cuda/Profiler.h"
#include "runtime/profile/ChromeTrace.h"
#include "runtime/cuda/TuningCache.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>

namespace hgp {
namespace cuda {

Status execOptimizerGroup(std::vector<CudaArgs>& steps, std::unique_ptr<StepState>& state);

namespace {

constexpr int kSlots = 2;

using ExecFn = Status (*)(CudaArgs&);
constexpr ExecFn kExec[] = {
#define HGP_OP(Name, ...) &exec##Name,
#include "runtime/plan/OpList.def"
};

constexpr size_t kCublasWorkspace = size_t(32) << 20;

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

bool isOptimizer(OpKind op) { return opHas(op, OpFlag::Optimizer); }

/// Consecutive optimizer steps that can share one multi-tensor launch: same op, same attributes,
/// same scalar operands (lr, ok, step, and the loss scale with grad_scale=1).
bool groupable(const PlanStep& a, const PlanStep& b) {
  return isOptimizer(a.op) && a.op == b.op && a.attrs == b.attrs && a.inputs[2] == b.inputs[2] &&
         a.inputs[3] == b.inputs[3] && a.inputs[4] == b.inputs[4] &&
         a.inputs.size() == b.inputs.size() &&
         (!a.attrs.getInt("grad_scale", 0) || a.inputs.back() == b.inputs.back());
}

/// One unit of work: a step, or a group of optimizer steps (which share a stream). A launch that reads an input keeps a
/// state per slot, since the slots' inputs live at different addresses and executors may keep
/// device tables of their operands' addresses; every other launch shares one state.
struct Launch {
  std::vector<int> steps;
  int lane = 0;
  std::vector<int> waits; ///< Launches on other lanes whose events this one waits for.
  cudaEvent_t done = nullptr; ///< Recorded after it, when a launch on another lane waits for it.
  bool perSlot = false;
  std::unique_ptr<StepState> states[kSlots];
  std::unique_ptr<StepState>& state(int slot) { return states[perSlot ? slot : 0]; }
};

struct Program {
  const PlanProgram* source = nullptr;
  std::vector<Launch> launches;
  std::vector<int> inputs; ///< Input-role tensors (copied from staging at its start).
  int runs = 0;
  bool prepared[kSlots] = {false, false}; ///< Whether the slot's first (eager) run happened.
  bool timed = false; ///< --op-times has been written for this program.
  cudaGraphExec_t graphs[kSlots] = {nullptr, nullptr};
  uint64_t graphGeneration[kSlots] = {0, 0}; ///< The workspace generation each graph saw.
  std::map<cudaGraphNode_t, int> nodeStep; ///< For naming the step behind a failing graph node.
  std::vector<bool> usesLane;               ///< Which lanes the program's launches run on.
};

/// A stream of the plan beyond the main one, with the resources its steps use.
struct Lane {
  CudaContext ctx;
  void* cublasWorkspace = nullptr;
  cudaEvent_t joined = nullptr; ///< Recorded at the end of a run; the main stream waits for it.
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const BackendOptions& o) : opts_(o), tuning_(o.tuningCache) {}

  ~CudaBackend() override {
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    if (copyStream_) cudaStreamSynchronize(copyStream_);
    for (auto& l : lanes_)
      if (l->ctx.stream) cudaStreamSynchronize(l->ctx.stream);
    for (auto& [name, p] : programs_) {
      for (auto& g : p.graphs)
        if (g) cudaGraphExecDestroy(g);
      for (Launch& l : p.launches)
        if (l.done) cudaEventDestroy(l.done);
    }
    for (auto& l : lanes_) {
      if (l->joined) cudaEventDestroy(l->joined);
      cudaFree(l->ctx.workspace);
      cudaFree(l->cublasWorkspace);
      if (l->ctx.cublas) cublasDestroy_v2(l->ctx.cublas);
      if (l->ctx.cudnn) cudnnDestroy(l->ctx.cudnn);
      if (l->ctx.stream) cudaStreamDestroy(l->ctx.stream);
    }
    for (auto& [t, slots] : staging_)
      for (void* s : slots) cudaFreeHost(s);
    for (cudaEvent_t e : {stagingRead_[0], stagingRead_[1], fork_, join_})
      if (e) cudaEventDestroy(e);
    if (copyStream_) cudaStreamDestroy(copyStream_);
    cudaFree(inputSpare_);
    cudaFree(persistent_);
    cudaFree(transient_);
    cudaFree(ctx_.workspace);
    cudaFree(cublasWorkspace_);
    if (ctx_.cublas) cublasDestroy_v2(ctx_.cublas);
    if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }

  Status init() {
    HGP_TRY(loadCudaLibraries());
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return Status(ErrorCode::Device, std::string("no usable GPU: ") + cudaGetErrorString(e));
    }
    if (opts_.device < 0 || opts_.device >= count)
      return Status(ErrorCode::Device, "no GPU " + std::to_string(opts_.device) + " (" +
                                           std::to_string(count) + " found)");
    ctx_.device = opts_.device;
    HGP_CUDA_TRY(cudaSetDevice(ctx_.device));
    HGP_CUDA_TRY(cudaGetDeviceProperties(&ctx_.props, ctx_.device));
    HGP_CUDA_TRY(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    HGP_CUDNN_TRY(cudnnCreate(&ctx_.cudnn));
    HGP_CUDNN_TRY(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    HGP_CUBLAS_TRY(cublasCreate_v2(&ctx_.cublas));
    HGP_CUBLAS_TRY(cublasSetStream_v2(ctx_.cublas, ctx_.stream));
    HGP_CUDA_TRY(cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking));
    for (cudaEvent_t* ev : {&stagingRead_[0], &stagingRead_[1], &fork_, &join_})
      HGP_CUDA_TRY(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
    if (!opts_.profile.empty() || !opts_.trace.empty()) {
      HGP_ASSIGN_OR_RETURN(profiler_, ActivityProfiler::open());
      profile_ = ProfileState::Pending;
    }
    ctx_.deterministic = opts_.deterministic;
    ctx_.verbose = opts_.verbose;
    ctx_.cudnnFusion = opts_.cudnnFusion;
    ctx_.tuning = &tuning_;
    if (opts_.ranks > 1) {
      if (!opts_.shareUniqueId) return Status(ErrorCode::Internal, "no rendezvous for the NCCL id");
      HGP_ASSIGN_OR_RETURN(comm_, Communicator::create(opts_.rank, opts_.ranks, opts_.shareUniqueId));
      ctx_.comm = comm_.get();
    }
    return Status::ok();
  }

  Status collectiveError() override { return comm_ ? comm_->asyncError() : Status::ok(); }
  void abortCollectives() override {
    if (comm_) comm_->abort();
  }

  const char* name() const override { return "cuda"; }

  Status load(const Plan& plan, const InitData& data) override {
    HGP_TRY(checkHalfSupport(plan));
    // The generated kernels first: a plan compiled for another GPU fails here, before anything
    // is allocated.
    fusedKernels_ = std::make_unique<FusedKernels>();
    HGP_TRY(fusedKernels_->load(plan, ctx_.props));
    ctx_.kernels = fusedKernels_.get();
    for (auto& l : lanes_) l->ctx.kernels = ctx_.kernels;
    plan_ = &plan;
    ctx_.allowTf32 = plan.meta.getString("precision", "tf32") != "fp32";
    size_t freeBytes = 0, totalBytes = 0;
    HGP_CUDA_TRY(cudaMemGetInfo(&freeBytes, &totalBytes));
    size_t need = size_t(plan.persistentBytes + plan.transientBytes) + kCublasWorkspace;
    if (need + (size_t(64) << 20) > freeBytes)
      return makeError(ErrorCode::OutOfMemory,
                       "the plan needs %.1f MiB on %s (%.1f MiB of weights and state, %.1f MiB of "
                       "activations and gradients) but only %.1f MiB are free; compile with a "
                       "smaller --batch",
                       double(need) / (1 << 20), ctx_.props.name,
                       double(plan.persistentBytes) / (1 << 20),
                       double(plan.transientBytes) / (1 << 20), double(freeBytes) / (1 << 20));
    // Leave room for scratch: at most a quarter of what remains, within [64 MiB, 1 GiB].
    ctx_.workspaceLimit = std::clamp((freeBytes - need) / 4, size_t(64) << 20, size_t(1) << 30);
    HGP_CUDA_TRY(cudaMalloc(&persistent_, std::max<size_t>(64, size_t(plan.persistentBytes))));
    HGP_CUDA_TRY(cudaMalloc(&transient_, std::max<size_t>(64, size_t(plan.transientBytes))));
    HGP_CUDA_TRY(cudaMalloc(&cublasWorkspace_, kCublasWorkspace));
    HGP_CUBLAS_TRY(cublasSetWorkspace_v2(ctx_.cublas, cublasWorkspace_, kCublasWorkspace));
    HGP_CUDA_TRY(cudaMemsetAsync(persistent_, 0, size_t(plan.persistentBytes), ctx_.stream));
    HGP_TRY(initialize(plan, data));
    int streams = 1;
    for (const PlanProgram& p : plan.programs)
      for (const PlanStep& s : p.steps) streams = std::max(streams, s.stream + 1);
    while (int(lanes_.size()) + 1 < streams) HGP_TRY(addLane());
    views_.clear();
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      views_.push_back({plan.tensors[i].type.dtype, &plan.tensors[i].type.shape, address(int(i))});
    size_t spare = 0;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      if (plan.tensors[i].role != TensorRole::Input) continue;
      auto& slots = staging_[int(i)];
      for (int s = 0; s < kSlots; ++s)
        HGP_CUDA_TRY(cudaHostAlloc(&slots[size_t(s)], size_t(plan.tensors[i].bytes()),
                                   cudaHostAllocDefault));
      spare += (size_t(plan.tensors[i].bytes()) + 255) / 256 * 256;
    }
    // Slot 1's device copy of every input, after slot 0's in the plan.
    HGP_CUDA_TRY(cudaMalloc(&inputSpare_, std::max<size_t>(spare, 256)));
    inputSpareBytes_ = spare;
    spare = 0;
    for (auto& [t, slots] : staging_) {
      deviceIn_[t] = {address(t), static_cast<uint8_t*>(inputSpare_) + spare};
      spare += (size_t(plan.tensors[size_t(t)].bytes()) + 255) / 256 * 256;
    }
    HGP_CUDA_TRY(cudaStreamSynchronize(ctx_.stream));
    return Status::ok();
  }

  Status run(const std::string& name) override {
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
      st = enqueue(*p, slot, nullptr, p->runs == 0 && !lanes_.empty());
      p->prepared[slot] = true;
      if (st && p->runs == 0) {
        tuning_.save();
        if (opts_.verbose)
          std::fprintf(stderr, "cuda: program %s prepared (tuning cache %s: %d hits, %d timed)\n",
                       name.c_str(), tuning_.path().c_str(), tuning_.hits(), tuning_.misses());
      }
    } else {
      // A later program's first run may have moved the workspace this graph points into.
      if (p->graphs[slot] && p->graphGeneration[slot] != workspaceGeneration()) {
        HGP_CUDA_TRY(cudaGraphExecDestroy(p->graphs[slot]));
        p->graphs[slot] = nullptr;
      }
      if (!p->graphs[slot]) HGP_TRY(capture(*p, slot));
      HGP_CUDA_TRY(cudaGraphLaunch(p->graphs[slot], ctx_.stream));
    }
    ++p->runs;
    if (!st) return st;
    HGP_CUDA_TRY(cudaGetLastError());
    return Status::ok();
  }

  Status read(int tensor, void* dst) override {
    const PlanTensor& t = plan_->tensors[size_t(tensor)];
    auto in = deviceIn_.find(tensor);
    const void* src = in != deviceIn_.end() ? in->second[size_t(inputSlot_)] : address(tensor);
    HGP_CUDA_TRY(cudaMemcpyAsync(dst, src, size_t(t.bytes()), cudaMemcpyDeviceToHost,
                                 ctx_.stream));
    HGP_TRY_CTX(sync(), "reading '" + t.name + "'");
    return Status::ok();
  }

  Status write(int tensor, const void* src) override {
    const PlanTensor& t = plan_->tensors[size_t(tensor)];
    auto it = staging_.find(tensor);
    if (it != staging_.end()) {
      // Wait until the last copy out of this staging buffer is done, then stage and copy.
      size_t s = size_t(inputSlot_ = slot_);
      HGP_CUDA_TRY(cudaEventSynchronize(stagingRead_[s]));
      copyToStaging(it->second[s], src, size_t(t.bytes()));
      HGP_CUDA_TRY(cudaMemcpyAsync(deviceIn_.at(tensor)[s], it->second[s], size_t(t.bytes()),
                                   cudaMemcpyHostToDevice, ctx_.stream));
      HGP_CUDA_TRY(cudaEventRecord(stagingRead_[s], ctx_.stream));
      return Status::ok();
    }
    HGP_CUDA_TRY(cudaMemcpyAsync(address(tensor), src, size_t(t.bytes()), cudaMemcpyHostToDevice,
                                 ctx_.stream));
    return sync();
  }

  bool supportsPrefetch() const override { return true; }

  Status prefetch(int tensor, const void* src) override {
    auto it = staging_.find(tensor);
    if (it == staging_.end())
      return Status(ErrorCode::Internal, "prefetch of '" + plan_->tensors[size_t(tensor)].name +
                                             "', which is not an input");
    size_t s = size_t((slot_ + 1) % kSlots);
    HGP_CUDA_TRY(cudaEventSynchronize(stagingRead_[s]));
    copyToStaging(it->second[s], src, size_t(plan_->tensors[size_t(tensor)].bytes()));
    return Status::ok();
  }

  int64_t deviceMemoryBytes() const override {
    if (!plan_) return 0;
    int64_t bytes = plan_->persistentBytes + plan_->transientBytes + int64_t(ctx_.workspaceBytes) +
                    int64_t(kCublasWorkspace) + int64_t(inputSpareBytes_);
    for (const auto& l : lanes_) bytes += int64_t(l->ctx.workspaceBytes + kCublasWorkspace);
    return bytes;
  }

private:
  /// Adds lane lanes_.size() + 1, with the main lane's settings.
  Status addLane() {
    auto l = std::make_unique<Lane>();
    CudaContext& c = l->ctx;
    c.device = ctx_.device;
    c.props = ctx_.props;
    c.comm = ctx_.comm;
    c.deterministic = ctx_.deterministic;
    c.verbose = ctx_.verbose;
    c.cudnnFusion = ctx_.cudnnFusion;
    c.allowTf32 = ctx_.allowTf32;
    c.workspaceLimit = ctx_.workspaceLimit;
    c.tuning = ctx_.tuning;
    c.kernels = ctx_.kernels;
    Lane& lane = *lanes_.emplace_back(std::move(l));
    HGP_CUDA_TRY(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    HGP_CUDNN_TRY(cudnnCreate(&c.cudnn));
    HGP_CUDNN_TRY(cudnnSetStream(c.cudnn, c.stream));
    HGP_CUBLAS_TRY(cublasCreate_v2(&c.cublas));
    HGP_CUBLAS_TRY(cublasSetStream_v2(c.cublas, c.stream));
    HGP_CUDA_TRY(cudaMalloc(&lane.cublasWorkspace, kCublasWorkspace));
    HGP_CUBLAS_TRY(cublasSetWorkspace_v2(c.cublas, lane.cublasWorkspace, kCublasWorkspace));
    HGP_CUDA_TRY(cudaEventCreateWithFlags(&lane.joined, cudaEventDisableTiming));
    return Status::ok();
  }

  CudaContext& lane(int k) { return k == 0 ? ctx_ : lanes_[size_t(k - 1)]->ctx; }

  /// Changes whenever any lane's scratch memory moves (a graph captured before points at freed
  /// memory then).
  uint64_t workspaceGeneration() const {
    uint64_t g = ctx_.workspaceGeneration;
    for (const auto& l : lanes_) g += l->ctx.workspaceGeneration;
    return g;
  }

  void setCapturing(bool on) {
    ctx_.capturing = on;
    for (auto& l : lanes_) l->ctx.capturing = on;
  }

  /// Host-to-pinned copy; several threads for large batches, where one thread's memcpy (about
  /// 10 GB/s) would take longer than a GPU step.
  void copyToStaging(void* dst, const void* src, size_t bytes) {
    constexpr size_t kChunk = size_t(4) << 20;
    if (bytes < 2 * kChunk) {
      std::memcpy(dst, src, bytes);
      return;
    }
    if (!copyPool_) copyPool_ = std::make_unique<ThreadPool>(4);
    copyPool_->parallelFor(int64_t((bytes + kChunk - 1) / kChunk), 1, [&](int64_t b, int64_t e) {
      size_t from = size_t(b) * kChunk, to = std::min(bytes, size_t(e) * kChunk);
      std::memcpy(static_cast<uint8_t*>(dst) + from, static_cast<const uint8_t*>(src) + from, to - from);
    });
  }

  /// Waits for the main stream, or with `device` for everything on the GPU.
  Status sync(bool device = false) {
    cudaError_t e = device ? cudaDeviceSynchronize() : cudaStreamSynchronize(ctx_.stream);
    if (e != cudaSuccess)
      return Status(ErrorCode::Device, std::string("the GPU reported an error while running the "
                                                   "plan: ") + cudaGetErrorName(e) + " (" +
                                           cudaGetErrorString(e) + ")");
    return Status::ok();
  }

  uint8_t* address(int i) const {
    const PlanTensor& t = plan_->tensors[size_t(i)];
    return static_cast<uint8_t*>(t.storage == StorageClass::Persistent ? persistent_ : transient_) +
           t.offset;
  }

  Status initialize(const Plan& plan, const InitData& data) {
    std::vector<uint8_t> host;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& t = plan.tensors[i];
      host.clear();
      switch (t.init) {
      case InitKind::None:
      case InitKind::Zero: continue;
      case InitKind::Fill: {
        host.resize(size_t(t.bytes()));
        for (int64_t e = 0; e < t.type.numElements(); ++e) {
          if (t.type.dtype == DType::F32) {
            float v = float(t.fillValue);
            std::memcpy(host.data() + 4 * e, &v, 4);
          } else if (t.type.dtype == DType::I64) {
            int64_t v = int64_t(t.fillValue);
            std::memcpy(host.data() + 8 * e, &v, 8);
          } else {
            return Status(ErrorCode::Internal, "fill of '" + t.name + "' is not supported");
          }
        }
        break;
      }
      case InitKind::Data:
      case InitKind::File: {
        auto src = t.init == InitKind::Data ? data.data : data.file;
        if (t.dataOffset < 0 || size_t(t.dataOffset) + size_t(t.bytes()) > src.size())
          return Status(ErrorCode::InvalidModel,
                        "initial value of '" + t.name + "' lies outside the bundled data");
        host.assign(src.begin() + t.dataOffset, src.begin() + t.dataOffset + t.bytes());
        break;
      }
      }
      // On the main stream, after the memset that zeroed the region: that stream does not
      // synchronize with the legacy default stream, so a plain cudaMemcpy could land before the
      // memset (it did, on a GPU busy with other processes: every initial weight read as zero).
      // A pageable source is staged before the call returns, so `host` may be reused at once.
      HGP_CUDA_TRY(cudaMemcpyAsync(address(int(i)), host.data(), host.size(),
                                   cudaMemcpyHostToDevice, ctx_.stream));
    }
    return Status::ok();
  }

  Expected<Program*> program(const std::string& name) {
    auto it = programs_.find(name);
    if (it != programs_.end()) return &it->second;
    const PlanProgram* src = plan_ ? plan_->findProgram(name) : nullptr;
    if (!src) return Status(ErrorCode::Internal, "the plan has no program '" + name + "'");
    Program& p = programs_[name];
    p.source = src;
    // Every input is copied in, also one that only a binding reads (a graph that returns its
    // input unchanged).
    for (size_t t = 0; t < plan_->tensors.size(); ++t)
      if (plan_->tensors[t].role == TensorRole::Input) p.inputs.push_back(int(t));
    std::vector<int> launchOf(src->steps.size());
    p.usesLane.assign(lanes_.size() + 1, false);
    for (size_t i = 0; i < src->steps.size(); ++i) {
      const PlanStep& s = src->steps[i];
      const PlanStep* prev =
          p.launches.empty() ? nullptr : &src->steps[size_t(p.launches.back().steps.back())];
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
      for (int t : s.inputs)
        l.perSlot |= plan_->tensors[size_t(t)].role == TensorRole::Input;
    }
    for (Launch& l : p.launches) {
      std::sort(l.waits.begin(), l.waits.end());
      l.waits.erase(std::unique(l.waits.begin(), l.waits.end()), l.waits.end());
      for (int w : l.waits) {
        Launch& from = p.launches[size_t(w)];
        if (!from.done) HGP_CUDA_TRY(cudaEventCreateWithFlags(&from.done, cudaEventDisableTiming));
      }
    }
    return &p;
  }

  CudaArgs argsFor(const PlanStep& s, std::unique_ptr<StepState>& state) {
    CudaContext& c = lane(s.stream);
    CudaArgs a{s, {}, {}, c, c.stream, state};
    for (int i : s.inputs) a.in.push_back(views_[size_t(i)]);
    for (int o : s.outputs) a.out.push_back(views_[size_t(o)]);
    return a;
  }

  /// Runs the program op by op with an event around every launch and appends the times to
  /// opts_.opTimes.
  Status timeLaunches(Program& p, int slot) {
    p.timed = true;
    std::vector<cudaEvent_t> marks(p.launches.size() + 2, nullptr);
    Status st;
    for (auto& e : marks) {
      cudaError_t r = st ? cudaEventCreate(&e) : cudaSuccess;
      if (r != cudaSuccess) st = cudaError(r, "cudaEventCreate(&e)", __FILE__, __LINE__);
    }
    if (st) st = enqueue(p, slot, &marks);
    if (st) st = sync();
    FILE* f = st ? std::fopen(opts_.opTimes.c_str(), "a") : nullptr;
    if (st && !f) st = Status(ErrorCode::Io, "cannot write --op-times file " + opts_.opTimes);
    for (size_t i = 0; f && i + 1 < marks.size(); ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, marks[i], marks[i + 1]) != cudaSuccess) break;
      const PlanStep& s = i == 0 ? p.source->steps[0] : p.source->steps[size_t(p.launches[i - 1].steps[0])];
      std::fprintf(f, "%s\t%zu\t%s\t%s\t%.4f\n", p.source->name.c_str(), i,
                   i == 0 ? "InputCopy" : opName(s.op), i == 0 ? "" : s.loc.c_str(), double(ms));
    }
    if (f) std::fclose(f);
    for (auto& e : marks)
      if (e) cudaEventDestroy(e);
    return st;
  }

  /// Enqueues the program: the staged input copies, then every launch on its lane. With
  /// `marks`, records marks[0] first, marks[1] after the copies and marks[i + 2] after launch i,
  /// and runs the launches one after another whatever their lanes, so that the marks time them.
  /// With `serialize` the host waits for the device before every launch, so that algorithms
  /// timed by the first run do not share the GPU with other lanes' work.
  Status enqueue(Program& p, int slot, std::vector<cudaEvent_t>* marks = nullptr,
                 bool serialize = false) {
    if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[0], ctx_.stream));
    // This run computes on slot `slot`'s device inputs; the forked copy stream moves the
    // prefetched next batch (staging of the other slot) meanwhile.
    size_t next = size_t((slot + 1) % kSlots);
    for (int t : p.inputs) views_[size_t(t)].data = deviceIn_.at(t)[size_t(slot)];
    HGP_CUDA_TRY(cudaEventRecord(fork_, ctx_.stream));
    HGP_CUDA_TRY(cudaStreamWaitEvent(copyStream_, fork_, 0));
    for (int t : p.inputs)
      HGP_CUDA_TRY(cudaMemcpyAsync(deviceIn_.at(t)[next], staging_.at(t)[next],
                                   size_t(plan_->tensors[size_t(t)].bytes()),
                                   cudaMemcpyHostToDevice, copyStream_));
    HGP_CUDA_TRY(cudaEventRecordWithFlags(stagingRead_[next], copyStream_,
                                          ctx_.capturing ? cudaEventRecordExternal : 0));
    HGP_CUDA_TRY(cudaEventRecord(join_, copyStream_));
    for (size_t k = 1; k < p.usesLane.size(); ++k)
      if (p.usesLane[k]) HGP_CUDA_TRY(cudaStreamWaitEvent(lane(int(k)).stream, fork_, 0));
    if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[1], ctx_.stream));
    for (size_t i = 0; i < p.launches.size(); ++i) {
      Launch& l = p.launches[i];
      cudaStream_t stream = lane(l.lane).stream;
      if (marks) HGP_CUDA_TRY(cudaStreamWaitEvent(stream, (*marks)[i + 1], 0));
      for (int w : l.waits) HGP_CUDA_TRY(cudaStreamWaitEvent(stream, p.launches[size_t(w)].done, 0));
      if (serialize) HGP_TRY_CTX(sync(true), "before the first run of a step");
      const PlanStep& first = p.source->steps[size_t(l.steps[0])];
      std::string who = std::string(opName(first.op)) + " '" + first.loc + "'";
      if (profilingEager_) HGP_TRY(profiler_->pushStep(l.steps[0]));
      if (l.steps.size() == 1 && !isOptimizer(first.op)) {
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
      if (ctx_.capturing) noteCapturedNodes(p, l.steps[0], stream);
      if (l.done) HGP_CUDA_TRY(cudaEventRecord(l.done, stream));
      if (marks) HGP_CUDA_TRY(cudaEventRecord((*marks)[i + 2], stream));
    }
    for (size_t k = 1; k < p.usesLane.size(); ++k) {
      if (!p.usesLane[k]) continue;
      Lane& l = *lanes_[k - 1];
      HGP_CUDA_TRY(cudaEventRecord(l.joined, l.ctx.stream));
      HGP_CUDA_TRY(cudaStreamWaitEvent(ctx_.stream, l.joined, 0));
    }
    HGP_CUDA_TRY(cudaStreamWaitEvent(ctx_.stream, join_, 0));
    return Status::ok();
  }

  /// Called after `step` was enqueued on `stream`: the stream's capture leaves and all their
  /// ancestors that no earlier step owns are this step's nodes. (Owned sets are closed under
  /// ancestry, so the walk stops at the first owned node.)
  void noteCapturedNodes(Program& p, int step, cudaStream_t stream) {
    // Edge data must be asked for: cuDNN's kernels may be joined by programmatic (PDL) edges, and
    // a query without it fails as lossy and leaves an error behind for the next launch to find.
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


  /// Runs the program once while CUPTI records it (a fresh capture and one replay, or op by op
  /// with a correlation id per step), then writes --profile and --trace.
  Status profileRun(Program& p, int slot, bool eager) {
    if (Status st = profiler_->start(eager); !st) {
      (void)profiler_->stop();
      return std::move(st).withContext("starting CUPTI for --profile/--trace");
    }
    auto body = [&]() -> Status {
      if (eager) {
        profilingEager_ = true;
        Status st = enqueue(p, slot);
        profilingEager_ = false;
        return st;
      }
      if (p.graphs[slot]) {
        HGP_CUDA_TRY(cudaGraphExecDestroy(p.graphs[slot]));
        p.graphs[slot] = nullptr;
      }
      HGP_TRY(capture(p, slot));
      // Upload before the recorded launch, so that it is a replay like every later one.
      HGP_CUDA_TRY(cudaGraphUpload(p.graphs[slot], ctx_.stream));
      HGP_CUDA_TRY(cudaGraphLaunch(p.graphs[slot], ctx_.stream));
      return Status::ok();
    };
    Status st = body();
    if (st) st = sync();
    auto raw = profiler_->stop();
    HGP_TRY(std::move(st).withContext("profiling program " + p.source->name));
    HGP_TRY(raw.status());
    if (!eager && profiler_->unmappedKernels()) {
      std::fprintf(stderr, "cuda: --profile: the replayed graph's kernels could not be tied to plan "
                           "steps; profiling the next run of %s op by op instead\n",
                   p.source->name.c_str());
      profile_ = ProfileState::EagerPending;
      return Status::ok();
    }
    profile_ = ProfileState::Done;
    std::vector<int> launchSteps(p.source->steps.size(), 0);
    for (const Launch& l : p.launches) launchSteps[size_t(l.steps[0])] = int(l.steps.size());
    ProfileRecords records = toRecords(*raw, *plan_, *p.source, launchSteps, ctx_.props.name,
                                       ctx_.props.multiProcessorCount, eager ? "eager" : "graph");
    if (!opts_.profile.empty()) {
      FILE* f = std::fopen(opts_.profile.c_str(), "w");
      std::string text = printRecords(records);
      bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
      if (f) ok = std::fclose(f) == 0 && ok;
      if (!ok) return Status(ErrorCode::Io, "cannot write the --profile file " + opts_.profile);
    }
    if (!opts_.trace.empty())
      HGP_TRY(writeChromeTraceFile(records, plan_, p.source->name, opts_.trace));
    std::fprintf(stderr, "cuda: profiled one run of %s (%s mapping): %zu records over %.3f ms%s%s%s%s\n",
                 p.source->name.c_str(), records.mapping.c_str(), records.records.size(),
                 records.programs[0].spanUs / 1e3, opts_.profile.empty() ? "" : "; records in ",
                 opts_.profile.c_str(), opts_.trace.empty() ? "" : "; trace in ", opts_.trace.c_str());
    return Status::ok();
  }

  Status capture(Program& p, int slot) {
    p.nodeStep.clear();
    HGP_CUDA_TRY(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    setCapturing(true);
    Status st = enqueue(p, slot);
    setCapturing(false);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(ctx_.stream, &graph);
    if (!st) {
      if (graph) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      return std::move(st).withContext("capturing program " + p.source->name);
    }
    if (e != cudaSuccess)
      return Status(ErrorCode::Device, "capturing program " + p.source->name + " failed: " +
                                           cudaGetErrorString(e));
    if (profiler_ && profiler_->running()) profiler_->noteCapturedNodes(p.nodeStep);
    cudaGraphInstantiateParams params{};
    e = cudaGraphInstantiateWithParams(&p.graphs[slot], graph, &params);
    if (e != cudaSuccess) {
      std::string who = "an unknown node";
      auto it = p.nodeStep.find(params.errNode_out);
      if (it != p.nodeStep.end()) {
        const PlanStep& s = p.source->steps[size_t(it->second)];
        who = std::string(opName(s.op)) + " '" + s.loc + "'";
      }
      cudaGraphDestroy(graph);
      return Status(ErrorCode::Device, "instantiating the CUDA graph of program " +
                                           p.source->name + " failed at " + who + ": " +
                                           cudaGetErrorString(e));
    }
    HGP_CUDA_TRY(cudaGraphDestroy(graph));
    p.graphGeneration[slot] = workspaceGeneration();
    return Status::ok();
  }

  BackendOptions opts_;
  TuningCache tuning_;
  CudaContext ctx_; ///< Lane 0: the main stream and its handles.
  std::vector<std::unique_ptr<Lane>> lanes_; ///< Lanes 1, 2, ...: the plan's other streams.
  const Plan* plan_ = nullptr;
  std::unique_ptr<FusedKernels> fusedKernels_; ///< The plan's generated kernels (FusedOps.cpp).
  void *persistent_ = nullptr, *transient_ = nullptr, *cublasWorkspace_ = nullptr;
  std::vector<DeviceTensor> views_;
  std::map<int, std::array<void*, kSlots>> staging_;
  std::map<int, std::array<uint8_t*, kSlots>> deviceIn_; ///< Each input's device buffer per slot.
  void* inputSpare_ = nullptr;                          ///< Slot 1's device inputs.
  size_t inputSpareBytes_ = 0;
  cudaStream_t copyStream_ = nullptr;                   ///< Forked inside every run for the copies.
  /// Recorded after the last copy out of each staging buffer; fork_/join_ bracket the copy stream.
  cudaEvent_t stagingRead_[kSlots] = {nullptr, nullptr}, fork_ = nullptr, join_ = nullptr;
  int slot_ = 0;      ///< The slot of the next run.
  int inputSlot_ = 0; ///< The slot whose device inputs were last written or run on (for read()).
  std::map<std::string, Program> programs_;
  std::unique_ptr<ThreadPool> copyPool_;
  /// --profile / --trace: Pending until the train program's profiled run; EagerPending when the
  /// graph mapping failed and the next run is profiled op by op.
  enum class ProfileState { Off, Pending, EagerPending, Done } profile_ = ProfileState::Off;
  std::unique_ptr<ActivityProfiler> profiler_;
  bool profilingEager_ = false; ///< enqueue() brackets each launch with a step correlation id.
  std::unique_ptr<Communicator> comm_; ///< Data parallelism; null with one rank.
};

} // namespace
} // namespace cuda

Expected<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions& options) {
  auto b = std::make_unique<cuda::CudaBackend>(options);
  HGP_TRY(b->init());
  return std::unique_ptr<Backend>(std::move(b));
}

} // namespace hgp
