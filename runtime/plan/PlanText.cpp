// PlanText.cpp - the plan's text form: printer, parser and validation.
#include "runtime/plan/Plan.h"

#include "runtime/support/TextScanner.h"

#include <algorithm>

#include <cstring>

namespace hgp {

int Plan::findTensor(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return int(i);
  return -1;
}

const PlanProgram* Plan::findProgram(const std::string& name) const {
  for (const auto& p : programs)
    if (p.name == name) return &p;
  return nullptr;
}

const PlanKernel* Plan::findKernel(const std::string& name) const {
  for (const PlanKernel& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

int Plan::binding(const std::string& name) const {
  auto it = bindings.find(name);
  return it == bindings.end() ? -1 : it->second;
}

Status Plan::validate() const {
  auto bad = [](const std::string& m) { return Status(ErrorCode::InvalidModel, "plan: " + m); };
  for (const auto& t : tensors) {
    for (int64_t d : t.type.shape)
      if (d <= 0) return bad("tensor '" + t.name + "' has a non-positive dim");
    int64_t region = t.storage == StorageClass::Persistent ? persistentBytes : transientBytes;
    // A pitched view (a channel range) needs only a vector's alignment; other tensors 64 bytes.
    if (t.offset < 0 || t.offset % (t.pitched() ? 16 : 64) != 0 || t.offset + t.spanBytes() > region)
      return bad("tensor '" + t.name + "' lies outside its storage region or is misaligned");
    if ((t.init == InitKind::Data || t.init == InitKind::File) && t.dataOffset < 0)
      return bad("tensor '" + t.name + "' has no data offset");
    if (t.init != InitKind::None && t.storage != StorageClass::Persistent)
      return bad("tensor '" + t.name + "' is initialized but transient");
  }
  auto inRange = [&](int i) { return i >= 0 && i < int(tensors.size()); };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlanTensor& t = tensors[i];
    if (t.alias == AliasKind::None) continue;
    if (!inRange(t.aliasOf) || t.aliasOf == int(i))
      return bad("tensor '" + t.name + "' is a view of a tensor out of range");
    const PlanTensor& p = tensors[size_t(t.aliasOf)];
    if (p.storage != t.storage || t.offset < p.offset ||
        t.offset + t.spanBytes() > p.offset + p.spanBytes())
      return bad("tensor '" + t.name + "' is a view of '" + p.name + "' but lies outside its bytes");
  }
  std::vector<bool> pitched(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlanTensor& t = tensors[i];
    if (!t.pitched()) continue;
    pitched[i] = true;
    if (t.alias == AliasKind::None)
      return bad("tensor '" + t.name + "' is pitched but is no view");
    if (t.row <= 0 || t.pitch < t.row || t.type.numElements() % t.row != 0)
      return bad("tensor '" + t.name + "' has a pitch that does not fit its shape");
  }
  for (const auto& p : programs) {
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const PlanStep& s = p.steps[k];
      const OpTraits& tr = opTraits(s.op);
      if (s.stream < 0 || s.stream >= kMaxPlanStreams)
        return bad("step '" + s.loc + "' names stream " + std::to_string(s.stream) +
                   " (streams are 0.." + std::to_string(kMaxPlanStreams - 1) + ")");
      for (int w : s.waits)
        if (w < 0 || size_t(w) >= k || p.steps[size_t(w)].stream == s.stream)
          return bad("step '" + s.loc + "' waits for step " + std::to_string(w) +
                     ", which is not an earlier step on another stream");
      int ni = int(s.inputs.size()), no = int(s.outputs.size());
      if (ni < tr.minInputs || (tr.maxInputs >= 0 && ni > tr.maxInputs) || no < tr.minOutputs ||
          (tr.maxOutputs >= 0 && no > tr.maxOutputs))
        return bad(std::string("step ") + tr.name + " '" + s.loc + "' has a wrong operand count");
      for (int i : s.inputs)
        if (!inRange(i)) return bad("step '" + s.loc + "' reads a tensor out of range");
      for (int i : s.outputs)
        if (!inRange(i)) return bad("step '" + s.loc + "' writes a tensor out of range");
      for (int io = 0; io < 2; ++io) {
        const std::vector<int>& operands = io ? s.outputs : s.inputs;
        for (size_t j = 0; j < operands.size(); ++j)
          if (pitched[size_t(operands[j])] && !acceptsPitched(s.op, s.attrs, ni, io, int(j)))
            return bad(std::string("step ") + tr.name + " '" + s.loc + "' " +
                       (io ? "writes" : "reads") + " pitched tensor '" +
                       tensors[size_t(operands[j])].name + "', which its op does not accept there");
      }
      if (s.attrs.has("kernel") && !findKernel(s.attrs.getString("kernel")))
        return bad("step '" + s.loc + "' names kernel '" + s.attrs.getString("kernel") +
                   "', which the plan does not have");
      for (int o = 0; o < no; ++o) {
        int in = opTraits(s.op).inPlaceInput(o);
        if (in < 0 || in >= ni) continue;
        // A result written into persistent storage must be the update of the state it read;
        // a transient result (a forward-only plan returning new statistics) may live anywhere.
        const PlanTensor &a = tensors[size_t(s.inputs[size_t(in)])],
                         &b = tensors[size_t(s.outputs[size_t(o)])];
        if (b.storage == StorageClass::Persistent &&
            (a.storage != b.storage || a.offset != b.offset))
          return bad(std::string("in-place step ") + tr.name + " '" + s.loc +
                     "' writes persistent state other than its input");
      }
    }
  }
  for (const auto& [name, idx] : bindings)
    if (!inRange(idx)) return bad("binding '" + name + "' is out of range");
  return Status::ok();
}

namespace {

const char* initName(InitKind k) {
  switch (k) {
  case InitKind::None: return "";
  case InitKind::Zero: return "zero";
  case InitKind::Fill: return "fill";
  case InitKind::Data: return "data";
  case InitKind::File: return "file";
  }
  return "";
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::vector<uint8_t>& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = uint32_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint32_t(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= in[i + 2];
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

bool unbase64(const std::string& in, std::vector<uint8_t>& out) {
  if (in.size() % 4) return false;
  out.clear();
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + size_t(k)];
      const char* p = c == '=' ? nullptr : std::strchr(kBase64, c);
      if (c == '=') ++pad;
      else if (!p || !c || pad) return false;
      v = v << 6 | uint32_t(p ? p - kBase64 : 0);
    }
    out.push_back(uint8_t(v >> 16));
    if (pad < 2) out.push_back(uint8_t(v >> 8));
    if (pad < 1) out.push_back(uint8_t(v));
  }
  return true;
}

void appendTensorRef(std::string& out, const Plan& plan, int idx) {
  out += '%';
  appendName(out, plan.tensors[size_t(idx)].name);
}

} // namespace

std::string printPlan(const Plan& plan) {
  std::string out = "hgpc-plan " + std::to_string(Plan::kVersion) + "\n";
  out += "model ";
  appendQuoted(out, plan.modelName);
  out += "\n";
  if (!plan.meta.empty()) out += "meta " + plan.meta.toString() + "\n";
  out += "storage persistent " + std::to_string(plan.persistentBytes) + " transient " +
         std::to_string(plan.transientBytes) + "\n";
  for (const auto& t : plan.tensors) {
    out += "tensor %";
    appendName(out, t.name);
    out += std::string(" ") + roleName(t.role) + " " + typeToString(t.type) + " @";
    out += t.storage == StorageClass::Persistent ? 'p' : 't';
    out += std::to_string(t.offset);
    if (t.init == InitKind::Fill) out += " fill=" + formatDouble(t.fillValue);
    else if (t.init == InitKind::Data || t.init == InitKind::File)
      out += std::string(" ") + initName(t.init) + "=" + std::to_string(t.dataOffset);
    else if (t.init != InitKind::None) out += std::string(" ") + initName(t.init);
    if (t.alias != AliasKind::None) {
      out += t.alias == AliasKind::View ? " view=" : " part=";
      appendTensorRef(out, plan, t.aliasOf);
    }
    if (t.pitched()) out += " row=" + std::to_string(t.row) + " pitch=" + std::to_string(t.pitch);
    out += "\n";
  }
  for (const auto& [name, idx] : plan.bindings) {
    out += "bind ";
    appendName(out, name);
    out += ' ';
    appendTensorRef(out, plan, idx);
    out += "\n";
  }
  for (const PlanKernel& k : plan.kernels) {
    AttrMap a;
    a.setInt("arch", k.arch);
    a.setString("entry", k.entry);
    a.setString("source", k.source);
    a.setString("cubin", base64(k.cubin));
    out += "kernel ";
    appendName(out, k.name);
    out += " " + a.toString() + "\n";
  }
  for (const auto& p : plan.programs) {
    out += "program ";
    appendName(out, p.name);
    out += " {\n";
    for (const auto& s : p.steps) {
      out += "  ";
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        if (i) out += ", ";
        appendTensorRef(out, plan, s.outputs[i]);
      }
      out += std::string(" = ") + opName(s.op) + "(";
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        if (i) out += ", ";
        appendTensorRef(out, plan, s.inputs[i]);
      }
      out += ")";
      if (!s.attrs.empty()) out += " " + s.attrs.toString();
      if (s.stream != 0) out += " stream=" + std::to_string(s.stream);
      for (size_t i = 0; i < s.waits.size(); ++i)
        out += (i ? "," : " waits=") + std::to_string(s.waits[i]);
      if (!s.loc.empty()) {
        out += " loc(";
        appendQuoted(out, s.loc);
        out += ")";
      }
      out += "\n";
    }
    out += "}\n";
  }
  return out;
}

namespace {

class PlanParser {
public:
  PlanParser(std::string_view text, const std::string& source) : s_(text, source) {}

  Expected<Plan> parse() {
    HGP_TRY(s_.expectWord("hgpc-plan"));
    HGP_ASSIGN_OR_RETURN(int64_t version, s_.integer());
    if (version != Plan::kVersion)
      return s_.error("plan version " + std::to_string(version) + " is not supported (expected " +
                      std::to_string(Plan::kVersion) + ")");
    while (!s_.atEnd()) {
      HGP_ASSIGN_OR_RETURN(std::string kw, s_.word());
      if (kw == "model") {
        HGP_ASSIGN_OR_RETURN(plan_.modelName, s_.quoted());
      } else if (kw == "meta") {
        HGP_ASSIGN_OR_RETURN(plan_.meta, AttrMap::parse(s_));
      } else if (kw == "storage") {
        HGP_TRY(s_.expectWord("persistent"));
        HGP_ASSIGN_OR_RETURN(plan_.persistentBytes, s_.integer());
        HGP_TRY(s_.expectWord("transient"));
        HGP_ASSIGN_OR_RETURN(plan_.transientBytes, s_.integer());
      } else if (kw == "tensor") {
        HGP_TRY(parseTensor());
      } else if (kw == "bind") {
        HGP_ASSIGN_OR_RETURN(std::string name, s_.peek() == '"' ? s_.quoted() : s_.word());
        HGP_ASSIGN_OR_RETURN(int idx, tensorRef());
        plan_.bindings[name] = idx;
      } else if (kw == "kernel") {
        PlanKernel k;
        HGP_ASSIGN_OR_RETURN(k.name, s_.peek() == '"' ? s_.quoted() : s_.word());
        HGP_ASSIGN_OR_RETURN(AttrMap a, AttrMap::parse(s_));
        k.arch = int(a.getInt("arch"));
        k.entry = a.getString("entry");
        k.source = a.getString("source");
        if (!unbase64(a.getString("cubin"), k.cubin) || k.cubin.empty() || k.entry.empty())
          return s_.error("kernel " + k.name + " has no valid cubin or entry");
        plan_.kernels.push_back(std::move(k));
      } else if (kw == "program") {
        HGP_TRY(parseProgram());
      } else {
        return s_.error("unexpected '" + kw + "'");
      }
    }
    for (const auto& [tensor, name] : aliasNames_) {
      auto it = index_.find(name);
      if (it == index_.end())
        return Status(ErrorCode::InvalidModel, "plan: tensor %" + plan_.tensors[size_t(tensor)].name +
                                                   " is a view of unknown tensor %" + name);
      plan_.tensors[size_t(tensor)].aliasOf = it->second;
    }
    HGP_TRY(plan_.validate());
    return std::move(plan_);
  }

private:
  Expected<int> tensorRef() {
    HGP_ASSIGN_OR_RETURN(std::string name, s_.percentName());
    auto it = index_.find(name);
    if (it == index_.end()) return s_.error("unknown tensor %" + name);
    return it->second;
  }

  Status parseTensor() {
    PlanTensor t;
    HGP_ASSIGN_OR_RETURN(t.name, s_.percentName());
    if (index_.count(t.name)) return s_.error("tensor %" + t.name + " defined twice");
    HGP_ASSIGN_OR_RETURN(std::string role, s_.word());
    HGP_ASSIGN_OR_RETURN(t.role, parseRole(role));
    HGP_ASSIGN_OR_RETURN(t.type, parseType());
    HGP_TRY(s_.expect('@'));
    HGP_ASSIGN_OR_RETURN(std::string where, s_.word());
    if (where.size() < 2 || (where[0] != 'p' && where[0] != 't'))
      return s_.error("expected @p<offset> or @t<offset>");
    t.storage = where[0] == 'p' ? StorageClass::Persistent : StorageClass::Transient;
    try {
      t.offset = std::stoll(where.substr(1));
    } catch (...) {
      return s_.error("bad storage offset '" + where + "'");
    }
    if (s_.consumeWord("zero")) {
      t.init = InitKind::Zero;
    } else if (s_.consumeWord("fill")) {
      HGP_TRY(s_.expect('='));
      t.init = InitKind::Fill;
      HGP_ASSIGN_OR_RETURN(t.fillValue, s_.number());
    } else if (s_.consumeWord("data")) {
      HGP_TRY(s_.expect('='));
      t.init = InitKind::Data;
      HGP_ASSIGN_OR_RETURN(t.dataOffset, s_.integer());
    } else if (s_.consumeWord("file")) {
      HGP_TRY(s_.expect('='));
      t.init = InitKind::File;
      HGP_ASSIGN_OR_RETURN(t.dataOffset, s_.integer());
    }
    // A view may name a tensor defined further down (a Concat's result after its parts).
    bool view = s_.consumeWord("view");
    if (view || s_.consumeWord("part")) {
      HGP_TRY(s_.expect('='));
      t.alias = view ? AliasKind::View : AliasKind::Part;
      HGP_ASSIGN_OR_RETURN(std::string of, s_.percentName());
      aliasNames_.push_back({int(plan_.tensors.size()), of});
    }
    if (s_.consumeWord("row")) {
      HGP_TRY(s_.expect('='));
      HGP_ASSIGN_OR_RETURN(t.row, s_.integer());
      if (!s_.consumeWord("pitch")) return s_.error("expected pitch= after row=");
      HGP_TRY(s_.expect('='));
      HGP_ASSIGN_OR_RETURN(t.pitch, s_.integer());
    }
    index_[t.name] = int(plan_.tensors.size());
    plan_.tensors.push_back(std::move(t));
    return Status::ok();
  }

  Expected<TensorType> parseType() {
    TensorType tt;
    HGP_ASSIGN_OR_RETURN(std::string word, s_.word());
    HGP_ASSIGN_OR_RETURN(tt.dtype, parseDType(word));
    HGP_TRY(s_.expect('['));
    if (!s_.consume(']')) {
      do {
        HGP_ASSIGN_OR_RETURN(int64_t d, s_.integer());
        tt.shape.push_back(d);
      } while (s_.consume(','));
      HGP_TRY(s_.expect(']'));
    }
    return tt;
  }

  Status parseProgram() {
    PlanProgram p;
    HGP_ASSIGN_OR_RETURN(p.name, s_.peek() == '"' ? s_.quoted() : s_.word());
    HGP_TRY(s_.expect('{'));
    while (!s_.consume('}')) {
      if (s_.atEnd()) return s_.error("unterminated program");
      PlanStep st;
      do {
        HGP_ASSIGN_OR_RETURN(int o, tensorRef());
        st.outputs.push_back(o);
      } while (s_.consume(','));
      HGP_TRY(s_.expect('='));
      HGP_ASSIGN_OR_RETURN(std::string op, s_.word());
      HGP_ASSIGN_OR_RETURN(st.op, parseOpKind(op));
      HGP_TRY(s_.expect('('));
      if (!s_.consume(')')) {
        do {
          HGP_ASSIGN_OR_RETURN(int i, tensorRef());
          st.inputs.push_back(i);
        } while (s_.consume(','));
        HGP_TRY(s_.expect(')'));
      }
      if (s_.peek() == '{') {
        HGP_ASSIGN_OR_RETURN(st.attrs, AttrMap::parse(s_));
      }
      if (s_.consumeWord("stream")) {
        HGP_TRY(s_.expect('='));
        HGP_ASSIGN_OR_RETURN(int64_t stream, s_.integer());
        st.stream = int(stream);
      }
      if (s_.consumeWord("waits")) {
        HGP_TRY(s_.expect('='));
        do {
          HGP_ASSIGN_OR_RETURN(int64_t w, s_.integer());
          if (w < 0 || w >= int64_t(p.steps.size()))
            return s_.error("waits=" + std::to_string(w) + " does not name an earlier step");
          st.waits.push_back(int(w));
        } while (s_.consume(','));
      }
      if (s_.consumeWord("loc")) {
        HGP_TRY(s_.expect('('));
        HGP_ASSIGN_OR_RETURN(st.loc, s_.quoted());
        HGP_TRY(s_.expect(')'));
      }
      p.steps.push_back(std::move(st));
    }
    plan_.programs.push_back(std::move(p));
    return Status::ok();
  }

  TextScanner s_;
  Plan plan_;
  std::map<std::string, int> index_;
  /// Views, resolved once every tensor is known: (tensor, the name it is a view of).
  std::vector<std::pair<int, std::string>> aliasNames_;
};

} // namespace

Expected<Plan> parsePlan(std::string_view text, const std::string& sourceName) {
  return PlanParser(text, sourceName).parse();
}

} // namespace hgp
