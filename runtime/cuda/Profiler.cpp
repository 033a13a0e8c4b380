#include "runtime/cuda/Profiler.h"

#include "runtime/support/DynamicLibrary.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

namespace hgp::cuda {

namespace {

/// The CUPTI entry points used, resolved from the dlopen()ed library.
struct Cupti {
  std::optional<DynamicLibrary> lib;
#define HGP_CUPTI_FN(name) decltype(&::name) name = nullptr;
  HGP_CUPTI_FN(cuptiGetResultString)
  HGP_CUPTI_FN(cuptiActivityRegisterCallbacks)
  HGP_CUPTI_FN(cuptiActivityEnable)
  HGP_CUPTI_FN(cuptiActivityDisable)
  HGP_CUPTI_FN(cuptiActivityFlushAll)
  HGP_CUPTI_FN(cuptiActivityGetNextRecord)
  HGP_CUPTI_FN(cuptiActivityGetNumDroppedRecords)
  HGP_CUPTI_FN(cuptiActivityPushExternalCorrelationId)
  HGP_CUPTI_FN(cuptiActivityPopExternalCorrelationId)
  HGP_CUPTI_FN(cuptiSubscribe)
  HGP_CUPTI_FN(cuptiUnsubscribe)
  HGP_CUPTI_FN(cuptiEnableCallback)
  HGP_CUPTI_FN(cuptiGetGraphNodeId)
#undef HGP_CUPTI_FN
};

Cupti g;
std::once_flag gLoadOnce;
Status gLoadStatus;

/// What a buffer held, kept until stop() ties it to steps (external-correlation records may
/// arrive in a later buffer than the kernels they name).
struct Pending {
  RawActivity a;
  uint64_t graphNodeId = 0;
  uint32_t correlationId = 0;
};

std::mutex gMutex; // Guards everything below: buffers complete on CUPTI's thread.
std::vector<Pending> gPending;
std::map<uint32_t, uint64_t> gExternal;  // correlation id -> step (eager mapping)
std::map<uint64_t, int> gNodeStep;       // CUPTI graph node id -> step (graph mapping)
const std::map<cudaGraphNode_t, int>* gCaptured = nullptr; // For the clone callback.
size_t gDropped = 0;
std::string gCallbackError;

std::string resultString(CUptiResult r) {
  const char* s = nullptr;
  if (g.cuptiGetResultString && g.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(int(r));
}

Status cuptiStatus(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return Status::ok();
  return Status(ErrorCode::Device, std::string(what) + " failed: " + resultString(r));
}
#define HGP_CUPTI_TRY(call) HGP_TRY(cuptiStatus(g.call, #call))

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

const char* copyKindName(uint8_t k) {
  switch (k) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
  default: return "memcpy";
  }
}

constexpr size_t kBufferBytes = size_t(8) << 20;

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t valid) {
  std::lock_guard<std::mutex> lock(gMutex);
  CUpti_Activity* rec = nullptr;
  for (;;) {
    CUptiResult r = g.cuptiActivityGetNextRecord(buffer, valid, &rec);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      gCallbackError = "reading CUPTI activity records failed: " + resultString(r);
      break;
    }
    Pending p;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      p.a.kind = ActivityKind::Kernel;
      p.a.start = k->start;
      p.a.end = k->end;
      p.a.name = demangle(k->name);
      p.a.grid[0] = k->gridX, p.a.grid[1] = k->gridY, p.a.grid[2] = k->gridZ;
      p.a.block[0] = k->blockX, p.a.block[1] = k->blockY, p.a.block[2] = k->blockZ;
      p.a.regs = k->registersPerThread;
      p.a.staticSmem = k->staticSharedMemory;
      p.a.dynamicSmem = k->dynamicSharedMemory;
      p.graphNodeId = k->graphNodeId;
      p.correlationId = k->correlationId;
      gPending.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      p.a.kind = ActivityKind::Memcpy;
      p.a.start = m->start;
      p.a.end = m->end;
      p.a.name = copyKindName(m->copyKind);
      p.a.bytes = int64_t(m->bytes);
      p.graphNodeId = m->graphNodeId;
      p.correlationId = m->correlationId;
      gPending.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      p.a.kind = ActivityKind::Memset;
      p.a.start = m->start;
      p.a.end = m->end;
      p.a.name = "memset";
      p.a.bytes = int64_t(m->bytes);
      p.graphNodeId = m->graphNodeId;
      p.correlationId = m->correlationId;
      gPending.push_back(std::move(p));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        gExternal[e->correlationId] = e->externalId;
      break;
    }
    default: break;
    }
  }
  size_t dropped = 0;
  if (g.cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped) == CUPTI_SUCCESS)
    gDropped += dropped;
  std::free(buffer);
}

/// Resource callbacks: each node cloned into an instantiated graph inherits its original's step.
void CUPTIAPI onCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  auto* rd = static_cast<const CUpti_ResourceData*>(cbdata);
  auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (!gd || !gd->node) return;
  uint64_t id = 0;
  CUptiResult r = g.cuptiGetGraphNodeId(gd->node, &id);
  std::lock_guard<std::mutex> lock(gMutex);
  if (r != CUPTI_SUCCESS) {
    gCallbackError = "cuptiGetGraphNodeId of a cloned node failed: " + resultString(r);
    return;
  }
  int step = -1;
  if (gCaptured) {
    auto it = gCaptured->find(reinterpret_cast<cudaGraphNode_t>(gd->originalNode));
    if (it != gCaptured->end()) step = it->second;
  }
  gNodeStep[id] = step;
}

void load() {
  std::vector<std::string> candidates = {"libcupti.so.13", "libcupti.so"};
  if (const char* home = std::getenv("CUDA_HOME")) {
    candidates.push_back(std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13");
    candidates.push_back(std::string(home) + "/lib64/libcupti.so.13");
  }
  for (const char* dir : {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
                          "/usr/local/cuda/lib"})
    candidates.push_back(std::string(dir) + "/libcupti.so.13");
  std::vector<DynamicLibrary::Failure> failed;
  g.lib = DynamicLibrary::openFirst(candidates, DynamicLibrary::Scope::Local, &failed);
  if (!g.lib) {
    gLoadStatus = Status(ErrorCode::Device,
                         "--profile and --trace need CUPTI 13 (libcupti), which was not found: tried " +
                             DynamicLibrary::namesOf(failed) + " (add its folder, e.g. the Python environment's nvidia/cu13/lib, "
                             "to LD_LIBRARY_PATH)");
    return;
  }
  std::string missing;
#define HGP_CUPTI_RESOLVE(name)                                                                   \
  g.name = g.lib->function<decltype(g.name)>(#name);                                              \
  if (!g.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  HGP_CUPTI_RESOLVE(cuptiGetResultString)
  HGP_CUPTI_RESOLVE(cuptiActivityRegisterCallbacks)
  HGP_CUPTI_RESOLVE(cuptiActivityEnable)
  HGP_CUPTI_RESOLVE(cuptiActivityDisable)
  HGP_CUPTI_RESOLVE(cuptiActivityFlushAll)
  HGP_CUPTI_RESOLVE(cuptiActivityGetNextRecord)
  HGP_CUPTI_RESOLVE(cuptiActivityGetNumDroppedRecords)
  HGP_CUPTI_RESOLVE(cuptiActivityPushExternalCorrelationId)
  HGP_CUPTI_RESOLVE(cuptiActivityPopExternalCorrelationId)
  HGP_CUPTI_RESOLVE(cuptiSubscribe)
  HGP_CUPTI_RESOLVE(cuptiUnsubscribe)
  HGP_CUPTI_RESOLVE(cuptiEnableCallback)
  HGP_CUPTI_RESOLVE(cuptiGetGraphNodeId)
#undef HGP_CUPTI_RESOLVE
  if (!missing.empty()) {
    gLoadStatus = Status(ErrorCode::Device, "the loaded CUPTI library lacks " + missing +
                                                "; --profile needs CUPTI 13");
    return;
  }
  CUptiResult r = g.cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
  if (r != CUPTI_SUCCESS) gLoadStatus = cuptiStatus(r, "cuptiActivityRegisterCallbacks");
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kEagerKinds[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                              CUPTI_ACTIVITY_KIND_DRIVER,
                                              CUPTI_ACTIVITY_KIND_RUNTIME};

} // namespace

Expected<std::unique_ptr<ActivityProfiler>> ActivityProfiler::open() {
  std::call_once(gLoadOnce, load);
  HGP_TRY(gLoadStatus);
  return std::unique_ptr<ActivityProfiler>(new ActivityProfiler());
}

ActivityProfiler::~ActivityProfiler() {
  if (running_) (void)stop();
  std::lock_guard<std::mutex> lock(gMutex);
  if (gCaptured) gCaptured = nullptr;
}

Status ActivityProfiler::start(bool eager) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    gPending.clear();
    gExternal.clear();
    gNodeStep.clear();
    gDropped = 0;
    gCallbackError.clear();
  }
  eager_ = eager;
  running_ = true; // From here on stop() undoes whatever was switched on, also after a failure.
  if (!eager) {
    CUpti_SubscriberHandle h = nullptr;
    CUptiResult r = g.cuptiSubscribe(&h, onCallback, nullptr);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return Status(ErrorCode::Device, "CUPTI already has a subscriber (is the program running "
                                       "under Nsight Systems or another profiler?); --profile and "
                                       "--trace need CUPTI to themselves");
    HGP_TRY(cuptiStatus(r, "cuptiSubscribe"));
    subscriber_ = h;
    HGP_CUPTI_TRY(cuptiEnableCallback(1, h, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
  } else {
    // External-correlation records name the API calls' correlation ids, which CUPTI assigns to
    // the driver and runtime calls it traces: trace them too, for this one run.
    for (CUpti_ActivityKind k : kEagerKinds)
      HGP_TRY(cuptiStatus(g.cuptiActivityEnable(k), "cuptiActivityEnable"));
  }
  for (CUpti_ActivityKind k : kKinds) HGP_TRY(cuptiStatus(g.cuptiActivityEnable(k), "cuptiActivityEnable"));
  return Status::ok();
}

void ActivityProfiler::noteCapturedNodes(const std::map<cudaGraphNode_t, int>& nodeStep) {
  std::vector<std::pair<uint64_t, int>> ids;
  for (const auto& [node, step] : nodeStep) {
    uint64_t id = 0;
    if (g.cuptiGetGraphNodeId(reinterpret_cast<CUgraphNode>(node), &id) == CUPTI_SUCCESS)
      ids.push_back({id, step});
  }
  std::lock_guard<std::mutex> lock(gMutex);
  gCaptured = &nodeStep;
  for (const auto& [id, step] : ids) gNodeStep[id] = step;
}

Status ActivityProfiler::pushStep(int step) {
  HGP_CUPTI_TRY(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                       uint64_t(step)));
  return Status::ok();
}

Status ActivityProfiler::popStep() {
  uint64_t id = 0;
  HGP_CUPTI_TRY(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id));
  return Status::ok();
}

Expected<std::vector<RawActivity>> ActivityProfiler::stop() {
  running_ = false;
  Status st = cuptiStatus(g.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                          "cuptiActivityFlushAll");
  for (CUpti_ActivityKind k : kKinds) {
    Status d = cuptiStatus(g.cuptiActivityDisable(k), "cuptiActivityDisable");
    if (st) st = d;
  }
  for (CUpti_ActivityKind k : kEagerKinds) {
    if (!eager_) break;
    Status d = cuptiStatus(g.cuptiActivityDisable(k), "cuptiActivityDisable");
    if (st) st = d;
  }
  if (subscriber_) {
    Status d = cuptiStatus(g.cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_)),
                           "cuptiUnsubscribe");
    if (st) st = d;
    subscriber_ = nullptr;
  }
  std::lock_guard<std::mutex> lock(gMutex);
  gCaptured = nullptr;
  HGP_TRY(st);
  if (!gCallbackError.empty()) return Status(ErrorCode::Device, gCallbackError);
  if (gDropped > 0)
    return Status(ErrorCode::Device, "CUPTI dropped " + std::to_string(gDropped) +
                                         " activity records of the profiled run");
  std::vector<RawActivity> out;
  unmapped_ = mapped_ = 0;
  for (Pending& p : gPending) {
    if (eager_) {
      auto it = gExternal.find(p.correlationId);
      if (it == gExternal.end()) continue; // Not launched by a step of the profiled run.
      p.a.step = int(it->second);
    } else {
      if (p.graphNodeId == 0) continue; // Not part of the graph launch (e.g. a write()).
      auto it = gNodeStep.find(p.graphNodeId);
      if (it == gNodeStep.end()) {
        p.a.step = -1;
        if (p.a.kind == ActivityKind::Kernel) ++unmapped_;
      } else {
        p.a.step = it->second;
        if (p.a.kind == ActivityKind::Kernel && p.a.step >= 0) ++mapped_;
      }
    }
    out.push_back(std::move(p.a));
  }
  gPending.clear();
  std::stable_sort(out.begin(), out.end(),
                   [](const RawActivity& a, const RawActivity& b) { return a.start < b.start; });
  return out;
}

ProfileRecords toRecords(const std::vector<RawActivity>& raw, const Plan& plan,
                         const PlanProgram& program, const std::vector<int>& launchSteps,
                         const std::string& gpu, int sms, const std::string& mapping) {
  ProfileRecords r;
  r.model = plan.modelName;
  r.batch = plan.meta.getInt("batch");
  r.gpu = gpu;
  r.sms = sms;
  r.mapping = mapping;
  uint64_t first = raw.empty() ? 0 : raw.front().start, last = first;
  for (const RawActivity& a : raw) {
    ActivityRecord rec;
    rec.kind = a.kind;
    rec.program = program.name;
    rec.step = a.step >= 0 && size_t(a.step) < program.steps.size() ? a.step : -1;
    if (rec.step >= 0) {
      const PlanStep& s = program.steps[size_t(rec.step)];
      rec.op = opName(s.op);
      rec.loc = s.loc;
      rec.stream = s.stream;
      if (size_t(rec.step) < launchSteps.size()) rec.covers = std::max(1, launchSteps[size_t(rec.step)]);
    } else {
      rec.op = "-";
      rec.stream = -1;
    }
    rec.name = a.name;
    if (a.kind == ActivityKind::Kernel) {
      std::copy(a.grid, a.grid + 3, rec.grid);
      std::copy(a.block, a.block + 3, rec.block);
      rec.regs = a.regs;
      rec.staticSmem = a.staticSmem;
      rec.dynamicSmem = a.dynamicSmem;
    } else {
      rec.bytes = a.bytes;
    }
    rec.startUs = double(a.start - first) / 1e3;
    rec.durUs = double(a.end > a.start ? a.end - a.start : 0) / 1e3;
    last = std::max(last, a.end);
    r.records.push_back(std::move(rec));
  }
  r.programs.push_back({program.name, int(program.steps.size()), double(last - first) / 1e3});
  return r;
}

} // namespace hgp::cuda
