// CudaBackend.cpp - executes a plan on one GPU, each program as one replayed CUDA graph.
//
// Memory: the persistent and transient regions of the plan are one cudaMalloc each; the memory
// plan already decided every offset, so nothing is allocated while training. Before allocating,
// the backend checks that the plan fits in the free device memory.
//
// Programs: the first run of a program executes its steps eagerly; executors use that run to
// build descriptors and time algorithms (TuningCache). The second run captures the whole
// program into a CUDA graph; every later run replays it. Runs never synchronize with the host.
//
// Inputs: the runner's write() of an input tensor goes to one of two pinned staging buffers;
// the program (and its graph) starts with the host-to-device copies from that slot, then records
// an event. The next write() into the same slot waits only for that event, so the host prepares
// batch k+1 while the GPU runs step k. There is one graph per program and slot.
#include "runtime/Backend.h"
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/TuningCache.h"
#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>

namespace hgp {
namespace cuda {

Status execOptimizerGroup(std::vector<CudaArgs>& steps, std::unique_ptr<StepState>& state);

namespace {

using ExecFn = Status (*)(CudaArgs&);
constexpr ExecFn kExec[] = {
#define HGP_OP(Name, ...) &exec##Name,
#include "runtime/plan/OpList.def"
};

constexpr int kSlots = 2;
constexpr size_t kCublasWorkspace = size_t(32) << 20;

bool isOptimizer(OpKind op) { return op == OpKind::SgdUpdate || op == OpKind::AdamUpdate; }

/// Consecutive optimizer steps that can share one multi-tensor launch: same op, same attributes,
/// same scalar operands (lr, ok, step).
bool groupable(const PlanStep& a, const PlanStep& b) {
  return isOptimizer(a.op) && a.op == b.op && a.attrs == b.attrs && a.inputs[2] == b.inputs[2] &&
         a.inputs[3] == b.inputs[3] && a.inputs[4] == b.inputs[4] &&
         a.inputs.size() == b.inputs.size();
}

/// One unit of work: a step, or a group of optimizer steps.
struct Launch {
  std::vector<int> steps;
  std::unique_ptr<StepState> state;
};

struct Program {
  const PlanProgram* source = nullptr;
  std::vector<Launch> launches;
  std::vector<int> inputs; ///< Input-role tensors (copied from staging at its start).
  int runs = 0;
  cudaGraphExec_t graphs[kSlots] = {nullptr, nullptr};
  uint64_t graphGeneration[kSlots] = {0, 0}; ///< The workspace generation each graph saw.
  std::map<cudaGraphNode_t, int> nodeStep; ///< For naming the step behind a failing graph node.
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const BackendOptions& o) : opts_(o), tuning_(o.tuningCache) {}

  ~CudaBackend() override {
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    for (auto& [name, p] : programs_)
      for (auto& g : p.graphs)
        if (g) cudaGraphExecDestroy(g);
    for (auto& [t, slots] : staging_)
      for (void* s : slots) cudaFreeHost(s);
    for (auto& e : copied_)
      if (e) cudaEventDestroy(e);
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
    for (auto& ev : copied_) HGP_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ctx_.deterministic = opts_.deterministic;
    ctx_.tuning = &tuning_;
    return Status::ok();
  }

  const char* name() const override { return "cuda"; }

  Status load(const Plan& plan, const InitData& data) override {
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
    views_.clear();
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      views_.push_back({plan.tensors[i].type.dtype, &plan.tensors[i].type.shape, address(int(i))});
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      if (plan.tensors[i].role != TensorRole::Input) continue;
      auto& slots = staging_[int(i)];
      for (int s = 0; s < kSlots; ++s)
        HGP_CUDA_TRY(cudaHostAlloc(&slots[size_t(s)], size_t(plan.tensors[i].bytes()),
                                   cudaHostAllocDefault));
    }
    HGP_CUDA_TRY(cudaStreamSynchronize(ctx_.stream));
    return Status::ok();
  }

  Status run(const std::string& name) override {
    HGP_ASSIGN_OR_RETURN(Program * p, program(name));
    int slot = slot_;
    slot_ = (slot_ + 1) % kSlots;
    Status st;
    if (opts_.eager || p->runs == 0) {
      st = enqueue(*p, slot);
      // The eager run is where executors time algorithms and size the workspace.
      if (st && p->runs == 0) {
        tuning_.save();
        if (opts_.verbose)
          std::fprintf(stderr, "cuda: program %s prepared (tuning cache %s: %d hits, %d timed)\n",
                       name.c_str(), tuning_.path().c_str(), tuning_.hits(), tuning_.misses());
      }
    } else {
      // A later program's first run may have moved the workspace this graph points into.
      if (p->graphs[slot] && p->graphGeneration[slot] != ctx_.workspaceGeneration) {
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
    HGP_CUDA_TRY(cudaMemcpyAsync(dst, address(tensor), size_t(t.bytes()), cudaMemcpyDeviceToHost,
                                 ctx_.stream));
    HGP_TRY_CTX(sync(), "reading '" + t.name + "'");
    return Status::ok();
  }

  Status write(int tensor, const void* src) override {
    const PlanTensor& t = plan_->tensors[size_t(tensor)];
    auto it = staging_.find(tensor);
    if (it != staging_.end()) {
      // Wait until the step that last read this slot has copied it to the device.
      HGP_CUDA_TRY(cudaEventSynchronize(copied_[size_t(slot_)]));
      copyToStaging(it->second[size_t(slot_)], src, size_t(t.bytes()));
      return Status::ok();
    }
    HGP_CUDA_TRY(cudaMemcpyAsync(address(tensor), src, size_t(t.bytes()), cudaMemcpyHostToDevice,
                                 ctx_.stream));
    return sync();
  }

  int64_t deviceMemoryBytes() const override {
    return plan_ ? plan_->persistentBytes + plan_->transientBytes + int64_t(ctx_.workspaceBytes) +
                       int64_t(kCublasWorkspace)
                 : 0;
  }

private:
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

  Status sync() {
    cudaError_t e = cudaStreamSynchronize(ctx_.stream);
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
      HGP_CUDA_TRY(cudaMemcpy(address(int(i)), host.data(), host.size(), cudaMemcpyHostToDevice));
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
    for (size_t i = 0; i < src->steps.size(); ++i) {
      const PlanStep& s = src->steps[i];
      if (!p.launches.empty() && groupable(src->steps[size_t(p.launches.back().steps.back())], s))
        p.launches.back().steps.push_back(int(i));
      else
        p.launches.push_back(Launch{{int(i)}, nullptr});
    }
    return &p;
  }

  CudaArgs argsFor(const PlanStep& s, std::unique_ptr<StepState>& state) {
    CudaArgs a{s, {}, {}, ctx_, ctx_.stream, state};
    for (int i : s.inputs) a.in.push_back(views_[size_t(i)]);
    for (int o : s.outputs) a.out.push_back(views_[size_t(o)]);
    return a;
  }

  /// Enqueues the program: the staged input copies, then every launch.
  Status enqueue(Program& p, int slot) {
    for (int t : p.inputs)
      HGP_CUDA_TRY(cudaMemcpyAsync(address(t), staging_.at(t)[size_t(slot)],
                                   size_t(plan_->tensors[size_t(t)].bytes()),
                                   cudaMemcpyHostToDevice, ctx_.stream));
    HGP_CUDA_TRY(cudaEventRecordWithFlags(copied_[size_t(slot)], ctx_.stream,
                                          ctx_.capturing ? cudaEventRecordExternal : 0));
    for (Launch& l : p.launches) {
      const PlanStep& first = p.source->steps[size_t(l.steps[0])];
      std::string who = std::string(opName(first.op)) + " '" + first.loc + "'";
      if (l.steps.size() == 1 && !isOptimizer(first.op)) {
        CudaArgs a = argsFor(first, l.state);
        HGP_TRY_CTX(kExec[int(first.op)](a), "step " + who);
      } else {
        std::vector<CudaArgs> group;
        // Each step needs a state slot; groups keep one shared state.
        for (int s : l.steps) group.push_back(argsFor(p.source->steps[size_t(s)], l.state));
        HGP_TRY_CTX(execOptimizerGroup(group, l.state),
                    "the optimizer update starting at " + who);
      }
      if (ctx_.capturing) noteCapturedNodes(p, l.steps[0]);
    }
    return Status::ok();
  }

  /// Remembers which step the nodes captured so far (the current dependency set) came from.
  void noteCapturedNodes(Program& p, int step) {
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t* deps = nullptr;
    size_t n = 0;
    if (cudaStreamGetCaptureInfo(ctx_.stream, &status, nullptr, nullptr, &deps, nullptr, &n) !=
        cudaSuccess)
      return;
    for (size_t i = 0; i < n; ++i) p.nodeStep.emplace(deps[i], step);
  }

  Status capture(Program& p, int slot) {
    HGP_CUDA_TRY(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    ctx_.capturing = true;
    Status st = enqueue(p, slot);
    ctx_.capturing = false;
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
    p.graphGeneration[slot] = ctx_.workspaceGeneration;
    return Status::ok();
  }

  BackendOptions opts_;
  TuningCache tuning_;
  CudaContext ctx_;
  const Plan* plan_ = nullptr;
  void *persistent_ = nullptr, *transient_ = nullptr, *cublasWorkspace_ = nullptr;
  std::vector<DeviceTensor> views_;
  std::map<int, std::array<void*, kSlots>> staging_;
  std::array<cudaEvent_t, kSlots> copied_{};
  int slot_ = 0;
  std::map<std::string, Program> programs_;
  std::unique_ptr<ThreadPool> copyPool_;
};

} // namespace
} // namespace cuda

Expected<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions& options) {
  auto b = std::make_unique<cuda::CudaBackend>(options);
  HGP_TRY(b->init());
  return std::unique_ptr<Backend>(std::move(b));
}

} // namespace hgp
