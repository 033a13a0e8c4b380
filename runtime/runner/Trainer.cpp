#include "runtime/runner/Trainer.h"

#include "runtime/Backend.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/plan/Precision.h"
#include "runtime/runner/BatchLoader.h"
#include "runtime/runner/Checkpoint.h"
#include "runtime/runner/DataSetup.h"
#include "runtime/runner/DeviceData.h"
#include "runtime/runner/Destinations.h"
#include "runtime/runner/Devices.h"
#include "runtime/runner/Distributed.h"
#include "runtime/runner/Interrupt.h"
#include "runtime/runner/MetricsLog.h"
#include "runtime/runner/MpiBootstrap.h"
#include "runtime/runner/StepIo.h"
#include "runtime/runner/TensorDump.h"

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <array>
#include <tuple>

namespace hgp {

namespace {

using Clock = std::chrono::steady_clock;

/// "rank R: " in a data-parallel run, so that every error names its rank.
std::string gRankPrefix;

int fail(const Status& st) {
  std::fprintf(stderr, "error: %s%s\n", gRankPrefix.c_str(), st.toString().c_str());
  return exitCodeFor(st.code());
}

/// Everything a run holds on to.
class Run {
public:
  /// `mpi` receives the MPI bootstrap when the NCCL id goes over MPI; it outlives the run, so
  /// that MPI ends after the communicator (runTrainer).
  Run(const RunOptions& o, std::unique_ptr<MpiBootstrap>& mpi) : opt_(o), mpi_(mpi) {}

  Status setUp(const std::string& exePath) {
    HGP_ASSIGN_OR_RETURN(bundle_, readBundleFromExecutable(exePath));
    HGP_ASSIGN_OR_RETURN(plan_, parsePlan(bundle_.planText, "bundled plan"));
    fingerprint_ = planFingerprint(bundle_.planText);
    if (!plan_.findProgram("train"))
      return Status(ErrorCode::Usage, "this executable was compiled with --forward-only and "
                                      "cannot train; compile without it");
    for (const char* b : {"input", "labels", "metrics", "iter"})
      if (plan_.binding(b) < 0)
        return Status(ErrorCode::InvalidModel, std::string("the plan binds no '") + b + "'");
    BackendOptions bo;
    bo.deterministic = opt_.deterministic;
    bo.eager = opt_.eager;
    bo.cudnnFusion = !opt_.noCudnnFusion;
    bo.verbose = opt_.verbose;
    bo.opTimes = opt_.opTimes;
    HGP_ASSIGN_OR_RETURN(ranks_, detectRankEnv(opt_.rendezvous));
    std::string device = opt_.device;
    if (ranks_.ranks > 1) {
      gRankPrefix = "rank " + std::to_string(ranks_.rank) + ": ";
      lead_ = ranks_.rank == 0;
      quiet_ = !lead_ && !opt_.verbose;
      HGP_TRY(checkDataParallelPlan());
      if (device == "cpu")
        return Status(ErrorCode::Usage, "data-parallel training runs on GPUs; --device cpu is one rank");
      device = "cuda";
      bo.device = ranks_.localRank;
      bo.rank = ranks_.rank;
      bo.ranks = ranks_.ranks;
      RankEnv env = ranks_;
      double timeout = opt_.timeout;
      if (ranks_.idOverMpi) {
        // Before the CUDA backend starts: a missing or mismatched MPI fails fast, and MPI_Init
        // comes before CUDA, as MPI libraries prefer.
        HGP_ASSIGN_OR_RETURN(mpi_, MpiBootstrap::start(ranks_.launcher, ranks_.rank, ranks_.ranks));
        if (opt_.verbose)
          std::fprintf(stderr, "rank %d: the NCCL id goes over MPI: %s\n", ranks_.rank,
                       mpi_->library().c_str());
        MpiBootstrap* mpi = mpi_.get();
        bo.shareUniqueId = [mpi](std::string& id) {
          return mpi->broadcast(id).withContext("broadcasting rank 0's NCCL id with MPI");
        };
      } else {
        bo.shareUniqueId = [env, timeout](std::string& id) {
          return shareThroughFile(env, id, timeout);
        };
      }
    }
    bo.profile = perRankPath(opt_.profile, ranks_);
    bo.trace = perRankPath(opt_.trace, ranks_);
    // Every destination before anything slow: a run must not train and then find that it
    // cannot keep the result.
    if (lead_) {
      HGP_TRY(prepareFileDestination(opt_.save, "--save"));
      HGP_TRY(prepareFileDestination(opt_.metrics, "--metrics"));
      HGP_TRY(prepareFolderDestination(opt_.checkpointDir, "--checkpoint-dir"));
      HGP_TRY(prepareFolderDestination(opt_.dumpTensors, "--dump-tensors"));
    }
    HGP_TRY(prepareFileDestination(bo.profile, "--profile"));
    HGP_TRY(prepareFileDestination(bo.trace, "--trace"));
    HGP_TRY(prepareFileDestination(bo.opTimes, "--op-times"));
    HGP_ASSIGN_OR_RETURN(backend_, selectBackend(device, bo));
    if ((!opt_.profile.empty() || !opt_.trace.empty()) && std::string(backend_->name()) != "cuda")
      return Status(ErrorCode::Device, "--profile and --trace record GPU kernels and need the CUDA "
                                       "backend; this run is on the " +
                                           std::string(backend_->name()) + " backend");
    if (ranks_.ranks > 1) {
      removeRendezvousFile(ranks_);
      watchdog_ = std::make_unique<Watchdog>(*backend_, ranks_.rank, opt_.timeout);
      if (lead_)
        std::fprintf(stderr,
                     "data parallel: %d ranks (%s launch, NCCL id %s), global batch %lld x %d\n",
                     ranks_.ranks, ranks_.launcher.c_str(),
                     ranks_.idOverMpi ? "broadcast with MPI" : "through a rendezvous file",
                     (long long)plan_.tensors[size_t(plan_.binding("input"))].type.shape[0],
                     ranks_.ranks);
    }

    const PlanTensor& input = plan_.tensors[size_t(plan_.binding("input"))];
    batch_ = input.type.shape[0];
    DatasetRequirements req;
    req.sampleShape.assign(input.type.shape.begin() + 1, input.type.shape.end());
    // hgpc compile --pixels u8: the plan takes 8-bit [N,H,W,C] pixels and a flip flag each.
    pixels_ = input.type.dtype == DType::U8;
    if (pixels_) {
      if (plan_.binding("input.flip") < 0 || input.type.shape.size() != 4)
        return Status(ErrorCode::InvalidModel, "the plan's 8-bit input has no 'input.flip' binding");
      const Shape& s = input.type.shape;
      req.sampleShape = {s[3], s[1], s[2]};
      req.u8Pixels = true;
    }
    req.classes = plan_.meta.getInt("classes");
    req.batch = batch_;
    req.seed = opt_.seed.value_or(uint64_t(plan_.meta.getInt("seed")));
    if (!opt_.normalize.empty()) {
      if (opt_.normalize.size() % 2 != 0)
        return Status(ErrorCode::Usage, "--normalize takes MEAN,STD or per-channel means then stds");
      size_t half = opt_.normalize.size() / 2;
      req.mean.assign(opt_.normalize.begin(), opt_.normalize.begin() + long(half));
      req.stddev.assign(opt_.normalize.begin() + long(half), opt_.normalize.end());
    }
    HGP_TRY(imageRequirements(opt_, plan_, pixels_, ranks_.rank, ranks_.ranks, req));
    HGP_ASSIGN_OR_RETURN(train_, openDataset(opt_.data, Split::Train, req));
    if (const auto* names = train_->classNames()) req.trainClasses = *names;
    if (train_->size() < batch_)
      return Status(ErrorCode::BadData, train_->describe() + " has fewer samples than one batch (" +
                                            std::to_string(batch_) + ")");
    if (!opt_.eval.empty()) {
      HGP_ASSIGN_OR_RETURN(eval_, openDataset(opt_.eval, Split::Test, req));
    }
    // --data-on-device (DeviceData.h): the plan gains the resident set and its DeviceBatch step
    // before the backend allocates it.
    DeviceBatchTensors resident;
    if (opt_.dataOnDevice) {
      if (!pixels_)
        return Status(ErrorCode::DataNotOnDevice, "--data-on-device needs an executable compiled "
                                                  "with --pixels u8 (hgpc compile --pixels u8)");
      HGP_ASSIGN_OR_RETURN(resident_, train_->resident());
      HGP_ASSIGN_OR_RETURN(resident, addDeviceBatch(plan_, train_->size()));
    }
    if (!bundle_.fileRefPath.empty()) HGP_TRY(loadReferencedWeights());
    if (Status st = backend_->load(plan_, InitData{bundle_.data, fileBytes_}); !st) {
      if (opt_.dataOnDevice && st.code() == ErrorCode::OutOfMemory)
        return Status(ErrorCode::DataNotOnDevice,
                      "--data-on-device: " + train_->describe() + " (" +
                          std::to_string(resident_.pixels.size() >> 20) + " MiB) does not fit in " +
                          "GPU memory beside the plan; train without --data-on-device (" +
                          st.message() + ")");
      return st;
    }
    if (opt_.dataOnDevice) {
      HGP_TRY_CTX(backend_->write(resident.data, resident_.pixels.data()),
                  "uploading the data set (--data-on-device)");
      resident_.pixels = {};
      rowsT_ = resident.rows, drawT_ = resident.draw;
      if (!quiet_)
        std::fprintf(stderr, "data on device: %s, %lld samples held on the %s backend\n",
                     train_->describe().c_str(), (long long)train_->size(), backend_->name());
    }
    if (!opt_.metrics.empty() && lead_) {
      HGP_ASSIGN_OR_RETURN(metrics_, MetricsLog::open(opt_.metrics));
    }
    if (!opt_.resume.empty()) {
      HGP_ASSIGN_OR_RETURN(pos_, readCheckpoint(opt_.resume, plan_, fingerprint_, *backend_));
      if (!quiet_) std::fprintf(stderr, "resuming at step %lld (epoch %lld, batch %lld) from %s\n",
                   (long long)pos_.step, (long long)pos_.epoch + 1, (long long)pos_.batch,
                   opt_.resume.c_str());
    }
    ring_.resize(size_t(plan_.tensors[size_t(plan_.binding("metrics"))].type.numElements()));
    return Status::ok();
  }

  /// Trains; returns the exit code.
  int train() {
    uint64_t seed = opt_.seed.value_or(uint64_t(plan_.meta.getInt("seed")));
    seed_ = seed;
    BatchLoader loader(*train_, batch_, opt_.shuffle, seed, /*dropLast=*/true, pos_.epoch, pos_.batch,
                       ranks_.rank, ranks_.ranks, opt_.loaderThreads,
                       opt_.dataOnDevice ? &resident_.labels : nullptr);
    int64_t perEpoch = loader.batchesPerEpoch();
    if (perEpoch == 0) return fail(Status(ErrorCode::BadData, train_->describe() + " has fewer samples than one global batch"));
    int64_t total = opt_.steps > 0 ? opt_.steps : opt_.epochs * perEpoch - pos_.batch;
    if (!quiet_) std::fprintf(stderr, "training %s on %s: %lld steps of batch %lld (%lld per epoch) on %s\n",
                 plan_.modelName.c_str(), train_->describe().c_str(), (long long)total,
                 (long long)batch_, (long long)perEpoch, backend_->name());
    if ((!opt_.profile.empty() || !opt_.trace.empty()) && total < 3)
      return fail(Status(ErrorCode::Usage, "--profile and --trace record the third training step "
                                           "(after warm-up); train at least 3 steps"));
    if (opt_.dataOnly) return readDataOnly(loader, total);
    progress_ = std::make_unique<Progress>(lead_ ? opt_.progress : ProgressMode::None, total);
    reported_ = startStep_ = pos_.step;
    endEpoch_ = pos_.epoch + opt_.epochs;
    installInterruptHandlers();
    windowStart_ = Clock::now();
    auto runStart = Clock::now();
    // `ahead`: the batch of the next step, already prefetched to the backend (within an epoch).
    std::unique_ptr<Batch> b, ahead;
    for (int64_t done = 0; done < total; ++done) {
      Status st;
      if (opt_.holdBatch && b) {
        // --hold-batch: both input slots already hold the first batch (written, then
        // prefetched, below); a backend without slots gets it written again.
        if (!backend_->supportsPrefetch()) st = feed(*b, /*prefetch=*/false);
      } else if (ahead) {
        b = std::move(ahead);
      } else {
        b = loader.next();
        st = b->status;
        if (st) st = feed(*b, /*prefetch=*/false);
      }
      if (st && opt_.holdBatch && backend_->supportsPrefetch() && done == 0) {
        st = feed(*b, /*prefetch=*/true);
      } else if (st && !opt_.holdBatch && backend_->supportsPrefetch() && done + 1 < total &&
                 b->index + 1 < perEpoch) {
        ahead = loader.next();
        st = ahead->status;
        if (st) st = feed(*ahead, /*prefetch=*/true);
      }
      if (st) st = backend_->run("train");
      if (!st) return fail(std::move(st).withContext("step " + std::to_string(pos_.step + 1)));
      if (watchdog_) watchdog_->beat();
      int64_t batchEpoch = b->epoch, batchIndex = b->index;
      if (!opt_.holdBatch) loader.recycle(std::move(b));
      ++pos_.step;
      windowEpochs_.push_back(batchEpoch);
      pos_.epoch = batchEpoch;
      pos_.batch = batchIndex + 1;
      bool epochEnd = pos_.batch == perEpoch;
      if (epochEnd) pos_.epoch += 1, pos_.batch = 0;
      int64_t k = int64_t(ring_.size() / 4);
      if (pos_.step % k == 0 || done + 1 == total || epochEnd) {
        if (int code = report(); code != 0) return code;
      }
      if (epochEnd) {
        if (int code = endOfEpoch(pos_.epoch - 1); code != 0) return code;
      }
      if (opt_.checkpointEvery > 0 && lead_ && pos_.step % opt_.checkpointEvery == 0 &&
          lastCheckpointStep_ != pos_.step)
        if (Status st = checkpoint(); !st) return fail(st);
      if (int sig = pendingInterrupt(); sig != 0 && done + 1 < total)
        return interrupted(sig, total - done - 1);
    }
    progress_->finish();
    // No collective follows the last step, and ranks that finish first close their connections,
    // which NCCL may report to the others as an error: stop watching.
    watchdog_.reset();
    double secs = std::chrono::duration<double>(Clock::now() - runStart).count();
    if (!quiet_)
      std::fprintf(stderr, "%strained %lld steps in %.1f s (%.0f images/s%s)\n",
                   gRankPrefix.c_str(), (long long)total, secs,
                   double(total * batch_ * ranks_.ranks) / std::max(secs, 1e-9),
                   ranks_.ranks > 1 ? (" over " + std::to_string(ranks_.ranks) + " GPUs").c_str() : "");
    if (opt_.verbose && backend_->deviceMemoryBytes() > 0)
      std::fprintf(stderr, "%s: device memory %.1f MiB\n", backend_->name(),
                   double(backend_->deviceMemoryBytes()) / (1 << 20));
    if (!opt_.dumpTensors.empty() && lead_)
      if (Status st = dumpTensors(plan_, *backend_, opt_.dumpTensors); !st) return fail(st);
    if (eval_ && !evaluatedAtStep(pos_.step))
      if (int code = evaluate(pos_.epoch); code != 0) return code;
    if (!opt_.checkpointDir.empty() && lead_ && lastCheckpointStep_ != pos_.step)
      if (Status st = checkpoint(); !st) return fail(st);
    if (!opt_.save.empty() && lead_) {
      if (Status st = saveTrainedOnnx(bundle_, plan_, *backend_, opt_.save); !st) return fail(st);
      std::fprintf(stderr, "saved the trained model to %s\n", opt_.save.c_str());
      if (Status st = saveClassNames(*train_, opt_.save); !st) return fail(st);
    }
    return 0;
  }

private:
  Status loadReferencedWeights() {
    std::ifstream in(bundle_.fileRefPath, std::ios::binary);
    if (!in)
      return Status(ErrorCode::Io, "this executable reads its initial weights from '" +
                                       bundle_.fileRefPath + "', which cannot be opened");
    fileBytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (int64_t(fileBytes_.size()) != bundle_.fileRefSize)
      return Status(ErrorCode::BadData, "'" + bundle_.fileRefPath + "' changed since compilation "
                                        "(size " + std::to_string(fileBytes_.size()) + ", was " +
                                        std::to_string(bundle_.fileRefSize) + "); recompile");
    return Status::ok();
  }

  /// Reads the metrics ring and reports every step since the last report.
  int report() {
    Status st = backend_->read(plan_.binding("metrics"), ring_.data());
    if (!st) return fail(st);
    auto now = Clock::now();
    double secs = std::chrono::duration<double>(now - windowStart_).count();
    int64_t steps = pos_.step - reported_;
    double ips = double(steps * batch_ * ranks_.ranks) / std::max(secs, 1e-9);
    windowStart_ = now;
    int64_t k = int64_t(ring_.size() / 4);
    for (int64_t s = reported_; s < pos_.step; ++s) {
      const float* row = ring_.data() + (s % k) * 4;
      float loss = row[0], ok = row[2], lr = row[3];
      int64_t epoch = windowEpochs_[size_t(s - reported_)];
      if (metrics_) metrics_->step(s + 1, epoch, loss, lr, ips, ok != 0);
      lastLoss_ = loss;
      if (ok == 0) {
        ++nonFinite_;
        note("step " + std::to_string(s + 1) + ": non-finite loss or gradients; the "
                        "update was skipped (" + std::to_string(nonFinite_) + " in a row)");
        if (nonFinite_ >= maxNonFinite()) return diverged();
      } else {
        nonFinite_ = 0;
      }
    }
    reported_ = pos_.step;
    windowEpochs_.clear();
    progress_->update(pos_.step - startStep_, pos_.epoch - (pos_.batch == 0 ? 1 : 0), lastLoss_, ips);
    return 0;
  }

  /// Consecutive skipped steps allowed. fp16 loss scaling (docs/precision.md) skips a step and
  /// halves the scale whenever the scaled gradients overflow, which is expected while it finds
  /// its level: it may take 24 more (2^16 down to 2^-8) before the run counts as diverged.
  int64_t maxNonFinite() const {
    Expected<Precision> p = planPrecision(plan_.meta);
    return opt_.maxNonFinite + (p && *p == Precision::FP16 ? 24 : 0);
  }

  int diverged() {
    progress_->finish();
    // Every rank sees the same averaged loss and gradients, so all stop here; rank 0 saves.
    if (!lead_) return exitCodeFor(ErrorCode::Diverged);
    std::string dir = opt_.checkpointDir.empty() ? "." : opt_.checkpointDir;
    std::string path = (std::filesystem::path(dir) / "checkpoint.hgpc").string();
    Status st = writeCheckpoint(path, plan_, fingerprint_, pos_, *backend_);
    std::fprintf(stderr,
                 "error: training diverged: %lld steps in a row had a non-finite loss or gradients "
                 "(their updates were skipped, so the weights are from before them). State saved "
                 "to %s%s. Try a lower --lr.\n",
                 (long long)nonFinite_, path.c_str(), st ? "" : (" FAILED: " + st.message()).c_str());
    return exitCodeFor(ErrorCode::Diverged);
  }

  int endOfEpoch(int64_t epoch) {
    if (eval_)
      if (int code = evaluate(epoch); code != 0) return code;
    if (!opt_.checkpointDir.empty() && lead_)
      if (Status st = checkpoint(); !st) return fail(st);
    return 0;
  }

  /// Ends a run that signal `sig` interrupted after a whole step, `left` steps short of its
  /// end: reports the steps not yet reported, writes a checkpoint and says how to continue.
  int interrupted(int sig, int64_t left) {
    if (reported_ != pos_.step)
      if (int code = report(); code != 0) return code;
    progress_->finish();
    watchdog_.reset();
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
    if (!lead_) return interruptExitCode(sig);
    std::string dir = opt_.checkpointDir.empty() ? "." : opt_.checkpointDir;
    std::string path = (std::filesystem::path(dir) / "checkpoint.hgpc").string();
    if (lastCheckpointStep_ != pos_.step || opt_.checkpointDir.empty())
      if (Status st = writeCheckpoint(path, plan_, fingerprint_, pos_, *backend_); !st)
        return fail(std::move(st).withContext("interrupted by " + std::string(name) +
                                              " after step " + std::to_string(pos_.step) +
                                              ", writing the checkpoint"));
    std::string budget = opt_.steps > 0 ? "--steps " + std::to_string(left)
                                        : "--epochs " + std::to_string(endEpoch_ - pos_.epoch);
    std::fprintf(stderr,
                 "interrupted by %s: stopped after step %lld (epoch %lld, batch %lld), %lld "
                 "steps short of the end; checkpoint written to %s\nto continue: %s\n",
                 name, (long long)pos_.step, (long long)pos_.epoch + 1, (long long)pos_.batch,
                 (long long)left, path.c_str(), resumeCommand(opt_.argv, path, budget).c_str());
    return interruptExitCode(sig);
  }

  /// Hands a training batch to the backend: its pixels, or with --data-on-device its rows and
  /// the epoch's draws (DeviceData.h).
  Status feed(const Batch& b, bool prefetch) {
    if (!opt_.dataOnDevice) return feedBatch(*backend_, plan_, b, pixels_, prefetch);
    std::array<int64_t, 4> draw = deviceDraws(seed_, b.epoch, resident_);
    auto put = [&](int t, const void* src) {
      return prefetch ? backend_->prefetch(t, src) : backend_->write(t, src);
    };
    HGP_TRY(put(rowsT_, b.rows.data()));
    HGP_TRY(put(drawT_, draw.data()));
    return put(plan_.binding("labels"), b.labels.data());
  }

  bool evaluatedAtStep(int64_t step) const { return lastEvalStep_ == step; }

  int evaluate(int64_t epoch) {
    lastEvalStep_ = pos_.step;
    BatchLoader loader(*eval_, batch_, /*shuffle=*/false, 0, /*dropLast=*/false, 0, 0, 0, 1,
                       opt_.loaderThreads);
    int lossT = plan_.binding("eval.loss"), correctT = plan_.binding("eval.correct"),
        logitsT = plan_.binding("eval.logits");
    int64_t classes = plan_.tensors[size_t(logitsT)].type.shape[1];
    std::vector<float> logits(size_t(batch_ * classes));
    double lossSum = 0, correct = 0;
    for (int64_t i = 0; i < loader.batchesPerEpoch(); ++i) {
      std::unique_ptr<Batch> b = loader.next();
      Status st = b->status;
      if (st) st = feedBatch(*backend_, plan_, *b, pixels_, /*prefetch=*/false);
      if (st) st = backend_->run("eval");
      if (!st) return fail(std::move(st).withContext("evaluation"));
      if (watchdog_) watchdog_->beat();
      if (b->valid == batch_) {
        float l = 0, c = 0;
        if (!(st = backend_->read(lossT, &l)) || !(st = backend_->read(correctT, &c))) return fail(st);
        lossSum += double(l) * double(batch_);
        correct += c;
        continue;
      }
      // A padded last batch: score its real rows on the host.
      if (!(st = backend_->read(logitsT, logits.data()))) return fail(st);
      scoreRows(logits.data(), b->valid, classes, b->labels.data(), lossSum, correct);
    }
    double n = double(eval_->size());
    double acc = correct / n, loss = lossSum / n;
    char msg[256];
    std::snprintf(msg, sizeof msg, "eval after epoch %lld (step %lld): accuracy %.2f%% (%lld/%lld), loss %.4f",
                  (long long)epoch + 1, (long long)pos_.step, 100 * acc, (long long)correct,
                  (long long)n, loss);
    note(msg);
    if (metrics_) metrics_->eval(pos_.step, epoch, loss, acc);
    return 0;
  }

  Status checkpoint() {
    lastCheckpointStep_ = pos_.step;
    std::string path = (std::filesystem::path(opt_.checkpointDir) / "checkpoint.hgpc").string();
    return writeCheckpoint(path, plan_, fingerprint_, pos_, *backend_);
  }

  /// --data-only: the input pipeline alone (read, decode, augment), timed after a warm-up of
  /// two batches.
  int readDataOnly(BatchLoader& loader, int64_t total) {
    auto start = Clock::now();
    for (int64_t done = 0; done < total; ++done) {
      if (done == std::min<int64_t>(2, total - 1)) start = Clock::now();
      std::unique_ptr<Batch> b = loader.next();
      if (!b->status) return fail(std::move(b->status).withContext("data-only"));
      loader.recycle(std::move(b));
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    int64_t timed = total - std::min<int64_t>(2, total - 1);
    std::fprintf(stderr, "data only: %lld batches of %lld in %.2f s (%.0f images/s)\n",
                 (long long)timed, (long long)batch_, secs, double(timed * batch_) / std::max(secs, 1e-9));
    return 0;
  }

  /// A line between progress updates; other ranks print only with --verbose, naming the rank.
  void note(const std::string& message) {
    if (!quiet_) progress_->note(lead_ ? message : gRankPrefix + message);
  }

  /// A plan for one GPU has no all-reduce: its ranks would train separate models.
  Status checkDataParallelPlan() {
    const PlanProgram* train = plan_.findProgram("train");
    bool collectives = false;
    for (const PlanStep& s : train->steps) collectives |= s.op == OpKind::AllReduce;
    if (!collectives)
      return Status(ErrorCode::Usage, "this executable was compiled for one GPU and cannot train "
                                      "on " + std::to_string(ranks_.ranks) + "; compile it with "
                                      "hgpc compile --ranks " + std::to_string(ranks_.ranks));
    int64_t planned = plan_.meta.getInt("ranks", 1);
    if (planned != ranks_.ranks && lead_)
      std::fprintf(stderr, "note: compiled for %lld ranks, running on %d (the buckets are the "
                   "same; only the cost model's prediction differs)\n", (long long)planned,
                   ranks_.ranks);
    return Status::ok();
  }

  const RunOptions& opt_;
  RankEnv ranks_;
  bool lead_ = true;   ///< Rank 0 (or the only rank): writes checkpoints, metrics, --save.
  bool quiet_ = false; ///< Another rank without --verbose: errors only.
  MappedBundle bundle_;
  Plan plan_;
  uint64_t fingerprint_ = 0;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<MpiBootstrap>& mpi_;
  std::unique_ptr<Watchdog> watchdog_; ///< Declared after backend_: stops before it goes.
  std::vector<uint8_t> fileBytes_;
  std::unique_ptr<Dataset> train_, eval_;
  bool pixels_ = false; ///< The plan's input is 8-bit pixels (hgpc compile --pixels u8).
  ResidentData resident_;  ///< --data-on-device: the labels (the pixels live on the device).
  int rowsT_ = -1, drawT_ = -1;
  uint64_t seed_ = 0;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<Progress> progress_;
  CheckpointPosition pos_;
  int64_t batch_ = 0, reported_ = 0, startStep_ = 0, nonFinite_ = 0;
  int64_t lastEvalStep_ = -1, lastCheckpointStep_ = -1;
  int64_t endEpoch_ = 0; ///< With --epochs: the epoch this run ends at (its first batch).
  float lastLoss_ = 0;
  std::vector<float> ring_;
  std::vector<int64_t> windowEpochs_; ///< The epoch of each step not yet reported.
  Clock::time_point windowStart_;
};

} // namespace

int runTrainer(const std::string& exePath, const RunOptions& options) {
  std::unique_ptr<MpiBootstrap> mpi;
  int code = 0;
  {
    Run run(options, mpi);
    Status st = run.setUp(exePath);
    code = st ? run.train() : fail(st);
  } // The watchdog, the communicator and the backend end here, before MPI.
  if (!mpi) return code;
  // A failed rank aborts the MPI job, so that the launcher stops the other ranks now instead of
  // leaving them blocked in a collective until --timeout (the --gpus parent does the same).
  // Divergence is the exception: every rank sees the same averaged loss and stops at the same
  // step, so all of them finalize, which waits for rank 0 to save its checkpoint.
  if (code != 0 && code != exitCodeFor(ErrorCode::Diverged)) mpi->abort(code);
  if (Status st = mpi->finalize(); !st) return fail(std::move(st).withContext("ending MPI"));
  return code;
}

} // namespace hgp
