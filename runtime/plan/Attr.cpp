#include "runtime/plan/Attr.h"

#include <algorithm>

namespace hgp {

void AttrMap::set(const std::string& name, AttrValue v) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != entries_.end() && it->first == name) it->second = std::move(v);
  else entries_.insert(it, {name, std::move(v)});
}

void AttrMap::erase(const std::string& name) {
  std::erase_if(entries_, [&](const auto& e) { return e.first == name; });
}

const AttrValue* AttrMap::find(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  return it != entries_.end() && it->first == name ? &it->second : nullptr;
}

int64_t AttrMap::getInt(const std::string& name, int64_t def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
  return def;
}

double AttrMap::getFloat(const std::string& name, double def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
  if (v && std::holds_alternative<int64_t>(*v)) return double(std::get<int64_t>(*v));
  return def;
}

std::vector<int64_t> AttrMap::getInts(const std::string& name, std::vector<int64_t> def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::vector<int64_t>>(*v))
    return std::get<std::vector<int64_t>>(*v);
  return def;
}

std::vector<double> AttrMap::getFloats(const std::string& name, std::vector<double> def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::vector<double>>(*v)) return std::get<std::vector<double>>(*v);
  if (v && std::holds_alternative<std::vector<int64_t>>(*v)) {
    const auto& iv = std::get<std::vector<int64_t>>(*v);
    return std::vector<double>(iv.begin(), iv.end());
  }
  return def;
}

std::string AttrMap::getString(const std::string& name, std::string def) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return def;
}

Expected<int64_t> AttrMap::requireInt(const std::string& name) const {
  const AttrValue* v = find(name);
  if (!v) return Status(ErrorCode::InvalidModel, "missing attribute '" + name + "'");
  if (!std::holds_alternative<int64_t>(*v))
    return Status(ErrorCode::InvalidModel, "attribute '" + name + "' must be an integer");
  return std::get<int64_t>(*v);
}

Expected<std::vector<int64_t>> AttrMap::requireInts(const std::string& name) const {
  const AttrValue* v = find(name);
  if (!v) return Status(ErrorCode::InvalidModel, "missing attribute '" + name + "'");
  if (!std::holds_alternative<std::vector<int64_t>>(*v))
    return Status(ErrorCode::InvalidModel, "attribute '" + name + "' must be a list of integers");
  return std::get<std::vector<int64_t>>(*v);
}

std::string AttrMap::toString() const {
  if (entries_.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [name, v] : entries_) {
    if (!first) out += ", ";
    first = false;
    appendName(out, name);
    out += '=';
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            out += std::to_string(x);
          } else if constexpr (std::is_same_v<T, double>) {
            out += formatDouble(x);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            out += '[';
            for (size_t i = 0; i < x.size(); ++i) out += (i ? "," : "") + std::to_string(x[i]);
            out += ']';
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            // An empty float list prints as "f[]" so that it reads back as floats.
            out += x.empty() ? "f[" : "[";
            for (size_t i = 0; i < x.size(); ++i) out += (i ? "," : "") + formatDouble(x[i]);
            out += ']';
          } else {
            appendQuoted(out, x);
          }
        },
        v);
  }
  return out + "}";
}

Expected<AttrMap> AttrMap::parse(TextScanner& s) {
  AttrMap m;
  HGP_TRY(s.expect('{'));
  if (s.consume('}')) return m;
  do {
    std::string name;
    if (s.peek() == '"') {
      HGP_ASSIGN_OR_RETURN(name, s.quoted());
    } else {
      HGP_ASSIGN_OR_RETURN(name, s.word());
    }
    HGP_TRY(s.expect('='));
    char c = s.peek();
    if (c == '"') {
      HGP_ASSIGN_OR_RETURN(auto str, s.quoted());
      m.set(name, str);
    } else if (c == '[' || c == 'f') {
      bool forceFloat = false;
      if (c == 'f') {
        HGP_TRY(s.expectWord("f"));
        forceFloat = true;
      }
      HGP_TRY(s.expect('['));
      std::vector<int64_t> ints;
      std::vector<double> floats;
      bool anyFloat = forceFloat;
      if (!s.consume(']')) {
        do {
          HGP_ASSIGN_OR_RETURN(auto n, s.numeric());
          if (std::holds_alternative<double>(n)) {
            anyFloat = true;
            floats.push_back(std::get<double>(n));
          } else {
            ints.push_back(std::get<int64_t>(n));
            floats.push_back(double(std::get<int64_t>(n)));
          }
        } while (s.consume(','));
        HGP_TRY(s.expect(']'));
      }
      if (anyFloat) m.set(name, floats);
      else m.set(name, ints);
    } else {
      HGP_ASSIGN_OR_RETURN(auto n, s.numeric());
      if (std::holds_alternative<double>(n)) m.set(name, std::get<double>(n));
      else m.set(name, std::get<int64_t>(n));
    }
  } while (s.consume(','));
  HGP_TRY(s.expect('}'));
  return m;
}

} // namespace hgp
