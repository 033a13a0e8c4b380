// Checkpoint.h - training state on disk: weights, optimizer state, counters and the data position.
//
// A checkpoint holds every parameter and state tensor of the plan by name, the epoch and batch
// to resume at, and a hash of the plan it belongs to, so that resuming with another executable
// fails clearly instead of loading mismatched bytes. Writes are atomic: a temporary file, fsync,
// rename, fsync of the folder. A crash never leaves a torn checkpoint.
#pragma once

#include "runtime/Backend.h"

#include <string>

namespace hgp {

struct CheckpointPosition {
  int64_t epoch = 0;    ///< The epoch the next step belongs to.
  int64_t batch = 0;    ///< The next batch within that epoch.
  int64_t step = 0;     ///< Steps completed so far.
};

/// FNV-1a of the plan text: a checkpoint's fingerprint of what it belongs to.
uint64_t planFingerprint(const std::string& planText);

Status writeCheckpoint(const std::string& path, const Plan& plan, uint64_t fingerprint,
                       const CheckpointPosition& pos, Backend& backend);

/// Loads the tensors into `backend` and returns the position to resume at.
Expected<CheckpointPosition> readCheckpoint(const std::string& path, const Plan& plan,
                                            uint64_t fingerprint, Backend& backend);

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync of the folder).
Status writeFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes);

} // namespace hgp
