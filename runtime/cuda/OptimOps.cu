// CUDA executors for the optimizer updates: SgdUpdate and AdamUpdate (OptimOps.cpp on the CPU),
// and execOptimizerGroup, which CudaBackend.cpp calls for a run of consecutive updates that share
// attributes and their lr, ok and step operands.
//
// A group is one multi-tensor launch. On its first (eager) call it uploads a table of its
// tensors ({P, G, state buffers, results}) and of chunks of at most kChunk elements; the kernel
// runs a block per chunk. (Should a result not overwrite its own input, the group runs one launch
// per step instead, in plan order, since that result may share bytes with an earlier step's
// input.) lr, ok and step are read on the device; Adam's bias corrections are
// computed once per block in double. Elementwise math follows torch 1.13's single-tensor code in
// the CPU reference's operation order, with every product and sum rounded separately
// (__fmul_rn/__fadd_rn: no fused multiply-add), so the GPU reproduces the CPU bit for bit. With
// ok == 0 nothing changes (results that do not alias their inputs get copies). With grad_scale=1
// (fp16 loss scaling) the last input is the loss scale s, read on the device like lr, and each
// gradient element is multiplied by 1 / s first, as the CPU does.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

Status execOptimizerGroup(std::vector<CudaArgs>& steps, std::unique_ptr<StepState>& state);

namespace {

struct OptimTensor {
  const float *p, *g, *s1, *s2;
  float *pOut, *s1Out, *s2Out;
  int vec; ///< Every pointer is 16-byte aligned.
};

struct OptimChunk {
  int tensor;
  int count;
  int64_t start;
};

constexpr int kChunk = 16384;

struct OptimState : StepState {
  DeviceBuffer tensors, chunks;
  /// Launches as (first chunk, chunks): one for the whole group when every result overwrites its
  /// own input; else one per step, in plan order, because a result with storage of its own may
  /// share bytes with an input of an earlier step of the group.
  std::vector<std::pair<int, int>> launches;
  std::vector<const void*> key; ///< The pointers the tables were built for.
};

struct SgdParams {
  float wd, mom, damp1;
  bool hasWd, hasBuf, nesterov;
};

struct AdamParams {
  double beta1, beta2, wdD;
  float wd, b1, oneMinusB1, b2, oneMinusB2, eps;
  bool hasWd, decoupled;
};

/// Copies inputs to results that do not alias them (a skipped step).
__device__ void keepValues(const OptimTensor& t, const OptimChunk& c) {
  for (int64_t i = c.start + threadIdx.x; i < c.start + c.count; i += blockDim.x) {
    if (t.pOut != t.p) t.pOut[i] = t.p[i];
    if (t.s1Out && t.s1Out != t.s1) t.s1Out[i] = t.s1[i];
    if (t.s2Out && t.s2Out != t.s2) t.s2Out[i] = t.s2[i];
  }
}

/// 1 / the loss scale, or 1 without loss scaling (a null pointer).
__device__ __forceinline__ float gradFactor(const float* scale) {
  return scale ? __fdiv_rn(1.f, *scale) : 1.f;
}

struct SgdStep {
  SgdParams q;
  float negLr;
  bool first;
  float unscale;
  __device__ void operator()(float p, float g, float buf, float& pOut, float& bufOut) const {
    float d = unscale != 1.f ? __fmul_rn(g, unscale) : g;
    if (q.hasWd) d = __fadd_rn(d, __fmul_rn(q.wd, p)); // d_p = d_p.add(param, alpha=wd)
    if (q.hasBuf) {
      // buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p, alpha=1-damp).
      float b = first ? d : __fadd_rn(__fmul_rn(buf, q.mom), __fmul_rn(q.damp1, d));
      bufOut = b;
      d = q.nesterov ? __fadd_rn(d, __fmul_rn(q.mom, b)) : b;
    }
    pOut = __fadd_rn(p, __fmul_rn(negLr, d)); // param.add_(d_p, alpha=-lr)
  }
};

struct AdamStep {
  AdamParams q;
  float decay, bc2Sqrt, negStepSize, unscale;
  __device__ void operator()(float p, float g, float m, float v, float& pOut, float& mOut,
                             float& vOut) const {
    if (unscale != 1.f) g = __fmul_rn(g, unscale);
    if (q.decoupled)
      p = __fmul_rn(p, decay); // AdamW: param.mul_(1 - lr*wd)
    else if (q.hasWd)
      g = __fadd_rn(g, __fmul_rn(q.wd, p)); // grad = grad.add(param, alpha=wd)
    float mi = __fadd_rn(__fmul_rn(m, q.b1), __fmul_rn(q.oneMinusB1, g));
    float vi = __fadd_rn(__fmul_rn(v, q.b2), __fmul_rn(__fmul_rn(q.oneMinusB2, g), g));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2Sqrt), q.eps);
    mOut = mi;
    vOut = vi;
    pOut = __fadd_rn(p, __fdiv_rn(__fmul_rn(negStepSize, mi), denom));
  }
};

__global__ void sgdKernel(const OptimTensor* tensors, const OptimChunk* chunks, const float* lr,
                          const float* ok, const int64_t* step, const float* scale, SgdParams q) {
  OptimChunk c = chunks[blockIdx.x];
  OptimTensor t = tensors[c.tensor];
  if (*ok == 0.f) {
    keepValues(t, c);
    return;
  }
  SgdStep f{q, -*lr, *step == 0, gradFactor(scale)};
  int64_t begin = c.start, end = c.start + c.count;
  if (t.vec) {
    int64_t q4 = (end - begin) / 4;
    for (int64_t k = threadIdx.x; k < q4; k += blockDim.x) {
      int64_t i = begin + 4 * k;
      float4 p = *reinterpret_cast<const float4*>(t.p + i);
      float4 g = *reinterpret_cast<const float4*>(t.g + i);
      float4 b = q.hasBuf ? *reinterpret_cast<const float4*>(t.s1 + i) : make_float4(0, 0, 0, 0);
      float4 po, bo;
      f(p.x, g.x, b.x, po.x, bo.x);
      f(p.y, g.y, b.y, po.y, bo.y);
      f(p.z, g.z, b.z, po.z, bo.z);
      f(p.w, g.w, b.w, po.w, bo.w);
      *reinterpret_cast<float4*>(t.pOut + i) = po;
      if (q.hasBuf) *reinterpret_cast<float4*>(t.s1Out + i) = bo;
    }
    begin += 4 * q4;
  }
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float po, bo = 0.f;
    f(t.p[i], t.g[i], q.hasBuf ? t.s1[i] : 0.f, po, bo);
    t.pOut[i] = po;
    if (q.hasBuf) t.s1Out[i] = bo;
  }
}

__global__ void adamKernel(const OptimTensor* tensors, const OptimChunk* chunks, const float* lr,
                           const float* ok, const int64_t* step, const float* scale, AdamParams q) {
  OptimChunk c = chunks[blockIdx.x];
  OptimTensor t = tensors[c.tensor];
  if (*ok == 0.f) {
    keepValues(t, c);
    return;
  }
  __shared__ float scalars[3];
  if (threadIdx.x == 0) {
    // Python-float arithmetic, in double, as the CPU does it.
    double lrD = *lr, tD = double(*step + 1);
    double biasCorrection1 = 1 - pow(q.beta1, tD), biasCorrection2 = 1 - pow(q.beta2, tD);
    scalars[0] = float(1 - lrD * q.wdD);
    scalars[1] = float(sqrt(biasCorrection2));
    scalars[2] = float(-(lrD / biasCorrection1));
  }
  __syncthreads();
  AdamStep f{q, scalars[0], scalars[1], scalars[2], gradFactor(scale)};
  int64_t begin = c.start, end = c.start + c.count;
  if (t.vec) {
    int64_t q4 = (end - begin) / 4;
    for (int64_t k = threadIdx.x; k < q4; k += blockDim.x) {
      int64_t i = begin + 4 * k;
      float4 p = *reinterpret_cast<const float4*>(t.p + i);
      float4 g = *reinterpret_cast<const float4*>(t.g + i);
      float4 m = *reinterpret_cast<const float4*>(t.s1 + i);
      float4 v = *reinterpret_cast<const float4*>(t.s2 + i);
      float4 po, mo, vo;
      f(p.x, g.x, m.x, v.x, po.x, mo.x, vo.x);
      f(p.y, g.y, m.y, v.y, po.y, mo.y, vo.y);
      f(p.z, g.z, m.z, v.z, po.z, mo.z, vo.z);
      f(p.w, g.w, m.w, v.w, po.w, mo.w, vo.w);
      *reinterpret_cast<float4*>(t.pOut + i) = po;
      *reinterpret_cast<float4*>(t.s1Out + i) = mo;
      *reinterpret_cast<float4*>(t.s2Out + i) = vo;
    }
    begin += 4 * q4;
  }
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float po, mo, vo;
    f(t.p[i], t.g[i], t.s1[i], t.s2[i], po, mo, vo);
    t.pOut[i] = po;
    t.s1Out[i] = mo;
    t.s2Out[i] = vo;
  }
}

/// Checks P, G, lr, ok and step, and that every state input and result is f32 of P's shape.
/// The inputs other than the loss scale (grad_scale=1 appends it).
size_t updateInputs(const CudaArgs& a) {
  return a.in.size() - (a.attrs().getInt("grad_scale", 0) ? 1 : 0);
}

/// The loss scale on the device, or null without loss scaling.
const float* lossScaleOf(const CudaArgs& a) {
  return a.attrs().getInt("grad_scale", 0) ? a.in.back().f32() : nullptr;
}

Status checkOptimOperands(const CudaArgs& a) {
  const DeviceTensor& p = a.in[0];
  size_t inputs = updateInputs(a);
  if (inputs < a.in.size()) HGP_TRY(checkScalar(a, a.in.back(), DType::F32, "loss scale"));
  HGP_TRY(checkF32(a, p, "parameter"));
  HGP_TRY(checkF32(a, a.in[1], "gradient"));
  HGP_TRY(checkShape(a, a.in[1], *p.shape, "gradient"));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "lr"));
  HGP_TRY(checkScalar(a, a.in[3], DType::F32, "ok"));
  HGP_TRY(checkScalar(a, a.in[4], DType::I64, "step"));
  for (size_t i = 5; i < inputs; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "state"));
    HGP_TRY(checkShape(a, a.in[i], *p.shape, "state"));
  }
  for (const auto& v : a.out) {
    HGP_TRY(checkF32(a, v, "result"));
    HGP_TRY(checkShape(a, v, *p.shape, "result"));
  }
  return Status::ok();
}

/// Builds (once) the tensor and chunk tables of a group.
Status buildTables(std::vector<CudaArgs>& steps, OptimState& s) {
  std::vector<const void*> key;
  for (const CudaArgs& a : steps) {
    for (const auto& v : a.in) key.push_back(v.data);
    for (const auto& v : a.out) key.push_back(v.data);
  }
  if (key == s.key) return Status::ok();
  const CudaArgs& a0 = steps[0];
  std::vector<OptimTensor> tensors;
  std::vector<OptimChunk> chunks;
  for (const CudaArgs& a : steps) {
    OptimTensor t{};
    t.p = a.in[0].f32();
    t.g = a.in[1].f32();
    size_t inputs = updateInputs(a);
    t.s1 = inputs > 5 ? a.in[5].f32() : nullptr;
    t.s2 = inputs > 6 ? a.in[6].f32() : nullptr;
    t.pOut = a.out[0].f32();
    t.s1Out = a.out.size() > 1 ? a.out[1].f32() : nullptr;
    t.s2Out = a.out.size() > 2 ? a.out[2].f32() : nullptr;
    t.vec = aligned16({t.p, t.g, t.s1, t.s2, t.pOut, t.s1Out, t.s2Out});
    int64_t n = a.in[0].numel();
    for (int64_t off = 0; off < n; off += kChunk)
      chunks.push_back({int(tensors.size()), int(std::min<int64_t>(kChunk, n - off)), off});
    tensors.push_back(t);
  }
  if (chunks.size() > size_t(INT32_MAX)) return a0.fail("too many parameters for one update");
  bool inPlace = true;
  for (const CudaArgs& a : steps)
    for (size_t o = 0; o < a.out.size(); ++o)
      inPlace &= a.out[o].data == a.in[o == 0 ? 0 : 4 + o].data;
  s.launches.clear();
  if (inPlace) {
    s.launches.push_back({0, int(chunks.size())});
  } else {
    for (size_t c = 0; c < chunks.size(); ++c)
      if (c == 0 || chunks[c].tensor != chunks[c - 1].tensor)
        s.launches.push_back({int(c), 1});
      else
        ++s.launches.back().second;
  }
  HGP_TRY(s.tensors.upload(a0, tensors.data(), tensors.size() * sizeof(OptimTensor)));
  HGP_TRY(s.chunks.upload(a0, chunks.data(), chunks.size() * sizeof(OptimChunk)));
  s.key = key;
  return Status::ok();
}

Status sgdGroup(std::vector<CudaArgs>& steps, OptimState& s) {
  const CudaArgs& a = steps[0];
  double momentum = a.attrs().getFloat("momentum", 0.0);
  double dampening = a.attrs().getFloat("dampening", 0.0);
  double weightDecay = a.attrs().getFloat("weight_decay", 0.0);
  bool hasBuf = momentum != 0;
  for (const CudaArgs& st : steps) {
    HGP_TRY(checkArity(st, 5, 7, 1, 2));
    HGP_TRY(checkOptimOperands(st));
    if (updateInputs(st) != (hasBuf ? 6u : 5u) || st.out.size() != (hasBuf ? 2u : 1u))
      return st.fail("SGD takes a momentum buffer exactly when momentum is nonzero");
  }
  HGP_TRY(buildTables(steps, s));
  // Scalars as TensorIterator sees them: Python floats rounded to the tensor's dtype.
  SgdParams q{float(weightDecay), float(momentum), float(1 - dampening),
              weightDecay != 0,   hasBuf,          a.attrs().getInt("nesterov", 0) != 0};
  for (auto [first, count] : s.launches) {
    sgdKernel<<<unsigned(count), kBlock, 0, a.stream>>>(
        s.tensors.as<OptimTensor>(), s.chunks.as<OptimChunk>() + first, a.in[2].f32(),
        a.in[3].f32(), a.in[4].as<int64_t>(), lossScaleOf(a), q);
    HGP_TRY(checkLaunch(a, "sgdKernel"));
  }
  return Status::ok();
}

Status adamGroup(std::vector<CudaArgs>& steps, OptimState& s) {
  const CudaArgs& a = steps[0];
  for (const CudaArgs& st : steps) {
    HGP_TRY(checkArity(st, 7, 8, 3, 3));
    HGP_TRY(checkOptimOperands(st));
    if (updateInputs(st) != 7) return st.fail("Adam takes 7 inputs (8 with grad_scale=1)");
  }
  HGP_TRY(buildTables(steps, s));
  AdamParams q{};
  q.beta1 = a.attrs().getFloat("beta1", 0.9);
  q.beta2 = a.attrs().getFloat("beta2", 0.999);
  q.wdD = a.attrs().getFloat("weight_decay", 0);
  q.wd = float(q.wdD);
  q.b1 = float(q.beta1);
  q.oneMinusB1 = float(1 - q.beta1);
  q.b2 = float(q.beta2);
  q.oneMinusB2 = float(1 - q.beta2);
  q.eps = float(a.attrs().getFloat("eps", 1e-8));
  q.hasWd = q.wdD != 0;
  q.decoupled = a.attrs().getInt("decoupled", 0) != 0;
  for (auto [first, count] : s.launches) {
    adamKernel<<<unsigned(count), kBlock, 0, a.stream>>>(
        s.tensors.as<OptimTensor>(), s.chunks.as<OptimChunk>() + first, a.in[2].f32(),
        a.in[3].f32(), a.in[4].as<int64_t>(), lossScaleOf(a), q);
    HGP_TRY(checkLaunch(a, "adamKernel"));
  }
  return Status::ok();
}

} // namespace

Status execOptimizerGroup(std::vector<CudaArgs>& steps, std::unique_ptr<StepState>& state) {
  if (steps.empty()) return Status::ok();
  OpKind op = steps[0].step.op;
  for (const CudaArgs& a : steps)
    if (a.step.op != op || a.attrs() != steps[0].attrs() || a.in.size() < 5 ||
        a.in[2].data != steps[0].in[2].data || a.in[3].data != steps[0].in[3].data ||
        a.in[4].data != steps[0].in[4].data || lossScaleOf(a) != lossScaleOf(steps[0]))
      return a.fail("an optimizer group mixes steps that cannot share one launch");
  if (!state) state = std::make_unique<OptimState>();
  OptimState& s = static_cast<OptimState&>(*state);
  if (op == OpKind::SgdUpdate) return sgdGroup(steps, s);
  if (op == OpKind::AdamUpdate) return adamGroup(steps, s);
  return steps[0].fail("not an optimizer update");
}

Status execSgdUpdate(CudaArgs& a) {
  std::vector<CudaArgs> one{a};
  return execOptimizerGroup(one, a.state);
}

Status execAdamUpdate(CudaArgs& a) {
  std::vector<CudaArgs> one{a};
  return execOptimizerGroup(one, a.state);
}

} // namespace hgp::cuda
