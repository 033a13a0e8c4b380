#include "runtime/plan/FusedProgram.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace hgp {

namespace {

/// Operand counts of the fusible ops: OpList.def's MaxIn (Sum: 1 or more, written as -1; a
/// dropout's value and its iteration counter).
int arity(OpKind op) { return opTraits(op).maxInputs; }

/// A float printed so that it reads back as the same float.
std::string floatText(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(f));
  return buf;
}

/// The shortest text that reads back as the same double (0.5, not 0.50000000000000000).
std::string doubleText(double d) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

/// Parses a dropout attribute (ratio, seed or key) into `ins`; false when `key` is not one.
bool parseDropoutAttr(const std::string& key, const char* text, FusedInstr& ins, bool& ok) {
  char* end = nullptr;
  errno = 0;
  if (key == "ratio") ins.ratio = std::strtod(text, &end);
  else if (key == "seed") ins.seed = std::strtoll(text, &end, 10);
  else if (key == "key") ins.key = std::strtoll(text, &end, 10);
  else return false;
  ok = end != text && !*end && errno != ERANGE;
  return true;
}

Status bad(const std::string& m) { return Status(ErrorCode::InvalidModel, "fused program: " + m); }

} // namespace

bool isFusedDropout(OpKind op) { return op == OpKind::Dropout || op == OpKind::DropoutBwd; }

FusedDropout fusedDropout(const FusedInstr& ins) {
  FusedDropout d;
  d.threshold = float(ins.ratio);
  d.scale = float(1.0 / (1.0 - ins.ratio));
  d.philoxKey = uint64_t(ins.seed) ^ (uint64_t(ins.key) * 0x9E3779B97F4A7C15ull);
  return d;
}

std::string FusedProgram::text() const {
  std::string out;
  for (size_t k = 0; k < instrs.size(); ++k) {
    const FusedInstr& ins = instrs[k];
    if (k) out += "; ";
    out += std::string(opName(ins.op)) + " " + dtypeName(ins.dtype);
    for (int a : ins.args) out += " %" + std::to_string(a);
    if (opHas(ins.op, OpFlag::FusedAlpha)) out += " alpha=" + floatText(ins.alpha);
    if (opHas(ins.op, OpFlag::FusedBeta)) out += " beta=" + floatText(ins.beta);
    if (ins.hasLo) out += " min=" + floatText(ins.lo);
    if (ins.hasHi) out += " max=" + floatText(ins.hi);
    if (opHas(ins.op, OpFlag::FusedApprox)) out += ins.tanhForm ? " approximate=tanh" : " approximate=none";
    if (opHas(ins.op, OpFlag::FusedCount)) out += " count=" + std::to_string(ins.count);
    if (isFusedDropout(ins.op))
      out += " ratio=" + doubleText(ins.ratio) + " seed=" + std::to_string(ins.seed) +
             " key=" + std::to_string(ins.key);
  }
  return out;
}

void FusedProgram::store(AttrMap& attrs) const {
  attrs.setString("program", text());
  attrs.setInts("results", std::vector<int64_t>(results.begin(), results.end()));
}

Expected<FusedProgram> parseFusedProgram(const AttrMap& attrs, int numInputs) {
  FusedProgram p;
  p.numInputs = numInputs;
  std::string text = attrs.getString("program");
  if (text.empty()) return bad("the 'program' attribute is missing or empty");
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ';')) {
    std::istringstream ws(item);
    std::string opText, dt, tok;
    if (!(ws >> opText >> dt)) return bad("instruction '" + item + "' needs an op and a dtype");
    FusedInstr ins;
    Expected<OpKind> op = parseOpKind(opText);
    if (!op || !opHas(*op, OpFlag::Fusible)) return bad("'" + opText + "' is not a fusible op");
    ins.op = *op;
    Expected<DType> d = parseDType(dt);
    if (!d) return bad("bad dtype '" + dt + "'");
    ins.dtype = *d;
    int self = p.numValues();
    std::set<std::string> seen; // keyword attributes given (dropout's, approximate, count)
    while (ws >> tok) {
      if (tok[0] == '%') {
        char* end = nullptr;
        long v = std::strtol(tok.c_str() + 1, &end, 10);
        if (*end || v < 0 || v >= self)
          return bad("operand " + tok + " of instruction " + std::to_string(p.instrs.size()) +
                     " is not an earlier value");
        ins.args.push_back(int(v));
        continue;
      }
      size_t eq = tok.find('=');
      if (eq == std::string::npos) return bad("unexpected '" + tok + "'");
      std::string key = tok.substr(0, eq);
      bool ok = false;
      if (isFusedDropout(ins.op) && parseDropoutAttr(key, tok.c_str() + eq + 1, ins, ok)) {
        if (!ok || !seen.insert(key).second) return bad("bad or repeated '" + tok + "'");
        continue;
      }
      std::string val = tok.substr(eq + 1);
      if (key == "approximate" && opHas(ins.op, OpFlag::FusedApprox)) {
        if (val != "none" && val != "tanh") return bad("bad '" + tok + "' (none or tanh)");
        if (!seen.insert(key).second) return bad("repeated '" + tok + "'");
        ins.tanhForm = val == "tanh";
        continue;
      }
      if (key == "count" && opHas(ins.op, OpFlag::FusedCount)) {
        char* end = nullptr;
        errno = 0;
        ins.count = std::strtoll(val.c_str(), &end, 10);
        if (end == val.c_str() || *end || errno == ERANGE || ins.count < 1 || !seen.insert(key).second)
          return bad("bad or repeated '" + tok + "' (a count of 1 or more)");
        continue;
      }
      char* end = nullptr;
      float f = std::strtof(tok.c_str() + eq + 1, &end);
      if (*end) return bad("bad number in '" + tok + "'");
      if (key == "alpha" && opHas(ins.op, OpFlag::FusedAlpha)) ins.alpha = f;
      else if (key == "beta" && opHas(ins.op, OpFlag::FusedBeta)) ins.beta = f;
      else if (key == "min" && opHas(ins.op, OpFlag::FusedBounds)) ins.hasLo = true, ins.lo = f;
      else if (key == "max" && opHas(ins.op, OpFlag::FusedBounds)) ins.hasHi = true, ins.hi = f;
      else return bad("unexpected attribute '" + tok + "' for " + opText);
    }
    int n = arity(ins.op);
    if ((n > 0 && int(ins.args.size()) != n) || ins.args.empty())
      return bad(opText + " has " + std::to_string(ins.args.size()) + " operands");
    if (opHas(ins.op, OpFlag::FusedAlpha) && item.find("alpha=") == std::string::npos)
      return bad(opText + " needs alpha");
    if (opHas(ins.op, OpFlag::FusedBeta) && item.find("beta=") == std::string::npos)
      return bad(opText + " needs beta");
    if (opHas(ins.op, OpFlag::FusedApprox) && !seen.count("approximate"))
      return bad(opText + " needs approximate");
    if (opHas(ins.op, OpFlag::FusedCount) && !seen.count("count")) return bad(opText + " needs count");
    if (isFusedDropout(ins.op) && seen.size() != 3)
      return bad(opText + " needs ratio, seed and key");
    if (isFusedDropout(ins.op) && !(ins.ratio >= 0 && ins.ratio < 1))
      return bad(opText + " ratio " + doubleText(ins.ratio) + " is not in [0, 1)");
    p.instrs.push_back(std::move(ins));
  }
  if (p.instrs.empty()) return bad("no instructions");
  for (int64_t r : attrs.getInts("results")) {
    if (r < 0 || r >= p.numValues()) return bad("result %" + std::to_string(r) + " is undefined");
    p.results.push_back(int(r));
  }
  if (p.results.empty()) return bad("the 'results' attribute is missing or empty");
  return p;
}

Expected<std::vector<DType>> checkFusedTypes(const FusedProgram& p, const std::vector<DType>& in) {
  if (int(in.size()) != p.numInputs) return bad("input count mismatch");
  auto isFloat = [](DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; };
  std::vector<DType> t = in;
  std::vector<bool> counterRead(in.size(), false);
  for (DType d : in)
    if (!isFloat(d) && d != DType::I64)
      return bad(std::string("input of dtype ") + dtypeName(d) + " (float, or an i64 counter)");
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& ins = p.instrs[k];
    if (!isFloat(ins.dtype)) return bad("instruction dtype must be f32, bf16 or f16");
    for (size_t j = 0; j < ins.args.size(); ++j) {
      int a = ins.args[j];
      if (isFusedDropout(ins.op) && j == 1) {
        if (a >= p.numInputs || t[size_t(a)] != DType::I64)
          return bad(std::string(opName(ins.op)) + "'s counter %" + std::to_string(a) +
                     " is not an i64 input");
        counterRead[size_t(a)] = true;
        continue;
      }
      if (t[size_t(a)] == DType::I64)
        return bad(std::string(opName(ins.op)) + " reads the i64 counter %" + std::to_string(a) +
                   " as a value");
      if (ins.op != OpKind::Cast && t[size_t(a)] != ins.dtype)
        return bad(std::string(opName(ins.op)) + " " + dtypeName(ins.dtype) + " reads %" +
                   std::to_string(a) + " of dtype " + dtypeName(t[size_t(a)]));
    }
    t.push_back(ins.dtype);
  }
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] == DType::I64 && !counterRead[k])
      return bad("i64 input %" + std::to_string(k) + " is no dropout's counter");
  for (int r : p.results)
    if (t[size_t(r)] == DType::I64) return bad("result %" + std::to_string(r) + " is a counter");
  return t;
}

Expected<FusedOperandMap> fusedOperandMap(const Shape& in, const Shape& out) {
  FusedOperandMap m;
  if (in == out) return m;
  auto fail = [&] {
    return Status(ErrorCode::InvalidModel, "fused program: an input of shape " + shapeToString(in) +
                                               " neither has the result shape " + shapeToString(out) +
                                               " nor broadcasts to it along at most two runs of dims");
  };
  if (in.size() > out.size()) return fail();
  Shape p(out.size() - in.size(), 1); // numpy's leading 1s
  p.insert(p.end(), in.begin(), in.end());
  // The runs of broadcast dims (1 in p, more in out); a dim of 1 in both extends an open run.
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t j = 0; j < p.size(); ++j) {
    if (p[j] == out[j]) {
      if (out[j] == 1 && !runs.empty() && runs.back().second == j) runs.back().second = j + 1;
      continue;
    }
    if (p[j] != 1) return fail();
    if (!runs.empty() && runs.back().second == j) runs.back().second = j + 1;
    else runs.push_back({j, j + 1});
  }
  auto prod = [&](size_t lo, size_t hi) {
    int64_t v = 1;
    for (size_t j = lo; j < hi; ++j) v *= out[j];
    return v;
  };
  bool lead = !runs.empty() && runs[0].first == 0;
  if (runs.empty() || runs.size() > 2 || (runs.size() == 2 && !lead)) return fail();
  if (lead && runs.size() == 1) { // per-channel rows: element i % k
    m.k = prod(runs[0].second, out.size());
    m.bk = m.k;
    m.m = 1;
  } else {
    auto [lo, hi] = runs.back();
    m.k = prod(hi, out.size());
    m.bk = m.k * prod(lo, hi);
    if (lead) m.m = prod(runs[0].second, lo);
  }
  if (m.bk <= 0 || m.k <= 0 || m.m < 0) return fail();
  return m;
}

Status checkFusedBroadcasts(const FusedProgram& p, const std::vector<FusedOperandMap>& maps) {
  if (int(maps.size()) != p.numInputs) return bad("input count mismatch");
  for (const FusedInstr& ins : p.instrs)
    for (int a : ins.args)
      if (a < p.numInputs && maps[size_t(a)].broadcast() && !opHas(ins.op, OpFlag::FusedBroadcast))
        return bad(std::string(opName(ins.op)) + " reads the broadcast input %" + std::to_string(a));
  for (int r : p.results)
    if (r < p.numInputs && maps[size_t(r)].broadcast())
      return bad("result %" + std::to_string(r) + " is a broadcast input");
  return Status::ok();
}

float evalFusedInstr(const FusedInstr& ins, const float* a) {
  switch (ins.op) {
  case OpKind::Add: return a[0] + a[1];
  case OpKind::Sub: return a[0] - a[1];
  case OpKind::Mul: return a[0] * a[1];
  case OpKind::Div: return a[0] / a[1];
  case OpKind::Sum: {
    float acc = a[0];
    for (size_t i = 1; i < ins.args.size(); ++i) acc = acc + a[i];
    return acc;
  }
  case OpKind::Relu: return a[0] > 0.f ? a[0] : (std::isnan(a[0]) ? a[0] : 0.f);
  case OpKind::LeakyRelu: return a[0] > 0.f ? a[0] : a[0] * ins.alpha;
  case OpKind::Clip: {
    float lo = ins.hasLo ? ins.lo : -INFINITY, hi = ins.hasHi ? ins.hi : INFINITY;
    return a[0] < lo ? lo : (a[0] > hi ? hi : a[0]);
  }
  case OpKind::Neg: return -a[0];
  case OpKind::Scale: return ins.alpha * a[0];
  case OpKind::ReluBwd: return a[1] > 0.f ? a[0] : 0.f;
  case OpKind::LeakyReluBwd: return a[1] > 0.f ? a[0] : a[0] * ins.alpha;
  case OpKind::ClipBwd: {
    float lo = ins.hasLo ? ins.lo : -INFINITY, hi = ins.hasHi ? ins.hi : INFINITY;
    return (a[1] > lo && a[1] < hi) ? a[0] : 0.f;
  }
  case OpKind::Cast: return a[0];
  // The activations, exactly as runtime/cpu/ActivationOps.cpp computes them.
  case OpKind::Sigmoid: return 1.f / (1.f + std::exp(-a[0]));
  case OpKind::Tanh: return std::tanh(a[0]);
  case OpKind::HardSigmoid: {
    float v = ins.alpha * a[0] + ins.beta;
    return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
  }
  case OpKind::HardSwish: {
    float r = a[0] + 3.f;
    r = r < 0.f ? 0.f : (r > 6.f ? 6.f : r);
    return a[0] * r / 6.f;
  }
  case OpKind::Silu: return a[0] / (1.f + std::exp(-a[0]));
  case OpKind::Erf: return std::erf(a[0]);
  case OpKind::Exp: return std::exp(a[0]);
  case OpKind::Log: return std::log(a[0]);
  case OpKind::Sqrt: return std::sqrt(a[0]);
  case OpKind::Reciprocal: return 1.f / a[0];
  case OpKind::Gelu:
    if (ins.tanhForm) {
      constexpr float beta = 0.7978845608028654f, kappa = 0.044715f; // sqrt(2/pi)
      return 0.5f * a[0] * (1.f + std::tanh(beta * (a[0] + kappa * a[0] * a[0] * a[0])));
    }
    return 0.5f * a[0] * std::erfc(-a[0] * float(M_SQRT1_2));
  case OpKind::GeluBwd: {
    const float x = a[1];
    if (ins.tanhForm) {
      constexpr float beta = 0.7978845608028654f, kappa = 0.044715f;
      float inner = beta * (x + kappa * x * x * x), t = std::tanh(inner);
      float dinner = beta * (1.f + 3.f * kappa * x * x);
      return a[0] * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner);
    }
    float cdf = 0.5f * std::erfc(-x * float(M_SQRT1_2));
    float pdf = std::exp(-0.5f * x * x) * 0.3989422804014327f; // 1 / sqrt(2 pi)
    return a[0] * (cdf + x * pdf);
  }
  case OpKind::GlobalAveragePoolBwd: return a[0] / float(ins.count);
  case OpKind::SigmoidBwd: return a[0] * a[1] * (1.f - a[1]);
  case OpKind::TanhBwd: return a[0] * (1.f - a[1] * a[1]);
  case OpKind::HardSigmoidBwd: {
    float v = ins.alpha * a[1] + ins.beta;
    return (v > 0.f && v < 1.f) ? ins.alpha * a[0] : 0.f;
  }
  case OpKind::HardSwishBwd:
    if (a[1] < -3.f) return 0.f;
    if (a[1] <= 3.f) return a[0] * (a[1] / 3.f + 0.5f);
    return a[0];
  case OpKind::SiluBwd: {
    float s = 1.f / (1.f + std::exp(-a[1]));
    return a[0] * s * (1.f + a[1] * (1.f - s));
  }
  case OpKind::Dropout: case OpKind::DropoutBwd: {
    if (ins.ratio == 0) return a[0]; // the unfused op copies its input
    FusedDropout d = fusedDropout(ins);
    return a[1] >= d.threshold ? a[0] * d.scale : 0.f;
  }
  default: return NAN;
  }
}

int fusedVectorWidth(const std::vector<DType>& tensorTypes) {
  for (DType t : tensorTypes)
    if (t == DType::F32) return 4; // i64 (the counter) does not count; bf16 and f16 allow 8
  return 8;
}

std::string fusedSummary(const FusedProgram& p) {
  std::string s;
  for (const FusedInstr& ins : p.instrs) s += (s.empty() ? "" : "+") + std::string(opName(ins.op));
  return s;
}

} // namespace hgp
