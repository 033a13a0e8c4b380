// Target.h - what the scheduling analyses know about a GPU.
//
// A Target is the resource description the kernel model and the cost model work from: how many
// SMs, what one SM holds (registers, shared memory, threads, blocks), the memory system and the
// peak arithmetic rate of each math mode. Targets.def lists the GPUs hgpc knows by name, so a plan
// for an H200 can be made on a machine with no GPU (`--target h200`); `--target auto` asks the
// local driver which GPU is present.
#pragma once

#include "runtime/plan/Precision.h"
#include "runtime/support/Status.h"

#include <string>
#include <vector>

namespace hgp {

struct Target {
  std::string name, description;
  int sms = 0;
  int regsPerSm = 0;
  int64_t smemPerSm = 0; ///< Bytes.
  int maxThreadsPerSm = 0, maxBlocksPerSm = 0;
  int64_t l2Bytes = 0;
  double memBandwidth = 0; ///< Bytes per second.
  double fp32 = 0, tf32 = 0, fp16 = 0, bf16 = 0; ///< FLOP/s; 0 where the mode does not exist.
  double launchSeconds = 0;                      ///< Per kernel node of a replayed graph.
  double linkBandwidth = 0; ///< GPU to GPU in one machine, bytes per second per direction.
  int64_t memoryBytes = 0;  ///< Device memory, the total the driver reports.

  /// The peak rate for a math mode, falling back to FP32 where the GPU has no tensor cores for it.
  double peak(Precision precision) const;
  /// The compute capability as one number (H100/H200 90, A100 80, V100 70, T4 75, L4 89): the
  /// SM architecture generated kernels are compiled for (compiler/codegen).
  int smArch() const;
};

/// The known targets, in Targets.def order.
const std::vector<Target>& knownTargets();

/// Free and total memory of the local GPU (device 0), from the CUDA driver loaded at run time;
/// a Device error where there is no driver or no usable GPU. `hgpc explore --measure` checks
/// plans against the free bytes, since other processes and the CUDA context hold the rest.
struct DeviceMemory {
  int64_t freeBytes = 0, totalBytes = 0;
};
Expected<DeviceMemory> localDeviceMemory();

/// A target by name ("h200", ...), or "auto": the GPU the local driver reports. Errors name the
/// known targets.
Expected<Target> findTarget(const std::string& name);

} // namespace hgp
