// FusedOps.cpp - the CPU executor for FusedElementwise (runtime/plan/FusedProgram.h).
//
// It evaluates the program element by element in float32, with each instruction computed by
// evalFusedInstr (the unfused executors' formulas) and rounded to its dtype when that dtype is
// 16-bit, exactly where the unfused op stored a 16-bit tensor. Inputs and results keep their own
// storage dtype (the backend does not widen this step), so a fused plan gives the same bits as
// the unfused plan it came from. A Dropout or DropoutBwd instruction draws the element's uniform
// with dropoutUniform (the unfused executor's) from its flat index and the value of its counter
// input (an i64 scalar, read once per step). A broadcast input (a squeeze-excitation gate) is
// read through its FusedOperandMap.
#include "runtime/cpu/KernelUtil.h"
#include "runtime/plan/FusedProgram.h"
#include "runtime/plan/Half.h"

namespace hgp::cpu {

namespace {

float load(const TensorView& v, int64_t i) {
  return v.dtype == DType::F32 ? v.f32()[i] : loadHalf(v.dtype, v.as<uint16_t>(), i);
}

void store(const TensorView& v, int64_t i, float x) {
  if (v.dtype == DType::F32) v.f32()[i] = x;
  else storeHalf(v.dtype, v.as<uint16_t>(), i, x);
}

/// x as stored in a tensor of dtype t, read back as float.
float roundTo(DType t, float x) {
  if (t == DType::BF16) return bf16ToFloat(floatToBf16(x));
  if (t == DType::F16) return halfToFloat(floatToHalf(x));
  return x;
}

} // namespace

Status execFusedElementwise(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, SIZE_MAX));
  Expected<FusedProgram> parsed = parseFusedProgram(a.attrs(), int(a.in.size()));
  if (!parsed) return a.fail(parsed.status().message());
  const FusedProgram& p = *parsed;
  std::vector<DType> in;
  for (const auto& v : a.in) in.push_back(v.dtype);
  Expected<std::vector<DType>> types = checkFusedTypes(p, in);
  if (!types) return a.fail(types.status().message());
  if (p.results.size() != a.out.size()) return a.fail("result count differs from the program's");
  const Shape& shape = *a.out[0].shape;
  std::vector<uint64_t> counter(a.in.size(), 0); // the value of each i64 (counter) input
  std::vector<FusedOperandMap> maps(a.in.size());
  for (size_t k = 0; k < a.in.size(); ++k) {
    const TensorView& v = a.in[k];
    if (v.dtype == DType::I64) {
      HGP_TRY(checkScalar(a, v, DType::I64, "the dropout counter"));
      counter[k] = uint64_t(v.as<int64_t>()[0]);
    } else {
      Expected<FusedOperandMap> m = fusedOperandMap(*v.shape, shape);
      if (!m) return a.fail(m.status().message());
      maps[k] = *m;
    }
  }
  if (Status st = checkFusedBroadcasts(p, maps); !st) return a.fail(st.message());
  for (size_t r = 0; r < a.out.size(); ++r) {
    if (*a.out[r].shape != shape) return a.fail("results differ in shape");
    if (a.out[r].dtype != (*types)[size_t(p.results[r])]) return a.fail("result dtype mismatch");
  }
  int64_t n = numElements(shape);
  parallelElementwise(n, [&](int64_t b, int64_t e) {
    std::vector<float> val(size_t(p.numValues())), args;
    for (int64_t i = b; i < e; ++i) {
      for (int k = 0; k < p.numInputs; ++k)
        if (a.in[size_t(k)].dtype != DType::I64)
          val[size_t(k)] = load(a.in[size_t(k)], maps[size_t(k)].index(i));
      for (size_t k = 0; k < p.instrs.size(); ++k) {
        const FusedInstr& ins = p.instrs[k];
        args.clear();
        for (int x : ins.args) args.push_back(val[size_t(x)]);
        if (isFusedDropout(ins.op)) // the draw in place of the counter
          args[1] = dropoutUniform(uint64_t(ins.seed), uint64_t(ins.key),
                                   counter[size_t(ins.args[1])], uint64_t(i));
        val[size_t(p.numInputs) + k] = roundTo(ins.dtype, evalFusedInstr(ins, args.data()));
      }
      // Every operand was read above, so results may share storage with inputs.
      for (size_t r = 0; r < a.out.size(); ++r) store(a.out[r], i, val[size_t(p.results[r])]);
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
