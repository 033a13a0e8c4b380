// CpuBackend.cpp - the CPU reference backend: executes a plan's steps in order on host memory.
//
// Mixed precision: executors compute in float32 only. A step that touches bf16 or f16 tensors
// gets float32 copies of them (widened exactly), and its 16-bit results are rounded back to
// nearest even when it returns: "store 16-bit, compute in f32". Cast converts by itself.
//
// Pitched views (PlanTensor::row/pitch: a channel range of a Concat written in place, a Split
// read in place) are gathered into dense copies before the step and its pitched results
// scattered back after it, so every executor sees dense tensors, whatever the op.
//
// Channels-last steps (layout="nhwc", runtime/plan/Layout.h) run the NCHW executor on
// channels-first copies of their rank-4 operands, and their rank-4 results are permuted back: the
// reference stays one obviously right executor per op.
#include "runtime/Backend.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/plan/Half.h"
#include "runtime/plan/InitialValues.h"
#include "runtime/plan/Layout.h"

#include <cstdlib>
#include <cstring>
#include <memory>

namespace hgp {

namespace {

using ExecFn = Status (*)(cpu::KernelArgs&);
constexpr ExecFn kExec[] = {
#define HGP_OP(Name, ...) &cpu::exec##Name,
#include "runtime/plan/OpList.def"
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class CpuBackend final : public Backend {
public:
  const char* name() const override { return "cpu"; }

  Status load(const Plan& plan, const InitData& data) override {
    plan_ = &plan;
    HGP_TRY(allocate(persistent_, plan.persistentBytes));
    HGP_TRY(allocate(transient_, plan.transientBytes));
    std::memset(persistent_.get(), 0, size_t(plan.persistentBytes));
    std::vector<uint8_t> initial;
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& t = plan.tensors[i];
      HGP_TRY(initialBytes(t, data, initial));
      if (!initial.empty()) std::memcpy(address(int(i)), initial.data(), initial.size());
    }
    views_.clear();
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      views_.push_back({plan.tensors[i].type.dtype, &plan.tensors[i].type.shape, address(int(i)),
                        plan.tensors[i].type.dtype});
    return Status::ok();
  }

  Status run(const std::string& program) override {
    const PlanProgram* prog = plan_ ? plan_->findProgram(program) : nullptr;
    if (!prog) return Status(ErrorCode::Internal, "the plan has no program '" + program + "'");
    for (const PlanStep& step : prog->steps) {
      cpu::KernelArgs args{step, {}, {}};
      args.in.reserve(step.inputs.size());
      args.out.reserve(step.outputs.size());
      for (int i : step.inputs) args.in.push_back(views_[size_t(i)]);
      for (int o : step.outputs) args.out.push_back(views_[size_t(o)]);
      gathered_.clear();
      for (size_t j = 0; j < args.in.size(); ++j) gather(step.inputs[j], args.in[j]);
      for (size_t j = 0; j < args.out.size(); ++j) gather(step.outputs[j], args.out[j]);
      // An op with CpuHalf (OpList.def) reads and writes 16-bit storage itself.
      if (opHas(step.op, OpFlag::CpuHalf) || !touchesHalf(args)) {
        HGP_TRY(execute(args));
        scatter(step.outputs);
        continue;
      }
      widened_.clear();
      for (auto& v : args.in) v = widen(v);
      for (auto& v : args.out) v = widen(v);
      HGP_TRY(execute(args));
      for (int o : step.outputs) narrow(stored(o));
      scatter(step.outputs);
    }
    return Status::ok();
  }

  Status read(int tensor, void* dst) override {
    copyPitched(plan_->tensors[size_t(tensor)], address(tensor), dst, true);
    return Status::ok();
  }

  Status write(int tensor, const void* src) override {
    copyPitched(plan_->tensors[size_t(tensor)], address(tensor), const_cast<void*>(src), false);
    return Status::ok();
  }

private:
  /// Runs the step's executor, through channels-first copies for a channels-last step.
  static Status execute(cpu::KernelArgs& args) {
    HGP_ASSIGN_OR_RETURN(Layout layout, layoutOf(args.step.op, args.attrs()));
    if (layout == Layout::NCHW) return kExec[int(args.step.op)](args);
    struct Copy {
      void* data; ///< The channels-last tensor
      const Shape* shape;
      Shape nchw;
      std::vector<unsigned char> buf;
      int64_t elem;
    };
    std::vector<std::unique_ptr<Copy>> copies; // views of one tensor share a copy
    auto toFirst = [&](cpu::TensorView& v) -> Copy* {
      if (v.rank() != 4) return nullptr;
      for (auto& c : copies)
        if (c->data == v.data) return v.data = c->buf.data(), v.shape = &c->nchw, c.get();
      auto& c = copies.emplace_back(std::make_unique<Copy>());
      c->data = v.data;
      c->shape = v.shape;
      c->nchw = channelsFirstShape(*v.shape);
      c->elem = dtypeSize(v.dtype);
      c->buf.resize(size_t(v.numel() * c->elem));
      permuteChannels(v.data, c->buf.data(), *v.shape, c->elem, false);
      v.data = c->buf.data();
      v.shape = &c->nchw;
      return c.get();
    };
    for (auto& v : args.in) toFirst(v);
    std::vector<Copy*> results;
    for (auto& v : args.out)
      if (Copy* c = toFirst(v)) results.push_back(c);
    HGP_TRY(kExec[int(args.step.op)](args));
    for (Copy* c : results) permuteChannels(c->buf.data(), c->data, c->nchw, c->elem, true);
    return Status::ok();
  }

  /// Copies tensor `t` (stored at `at`) to dense `dense` (`toDense`) or back, row by row when
  /// it is pitched.
  static void copyPitched(const PlanTensor& t, void* at, void* dense, bool toDense) {
    if (!t.pitched()) {
      std::memcpy(toDense ? dense : at, toDense ? at : dense, size_t(t.bytes()));
      return;
    }
    int64_t e = dtypeSize(t.type.dtype), rows = t.type.numElements() / t.row;
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* s = static_cast<uint8_t*>(at) + r * t.pitch * e;
      uint8_t* d = static_cast<uint8_t*>(dense) + r * t.row * e;
      std::memcpy(toDense ? d : s, toDense ? s : d, size_t(t.row * e));
    }
  }

  /// Points `v` at a dense copy of tensor `i` when it is pitched (one copy per tensor a step).
  void gather(int i, cpu::TensorView& v) {
    const PlanTensor& t = plan_->tensors[size_t(i)];
    if (!t.pitched()) return;
    for (Gathered& g : gathered_)
      if (g.tensor == i) return void(v.data = g.buf.data());
    Gathered& g = gathered_.emplace_back();
    g.tensor = i;
    g.buf.resize(size_t(t.bytes()));
    copyPitched(t, address(i), g.buf.data(), true);
    v.data = g.buf.data();
  }

  /// The view of tensor `i` as this step's executor saw it (its dense copy when pitched).
  cpu::TensorView stored(int i) const {
    cpu::TensorView v = views_[size_t(i)];
    for (const Gathered& g : gathered_)
      if (g.tensor == i) v.data = const_cast<uint8_t*>(g.buf.data());
    return v;
  }

  /// Writes the step's pitched results back from their dense copies.
  void scatter(const std::vector<int>& outputs) {
    for (int o : outputs)
      for (Gathered& g : gathered_)
        if (g.tensor == o) copyPitched(plan_->tensors[size_t(o)], address(o), g.buf.data(), false);
  }

  static Status allocate(std::unique_ptr<uint8_t, FreeDeleter>& buf, int64_t bytes) {
    size_t n = size_t((bytes + 63) / 64 * 64);
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, n ? n : 64)));
    if (!buf)
      return makeError(ErrorCode::OutOfMemory, "cannot allocate %lld bytes of host memory",
                       (long long)bytes);
    return Status::ok();
  }

  uint8_t* address(int i) const {
    const PlanTensor& t = plan_->tensors[size_t(i)];
    return (t.storage == StorageClass::Persistent ? persistent_.get() : transient_.get()) + t.offset;
  }

  static bool touchesHalf(const cpu::KernelArgs& a) {
    for (const auto& v : a.in)
      if (isHalfDType(v.dtype)) return true;
    for (const auto& v : a.out)
      if (isHalfDType(v.dtype)) return true;
    return false;
  }

  /// A float32 copy of a 16-bit tensor for the current step (views of the same bytes share it,
  /// so in-place results and accumulate=1 see the stored value); other tensors pass through.
  cpu::TensorView widen(const cpu::TensorView& v) {
    if (!isHalfDType(v.dtype)) return v;
    for (Widened& w : widened_)
      if (w.src == v.data && w.n == v.numel()) return {DType::F32, v.shape, w.buf.data(), v.dtype};
    Widened& w = widened_.emplace_back();
    w.src = v.data;
    w.n = v.numel();
    w.dtype = v.dtype;
    w.buf.resize(size_t(w.n));
    const uint16_t* src = v.as<uint16_t>();
    float* dst = w.buf.data();
    cpu::parallelElementwise(w.n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = loadHalf(v.dtype, src, i);
    });
    return {DType::F32, v.shape, w.buf.data(), v.dtype};
  }

  /// Rounds the float32 result for a 16-bit tensor back into its storage.
  void narrow(const cpu::TensorView& v) {
    if (!isHalfDType(v.dtype)) return;
    for (Widened& w : widened_) {
      if (w.src != v.data || w.n != v.numel() || w.narrowed) continue;
      w.narrowed = true;
      uint16_t* dst = v.as<uint16_t>();
      const float* src = w.buf.data();
      cpu::parallelElementwise(w.n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) storeHalf(v.dtype, dst, i, src[i]);
      });
    }
  }

  struct Widened {
    void* src = nullptr;
    int64_t n = 0;
    DType dtype = DType::F32;
    bool narrowed = false;
    std::vector<float> buf;
  };
  std::vector<Widened> widened_;
  struct Gathered {
    int tensor = -1;
    std::vector<uint8_t> buf;
  };
  std::vector<Gathered> gathered_;

  const Plan* plan_ = nullptr;
  std::unique_ptr<uint8_t, FreeDeleter> persistent_, transient_;
  std::vector<cpu::TensorView> views_;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace hgp
