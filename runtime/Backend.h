// Backend.h - what a backend offers the runner: load a plan, run its programs, move tensors.
//
// The CPU reference backend (runtime/cpu) and the CUDA backend implement this interface. Both
// execute the same plan; the CPU one ignores streams and is the oracle for every GPU test.
#pragma once

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace hgp {

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu" or "cuda".
  virtual const char* name() const = 0;

  /// Allocates both storage regions and gives every persistent tensor its first value from
  /// its init rule. The plan and the data must outlive the backend.
  virtual Status load(const Plan& plan, const InitData& data) = 0;

  /// Runs one program ("forward", "train" or "eval") to completion.
  virtual Status run(const std::string& program) = 0;

  /// Copies a tensor's bytes out to host memory (`dst` holds tensor.bytes()).
  virtual Status read(int tensor, void* dst) = 0;
  /// Copies host bytes into a tensor.
  virtual Status write(int tensor, const void* src) = 0;
};

/// The CPU reference backend.
std::unique_ptr<Backend> createCpuBackend();

} // namespace hgp
