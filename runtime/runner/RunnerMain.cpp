// RunnerMain.cpp - the command line of every executable hgpc generates.
//
//   EXE --data SPEC [--eval SPEC] (--epochs N | --steps N) [--device auto|cpu|cuda]
//       [--shuffle on|off] [--save OUT.onnx] [--checkpoint-dir DIR] [--checkpoint-every N]
//       [--resume CKPT]
//       [--metrics OUT.jsonl] [--progress auto|bar|plain|none] [--seed N]
//       [--deterministic] [--max-nonfinite N] [--op-times FILE] [--profile FILE]
//       [--trace FILE.json] [--gpus N] [--rendezvous DIR] [--timeout SECONDS]
//       [--augment imagenet|cifar|none] [--crop-scale LO,HI] [--crop-ratio LO,HI]
//       [--crop-padding N] [--flip P] [--eval-resize N] [--dct-scale on|off]
//       [--loader-threads N] [--bad-images skip|fail] [--shuffle-buffer N] [--data-on-device]
//
// Exit codes: 0 ok, 1 internal, 2 usage, 3 invalid bundle, 4 i/o, 5 bad data, 6 device,
// 7 diverged, 8 out of memory, 9 peer rank failed; 130 and 143 stopped by SIGINT and SIGTERM
// with a checkpoint (docs/exit-codes.md).
#include "runtime/runner/Launcher.h"
#include "runtime/runner/Trainer.h"

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include <map>

int main(int argc, char** argv) {
  using namespace hgp;
  CLI::App app{"Trains the model compiled into this executable (made by hgpc compile)."};
  RunOptions o;
  std::string shuffle = "on", progress = "auto";
  uint64_t seed = 0;
  app.add_option("--data", o.data, "training data: fashion-mnist:DIR, mnist:DIR, cifar10:DIR, "
                                   "cifar100:DIR, imagefolder:DIR, shards:PATTERN, "
                                   "npy:IMAGES.npy,LABELS.npy or synthetic[:N] (docs/data.md)")
      ->required();
  app.add_option("--eval", o.eval, "evaluation data (same forms; idx and CIFAR use the test files)");
  // Image data and augmentation (docs/data.md, runtime/runner/ImageAugment.h).
  std::string dctScale, badImages = "skip";
  int padding = -1, evalResize = -1;
  double flip = -1;
  app.add_option("--augment", o.augment.recipe, "training augmentation: imagenet "
                 "(RandomResizedCrop + flip), cifar (RandomCrop padding 4 + flip) or none")
      ->check(CLI::IsMember({"imagenet", "cifar", "none"}));
  app.add_option("--crop-scale", o.augment.cropScale, "RandomResizedCrop's area range LO,HI")
      ->delimiter(',');
  app.add_option("--crop-ratio", o.augment.cropRatio, "RandomResizedCrop's aspect range LO,HI")
      ->delimiter(',');
  auto* padOpt = app.add_option("--crop-padding", padding, "RandomCrop with this zero padding");
  auto* flipOpt = app.add_option("--flip", flip, "horizontal flip probability");
  auto* resizeOpt = app.add_option("--eval-resize", evalResize,
                                   "evaluation: Resize the shorter side to N, then CenterCrop");
  app.add_option("--dct-scale", dctScale, "decode JPEGs at a reduced scale when the crop is at "
                                          "least twice the output (training; default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--loader-threads", o.loaderThreads,
                 "threads decoding images (default: all cores but one)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--bad-images", badImages, "skip (default: replace a corrupt image and name it) "
                                            "or fail (stop with exit code 5)")
      ->check(CLI::IsMember({"skip", "fail"}));
  app.add_option("--shuffle-buffer", o.shuffleBuffer,
                 "tar shards: shuffle within a buffer of N samples while each shard is read "
                 "front to back (default 1000; WebDataset's shuffle(N))")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_flag("--data-on-device", o.dataOnDevice,
               "hold the 8-bit training set (idx, CIFAR) whole on the GPU and gather, crop and "
               "flip each batch there (--pixels u8 executables; exit code 10 when it cannot)");
  auto* epochs = app.add_option("--epochs", o.epochs, "epochs to train in this run");
  auto* steps = app.add_option("--steps", o.steps, "steps to train in this run");
  epochs->excludes(steps);
  app.add_option("--device", o.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--shuffle", shuffle, "on or off (off: batches in file order)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--save", o.save, "write the trained model as ONNX");
  auto* ckptDir = app.add_option("--checkpoint-dir", o.checkpointDir,
                                 "write checkpoints here after every epoch (and every "
                                 "--checkpoint-every steps, and when SIGINT or SIGTERM stops "
                                 "the run)");
  app.add_option("--checkpoint-every", o.checkpointEvery,
                 "also write a checkpoint every N steps: what a kill -9 or a power loss can cost")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->needs(ckptDir);
  app.add_option("--resume", o.resume, "continue from a checkpoint");
  app.add_option("--metrics", o.metrics, "write per-step metrics as JSON lines");
  app.add_option("--progress", progress, "auto, bar, plain or none")
      ->check(CLI::IsMember({"auto", "bar", "plain", "none"}));
  auto* seedOpt = app.add_option("--seed", seed, "data shuffling seed (default: the compiled --seed)");
  app.add_option("--max-nonfinite", o.maxNonFinite,
                 "stop after this many steps in a row with a non-finite loss or gradients");
  app.add_flag("--deterministic", o.deterministic,
               "only deterministic GPU algorithms: two runs give bit-identical weights");
  app.add_flag("--eager", o.eager, "GPU: execute op by op instead of replaying a CUDA graph");
  app.add_flag("--data-only", o.dataOnly,
               "benchmarks: read, decode and augment the steps' batches without training, and "
               "print the images/s the input pipeline reaches");
  app.add_flag("--hold-batch", o.holdBatch,
               "benchmarks: train every step on the first batch, uploaded once (the step "
               "without the input pipeline)");
  app.add_flag("--no-cudnn-fusion", o.noCudnnFusion,
               "GPU: never run a convolution and its epilogue as one cuDNN fused graph");
  app.add_flag("--verbose", o.verbose, "say what the backend chose");
  app.add_option("--op-times", o.opTimes,
                 "GPU: time one step op by op and append each launch's time to this file");
  app.add_option("--profile", o.profile,
                 "GPU: record the third step's kernels through CUPTI (step, launch shape, time) "
                 "into this records file, for hgpc plan/compile --records");
  app.add_option("--trace", o.trace,
                 "GPU: write the third step as a Chrome trace (JSON, opens in Perfetto)");
  app.add_option("--dump-tensors", o.dumpTensors,
                 "after the last step, write every tensor of the plan into this folder (compile "
                 "with --no-buffer-reuse to keep the intermediates; tests/parity/step_diff.py "
                 "compares two dumps)");
  app.add_option("--normalize", o.normalize,
                 "standardize pixels: MEAN,STD, or per channel M1,M2,M3,S1,S2,S3")
      ->delimiter(',');
  int gpus = 1;
  app.add_option("--gpus", gpus, "data parallel on N local GPUs, one process each (the "
                                 "executable must be compiled with --ranks; docs/distributed.md)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--rendezvous", o.rendezvous,
                 "mpirun: share the NCCL id through a file in this directory, which every rank "
                 "can read, instead of broadcasting it with MPI (then no MPI library is needed)");
  app.add_option("--timeout", o.timeout,
                 "data parallel: seconds without progress before a rank declares a peer failed")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
    if (o.epochs <= 0 && o.steps <= 0)
      throw CLI::ValidationError("--epochs or --steps", "give --epochs N or --steps N (N >= 1)");
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : exitCodeFor(ErrorCode::Usage);
  }
  o.shuffle = shuffle == "on";
  o.argv.assign(argv, argv + argc);
  if (padOpt->count()) o.augment.padding = padding;
  if (flipOpt->count()) o.augment.flip = flip;
  if (resizeOpt->count()) o.augment.evalResize = evalResize;
  if (!dctScale.empty()) o.augment.dctScale = dctScale == "on";
  o.skipBadImages = badImages == "skip";
  static const std::map<std::string, ProgressMode> modes = {{"auto", ProgressMode::Auto},
                                                            {"bar", ProgressMode::Bar},
                                                            {"plain", ProgressMode::Plain},
                                                            {"none", ProgressMode::None}};
  o.progress = modes.at(progress);
  if (seedOpt->count()) o.seed = seed;
  // The parent of a local launch only starts, watches and stops the ranks.
  if (gpus > 1 && (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK"))) {
    std::fprintf(stderr, "error: usage error: --gpus starts ranks itself; under mpirun, start one "
                         "process per GPU instead (docs/distributed.md)\n");
    return exitCodeFor(ErrorCode::Usage);
  }
  if (gpus > 1 && !std::getenv("HGPC_RANK"))
    return launchLocalRanks("/proc/self/exe", argsWithoutGpus(argc, argv), gpus);
  return runTrainer("/proc/self/exe", o);
}
