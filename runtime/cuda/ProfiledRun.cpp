// ProfiledRun.cpp - the CUDA backend's measured runs: --op-times (an event around every launch)
// and --profile / --trace (one run recorded by CUPTI). CudaBackend.h says when each happens.
#include "runtime/cuda/CudaBackend.h"

#include "runtime/profile/ChromeTrace.h"

#include <cstdio>

namespace hgp::cuda {

namespace {

/// Destroys the events it holds when it goes.
struct EventSet {
  std::vector<cudaEvent_t> events;
  explicit EventSet(size_t n) : events(n, nullptr) {}
  ~EventSet() {
    for (cudaEvent_t e : events)
      if (e) (void)cudaEventDestroy(e);
  }
};

} // namespace

Status CudaBackend::timeLaunches(Program& p, int slot) {
  p.timed = true;
  EventSet marks(p.launches.size() + 2);
  for (cudaEvent_t& e : marks.events) HGP_CUDA_TRY(cudaEventCreate(&e));
  HGP_TRY(enqueue(p, slot, &marks.events));
  HGP_TRY(sync());
  FILE* f = std::fopen(opts_.opTimes.c_str(), "a");
  if (!f) return Status(ErrorCode::Io, "cannot write --op-times file " + opts_.opTimes);
  Status st;
  for (size_t i = 0; i + 1 < marks.events.size(); ++i) {
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, marks.events[i], marks.events[i + 1]);
    if (e != cudaSuccess) {
      st = cudaError(e, "cudaEventElapsedTime(&ms, marks[i], marks[i + 1])", __FILE__, __LINE__);
      break;
    }
    const PlanStep& s =
        i == 0 ? p.source->steps[0] : p.source->steps[size_t(p.launches[i - 1].steps[0])];
    std::fprintf(f, "%s\t%zu\t%s\t%s\t%.4f\n", p.source->name.c_str(), i,
                 i == 0 ? "InputCopy" : opName(s.op), i == 0 ? "" : s.loc.c_str(), double(ms));
  }
  if (std::fclose(f) != 0 && st)
    st = Status(ErrorCode::Io, "cannot write --op-times file " + opts_.opTimes);
  return st;
}

Status CudaBackend::profileRun(Program& p, int slot, bool eager) {
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
    HGP_TRY(p.dropGraph(slot));
    HGP_TRY(capture(p, slot));
    // Upload before the recorded launch, so that it is a replay like every later one.
    HGP_CUDA_TRY(cudaGraphUpload(p.graphs[slot], mainLane().stream));
    HGP_CUDA_TRY(cudaGraphLaunch(p.graphs[slot], mainLane().stream));
    return Status::ok();
  };
  Status st = body();
  if (st) st = sync();
  auto raw = profiler_->stop();
  HGP_TRY(std::move(st).withContext("profiling program " + p.source->name));
  HGP_TRY(raw.status());
  if (!eager && profiler_->unmappedKernels()) {
    std::fprintf(stderr,
                 "cuda: --profile: the replayed graph's kernels could not be tied to plan "
                 "steps; profiling the next run of %s op by op instead\n",
                 p.source->name.c_str());
    profile_ = ProfileState::EagerPending;
    return Status::ok();
  }
  profile_ = ProfileState::Done;
  std::vector<int> launchSteps(p.source->steps.size(), 0);
  for (const Launch& l : p.launches) launchSteps[size_t(l.steps[0])] = int(l.steps.size());
  ProfileRecords records = toRecords(*raw, *plan_, *p.source, launchSteps, device_.props.name,
                                     device_.props.multiProcessorCount, eager ? "eager" : "graph");
  if (!opts_.profile.empty()) {
    FILE* f = std::fopen(opts_.profile.c_str(), "w");
    std::string text = printRecords(records);
    bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f) ok = std::fclose(f) == 0 && ok;
    if (!ok) return Status(ErrorCode::Io, "cannot write the --profile file " + opts_.profile);
  }
  if (!opts_.trace.empty())
    HGP_TRY(writeChromeTraceFile(records, plan_, p.source->name, opts_.trace));
  std::fprintf(
      stderr, "cuda: profiled one run of %s (%s mapping): %zu records over %.3f ms%s%s%s%s\n",
      p.source->name.c_str(), records.mapping.c_str(), records.records.size(),
      records.programs[0].spanUs / 1e3, opts_.profile.empty() ? "" : "; records in ",
      opts_.profile.c_str(), opts_.trace.empty() ? "" : "; trace in ", opts_.trace.c_str());
  return Status::ok();
}

} // namespace hgp::cuda
