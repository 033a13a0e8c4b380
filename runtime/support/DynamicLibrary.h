// DynamicLibrary.h - one way to load a shared library at run time and find its functions.
//
// hgpc and the runner start on machines without a GPU, so every GPU library is loaded with
// dlopen when it is first needed: cuDNN and cuBLAS (runtime/cuda/CudaLibraries), NCCL
// (runtime/cuda/Nccl), CUPTI (runtime/cuda/Profiler), MPI (runtime/runner/MpiBootstrap) and NVRTC
// (compiler/codegen/Nvrtc). Each tries a list of names in order and reports every one it tried,
// with the loader's reason, when none loads. A loaded library stays loaded for the life of the
// process (the functions found in it are kept in statics), so DynamicLibrary never closes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hgp {

class DynamicLibrary {
public:
  /// RTLD_LOCAL or RTLD_GLOBAL: whether the library's symbols serve libraries loaded after it.
  enum class Scope { Local, Global };
  /// A name that did not load, and the loader's reason (dlerror).
  struct Failure {
    std::string name, reason;
  };

  /// Opens the first of `names` (file names looked up on the library path, or paths) that loads,
  /// binding every symbol at once (RTLD_NOW); nullopt when none does. `failures`, when given,
  /// receives one entry per name tried that did not load.
  static std::optional<DynamicLibrary> openFirst(const std::vector<std::string>& names, Scope scope,
                                                 std::vector<Failure>* failures = nullptr);
  /// The names of `failures` joined with `separator`, for messages ("a, b").
  static std::string namesOf(const std::vector<Failure>& failures, const char* separator = ", ");
  /// The reasons of `failures` joined with `separator`.
  static std::string reasonsOf(const std::vector<Failure>& failures, const char* separator = "; ");

  /// The address of symbol `symbol`, or nullptr when the library does not have it.
  void* symbol(const char* symbol) const;
  /// The function `symbol` as a pointer of type Fn, or nullptr.
  template <typename Fn> Fn function(const char* symbol) const {
    return reinterpret_cast<Fn>(this->symbol(symbol));
  }
  /// The loader's message about the last failed open or lookup (dlerror), or "" when none.
  static std::string lastError();
  /// The name it was opened by.
  const std::string& name() const { return name_; }

private:
  DynamicLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* handle_ = nullptr;
  std::string name_;
};

} // namespace hgp
