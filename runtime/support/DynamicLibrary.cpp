#include "runtime/support/DynamicLibrary.h"

#include <dlfcn.h>

namespace hgp {

std::optional<DynamicLibrary> DynamicLibrary::openFirst(const std::vector<std::string>& names,
                                                        Scope scope,
                                                        std::vector<Failure>* failures) {
  int flags = RTLD_NOW | (scope == Scope::Global ? RTLD_GLOBAL : RTLD_LOCAL);
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), flags)) return DynamicLibrary(h, n);
    const char* why = dlerror();
    if (failures) failures->push_back({n, why ? std::string(why) : n + ": not found"});
  }
  return std::nullopt;
}

std::string DynamicLibrary::namesOf(const std::vector<Failure>& failures, const char* separator) {
  std::string s;
  for (const Failure& f : failures) s += (s.empty() ? "" : separator) + f.name;
  return s;
}

std::string DynamicLibrary::reasonsOf(const std::vector<Failure>& failures, const char* separator) {
  std::string s;
  for (const Failure& f : failures) s += (s.empty() ? "" : separator) + f.reason;
  return s;
}

std::string DynamicLibrary::lastError() {
  const char* e = dlerror();
  return e ? e : "";
}

void* DynamicLibrary::symbol(const char* symbol) const {
  return handle_ ? dlsym(handle_, symbol) : nullptr;
}

} // namespace hgp
