// CUDA executors for training control: CheckFinite, CounterIncrement, LrSchedule and MetricsLog
// (ControlOps.cpp on the CPU).
//
// Every scalar they read (ok, the iteration counter, the loss, the rate) stays on the device:
// these are tiny kernels, so a replayed graph needs no host. CheckFinite scans all its inputs in
// one launch: on its first (eager) call it splits them into chunks and uploads a table of
// {pointer, count} that the kernel walks, a block per chunk; the last block combines the chunks'
// flags. CounterIncrement and MetricsLog
// update their state in place.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

// ---- CheckFinite ---------------------------------------------------------------------------

struct FiniteChunk {
  const float* p;
  int64_t count;
};

constexpr int64_t kFiniteChunk = int64_t(1) << 16;

struct CheckFiniteState : StepState {
  DeviceBuffer table;
  /// A counter of finished blocks (0 between launches) and one flag per chunk.
  DeviceBuffer flags;
  int chunks = 0;
  std::vector<const void*> inputs; ///< What the table was built for.
};

__device__ __forceinline__ bool finite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

/// A block per chunk records whether its chunk is finite; the last block to finish (counted with
/// an integer atomic) ANDs the flags in chunk order, writes ok and resets the counter for the
/// next launch. The result does not depend on the order in which blocks run.
__global__ void finiteScanKernel(const FiniteChunk* table, unsigned* counter, int* flags,
                                 float* ok) {
  FiniteChunk ch = table[blockIdx.x];
  bool all = true;
  if ((reinterpret_cast<uintptr_t>(ch.p) & 15) == 0) {
    const float4* p4 = reinterpret_cast<const float4*>(ch.p);
    int64_t n4 = ch.count / 4;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 v = p4[i];
      all &= finite(v.x) & finite(v.y) & finite(v.z) & finite(v.w);
    }
    for (int64_t i = n4 * 4 + threadIdx.x; i < ch.count; i += blockDim.x) all &= finite(ch.p[i]);
  } else {
    for (int64_t i = threadIdx.x; i < ch.count; i += blockDim.x) all &= finite(ch.p[i]);
  }
  all = __syncthreads_and(all);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    flags[blockIdx.x] = all ? 1 : 0;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  bool every = true;
  for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) every &= __ldcg(flags + i) != 0;
  every = __syncthreads_and(every);
  if (threadIdx.x == 0) {
    *ok = every ? 1.f : 0.f;
    *counter = 0;
  }
}

// ---- Scalars -------------------------------------------------------------------------------

__global__ void counterKernel(const int64_t* c, const float* ok, int64_t* out) {
  int64_t v = *c;
  *out = (!ok || *ok != 0.f) ? v + 1 : v;
}

constexpr int kMaxMilestones = 64;

struct Schedule {
  int kind = 0; ///< 0 constant, 1 step, 2 multistep, 3 cosine
  double base = 0, gamma = 0.1, etaMin = 0, warmupFactor = 1.0 / 3.0;
  int64_t stepSize = 1, tMax = 1, warmup = 0;
  int milestones = 0;
  int64_t milestone[kMaxMilestones] = {};
};

__global__ void lrScheduleKernel(Schedule s, const int64_t* iterPtr, float* out) {
  int64_t iter = *iterPtr;
  if (iter < 0) iter = 0; // the CPU reports a negative counter; the device can only clamp it
  double lr = s.base;
  if (s.kind == 1) {
    lr = s.base * pow(s.gamma, double(iter / s.stepSize));
  } else if (s.kind == 2) {
    int64_t passed = 0;
    for (int i = 0; i < s.milestones; ++i) passed += s.milestone[i] <= iter;
    lr = s.base * pow(s.gamma, double(passed));
  } else if (s.kind == 3) {
    double t = double(iter < s.tMax ? iter : s.tMax) / double(s.tMax);
    lr = s.etaMin + (s.base - s.etaMin) * (1 + cos(3.141592653589793 * t)) / 2;
  }
  if (iter < s.warmup) {
    double f = s.warmupFactor;
    lr *= f + (1 - f) * double(iter) / double(s.warmup);
  }
  *out = float(lr);
}

__global__ void metricsKernel(float* ring, int64_t rows, const int64_t* iterPtr, const float* loss,
                              const float* correct, const float* ok, const float* lr) {
  int64_t iter = *iterPtr;
  if (iter < 0) return;
  float* dst = ring + (iter % rows) * 4;
  dst[0] = *loss;
  dst[1] = *correct;
  dst[2] = *ok;
  dst[3] = *lr;
}

} // namespace

Status execCheckFinite(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "ok"));
  CheckFiniteState& s = a.stateAs<CheckFiniteState>();
  std::vector<const void*> inputs;
  for (const auto& v : a.in) inputs.push_back(v.data);
  if (inputs != s.inputs) {
    std::vector<FiniteChunk> chunks;
    for (const auto& v : a.in)
      for (int64_t off = 0; off < v.numel(); off += kFiniteChunk)
        chunks.push_back({v.f32() + off, std::min(kFiniteChunk, v.numel() - off)});
    if (chunks.size() > size_t(INT32_MAX)) return a.fail("too many elements to check");
    HGP_TRY(s.table.upload(a, chunks.data(), chunks.size() * sizeof(FiniteChunk)));
    std::vector<int> zeros(chunks.size() + 1, 0);
    HGP_TRY(s.flags.upload(a, zeros.data(), zeros.size() * sizeof(int)));
    s.chunks = int(chunks.size());
    s.inputs = inputs;
  }
  int* flags = s.flags.as<int>();
  finiteScanKernel<<<unsigned(s.chunks), kBlock, 0, a.stream>>>(
      s.table.as<FiniteChunk>(), reinterpret_cast<unsigned*>(flags), flags + 1, a.out[0].f32());
  return checkLaunch(a, "finiteScanKernel");
}

Status execCounterIncrement(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.in[0], DType::I64, "counter"));
  HGP_TRY(checkScalar(a, a.out[0], DType::I64, "counter"));
  if (a.in.size() == 2) HGP_TRY(checkScalar(a, a.in[1], DType::F32, "ok"));
  counterKernel<<<1, 1, 0, a.stream>>>(
      a.in[0].as<int64_t>(), a.in.size() == 2 ? a.in[1].f32() : nullptr, a.out[0].as<int64_t>());
  return checkLaunch(a, "counterKernel");
}

Status execLrSchedule(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkScalar(a, a.in[0], DType::I64, "iter"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "lr"));
  const AttrMap& at = a.attrs();
  Schedule s;
  s.base = at.getFloat("base_lr", 0.0);
  s.gamma = at.getFloat("gamma", 0.1);
  std::string kind = at.getString("kind", "constant");
  if (kind == "constant") {
    s.kind = 0;
  } else if (kind == "step") {
    s.kind = 1;
    s.stepSize = at.getInt("step_size", 0);
    if (s.stepSize < 1) return a.fail("the step schedule needs step_size >= 1");
  } else if (kind == "multistep") {
    s.kind = 2;
    std::vector<int64_t> ms = at.getInts("milestones");
    if (ms.size() > size_t(kMaxMilestones))
      return a.fail("more than " + std::to_string(kMaxMilestones) + " milestones");
    s.milestones = int(ms.size());
    for (size_t i = 0; i < ms.size(); ++i) s.milestone[i] = ms[i];
  } else if (kind == "cosine") {
    s.kind = 3;
    s.tMax = at.getInt("t_max", 0);
    if (s.tMax < 1) return a.fail("the cosine schedule needs t_max >= 1");
    s.etaMin = at.getFloat("eta_min", 0.0);
  } else {
    return a.fail("unknown schedule '" + kind + "'");
  }
  s.warmup = at.getInt("warmup_steps", 0);
  if (s.warmup < 0) return a.fail("warmup_steps must be >= 0");
  s.warmupFactor = at.getFloat("warmup_factor", 1.0 / 3.0);
  lrScheduleKernel<<<1, 1, 0, a.stream>>>(s, a.in[0].as<int64_t>(), a.out[0].f32());
  return checkLaunch(a, "lrScheduleKernel");
}

Status execMetricsLog(CudaArgs& a) {
  HGP_TRY(checkArity(a, 6, 6, 1, 1));
  const DeviceTensor& ring = a.in[0];
  HGP_TRY(checkF32(a, ring, "ring"));
  if (ring.rank() != 2 || ring.dim(1) != 4) return a.fail("the metrics ring must be f32[K,4]");
  HGP_TRY(checkF32(a, a.out[0], "ring'"));
  HGP_TRY(checkShape(a, a.out[0], *ring.shape, "ring'"));
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  for (size_t i = 2; i < 6; ++i) HGP_TRY(checkScalar(a, a.in[i], DType::F32, "metric"));
  for (size_t i = 2; i < 6; ++i)
    if (a.in[i].data == a.out[0].data || a.in[i].data == ring.data)
      return a.fail("a metric shares storage with the ring");
  HGP_TRY(copyTensor(a, a.out[0], ring)); // a no-op when the result is the ring itself
  metricsKernel<<<1, 1, 0, a.stream>>>(a.out[0].f32(), ring.dim(0), a.in[1].as<int64_t>(),
                                       a.in[2].f32(), a.in[3].f32(), a.in[4].f32(), a.in[5].f32());
  return checkLaunch(a, "metricsKernel");
}

namespace {
/// GradScaler.update on the device (ControlOps.cpp on the CPU); reads and writes in place.
__global__ void lossScaleKernel(const float* scale, const int64_t* good, const float* ok,
                                float growth, float backoff, int64_t interval, float* scaleOut,
                                int64_t* goodOut) {
  float s = *scale;
  int64_t n = *good;
  if (*ok == 0.f) {
    s = __fmul_rn(s, backoff);
    n = 0;
  } else if (++n >= interval) {
    s = __fmul_rn(s, growth);
    n = 0;
  }
  *scaleOut = s;
  *goodOut = n;
}
} // namespace

Status execLossScaleUpdate(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 2, 2));
  HGP_TRY(checkScalar(a, a.in[0], DType::F32, "scale"));
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "good"));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "ok"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "scale"));
  HGP_TRY(checkScalar(a, a.out[1], DType::I64, "good"));
  lossScaleKernel<<<1, 1, 0, a.stream>>>(
      a.in[0].f32(), a.in[1].as<int64_t>(), a.in[2].f32(),
      float(a.attrs().getFloat("growth_factor", 2.0)), float(a.attrs().getFloat("backoff_factor", 0.5)),
      a.attrs().getInt("growth_interval", 2000), a.out[0].f32(), a.out[1].as<int64_t>());
  return checkLaunch(a, "lossScaleKernel");
}

} // namespace hgp::cuda
