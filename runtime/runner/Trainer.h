// Trainer.h - the generated executable's job: train the bundled model on data.
//
// The runner loads its own bundle, picks a backend, and runs the plan's "train" program once per
// batch, feeding data from a loader thread. Metrics are not read every step: the program logs
// them into an on-device ring, which the host reads every K steps (K = the ring size), so a GPU
// backend never waits on the host. After each epoch it evaluates (--eval) and checkpoints
// (--checkpoint-dir; also every --checkpoint-every steps). At the end it saves the trained model
// as ONNX (--save). SIGINT and SIGTERM stop it after the step in flight, with a checkpoint and
// the command line that continues the run (Interrupt.h); the destinations it writes are checked
// before the first step (Destinations.h).
#pragma once

#include "runtime/Backend.h"
#include "runtime/runner/ImageAugment.h"
#include "runtime/runner/Progress.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hgp {

struct RunOptions {
  std::string data, eval;
  int64_t epochs = 0, steps = 0; ///< Exactly one is positive: how much this run trains.
  std::string device = "auto";
  bool shuffle = true;
  std::string save, checkpointDir, resume, metrics;
  int64_t checkpointEvery = 0; ///< Also checkpoint every N steps (0: only after each epoch).
  /// The command line, for the resume hint an interrupted run prints.
  std::vector<std::string> argv;
  ProgressMode progress = ProgressMode::Auto;
  std::optional<uint64_t> seed; ///< The shuffling seed; defaults to the compiled --seed.
  int64_t maxNonFinite = 5;     ///< Consecutive skipped steps before the run stops.
  bool deterministic = false;   ///< Only deterministic GPU algorithms.
  bool eager = false;           ///< GPU: run op by op, no CUDA graphs (for comparison).
  bool noCudnnFusion = false;   ///< GPU: no cuDNN conv+bias+relu graphs (for comparison).
  /// Benchmarks: every step trains on the first batch, uploaded once, so the step is timed
  /// without the input pipeline (as PyTorch's benchmark loop times it, from device tensors).
  bool holdBatch = false;
  /// Benchmarks: only read (and decode and augment) the batches of the steps, and time that.
  bool dataOnly = false;
  bool verbose = false;
  std::string opTimes;          ///< GPU: per-launch times of one step to this file.
  std::string profile;          ///< GPU: CUPTI records of one step to this file.
  std::string trace;            ///< GPU: one step as a Chrome trace (JSON) to this file.
  /// Every tensor after the last step into this folder (runtime/runner/TensorDump.h).
  std::string dumpTensors;
  /// --normalize MEAN,STD (or per channel: M1,M2,M3,S1,S2,S3).
  std::vector<float> normalize;
  /// Image data (docs/data.md): --augment and its pieces, --loader-threads (0: all cores but
  /// one), --bad-images skip|fail.
  AugmentFlags augment;
  unsigned loaderThreads = 0;
  bool skipBadImages = true;
  int64_t shuffleBuffer = 1000; ///< Tar shards: the shuffle buffer's size (ShardStream.h).
  /// Keep the 8-bit training set whole on the device and gather each batch there (DeviceData.h).
  bool dataOnDevice = false;
  /// Data parallelism (docs/distributed.md): the rendezvous directory for MPI launches, and how
  /// long a rank waits for progress before it declares a peer failed.
  std::string rendezvous;
  double timeout = 600;
};

/// Runs the executable `exePath` (normally /proc/self/exe) and returns the process exit code.
int runTrainer(const std::string& exePath, const RunOptions& options);

} // namespace hgp
