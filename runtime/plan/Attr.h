// Attr.h - typed op attributes, shared by IR nodes and plan steps.
//
// An AttrMap is a small map from name to an integer, a float, a list of either, or a string,
// kept sorted by name so that printing is stable. Floats are stored as double and printed in
// the shortest form that reads back exactly, so text round-trips bit for bit.
#pragma once

#include "runtime/support/Status.h"
#include "runtime/support/TextScanner.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace hgp {

using AttrValue =
    std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string>;

class AttrMap {
public:
  void set(const std::string& name, AttrValue v);
  void setInt(const std::string& name, int64_t v) { set(name, v); }
  void setFloat(const std::string& name, double v) { set(name, v); }
  void setInts(const std::string& name, std::vector<int64_t> v) { set(name, std::move(v)); }
  void setFloats(const std::string& name, std::vector<double> v) { set(name, std::move(v)); }
  void setString(const std::string& name, std::string v) { set(name, std::move(v)); }
  bool has(const std::string& name) const { return find(name) != nullptr; }
  void erase(const std::string& name);

  /// Typed getters. The plain forms return the default when the attribute is absent; an
  /// attribute of another type is a verifier error, reported by the checked forms below.
  int64_t getInt(const std::string& name, int64_t def = 0) const;
  /// Accepts an integer attribute too.
  double getFloat(const std::string& name, double def = 0) const;
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> def = {}) const;
  /// Accepts an integer list too.
  std::vector<double> getFloats(const std::string& name, std::vector<double> def = {}) const;
  std::string getString(const std::string& name, std::string def = "") const;

  /// Checked access for verifiers: an error names the attribute and the type found.
  Expected<int64_t> requireInt(const std::string& name) const;
  Expected<std::vector<int64_t>> requireInts(const std::string& name) const;

  const AttrValue* find(const std::string& name) const;
  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  bool operator==(const AttrMap&) const = default;

  /// "{a=1, b=[1,2], c=0.5, d=\"x\"}", or "" when empty.
  std::string toString() const;
  /// Parses the form toString prints; the scanner is positioned at '{'.
  static Expected<AttrMap> parse(TextScanner& s);

private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

} // namespace hgp
