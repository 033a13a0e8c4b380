#include "tools/hgpc/TrainFlags.h"

namespace hgp {

void addTrainingOptions(CLI::App* cmd, TrainOptions& t) {
  cmd->add_option("--loss", t.loss, "cross-entropy or mse (against one-hot labels)")
      ->check(CLI::IsMember({"cross-entropy", "mse"}));
  cmd->add_option("--label-smoothing", t.labelSmoothing, "label smoothing for cross-entropy");
  cmd->add_option("--aux-loss-weight", t.auxLossWeight,
                  "weight of auxiliary outputs' losses (0 ignores them)");
  cmd->add_option("--optimizer", t.optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--lr", t.lr, "learning rate");
  cmd->add_option("--momentum", t.momentum, "SGD momentum");
  cmd->add_option("--dampening", t.dampening, "SGD dampening");
  cmd->add_flag("--nesterov", t.nesterov, "Nesterov momentum");
  cmd->add_option("--weight-decay", t.weightDecay,
                  "weight decay (default: 0 for SGD and Adam, 0.01 for AdamW)");
  cmd->add_option("--beta1", t.beta1, "Adam beta1");
  cmd->add_option("--beta2", t.beta2, "Adam beta2");
  cmd->add_option("--eps", t.eps, "Adam epsilon");
  cmd->add_option("--schedule", t.schedule, "constant, step, multistep or cosine")
      ->check(CLI::IsMember({"constant", "step", "multistep", "cosine"}));
  cmd->add_option("--step-size", t.stepSize, "steps between decays (step schedule)");
  cmd->add_option("--gamma", t.gamma, "decay factor (step and multistep schedules)");
  cmd->add_option("--milestones", t.milestones, "steps at which to decay (multistep)")
      ->delimiter(',');
  cmd->add_option("--t-max", t.tMax, "steps of one cosine half-period");
  cmd->add_option("--eta-min", t.etaMin, "the cosine schedule's floor");
  cmd->add_option("--warmup-steps", t.warmupSteps, "steps of linear warmup");
  cmd->add_option("--warmup-factor", t.warmupFactor, "warmup's starting fraction of the LR");
  cmd->add_option("--seed", t.seed, "seed of dropout's RNG");
  cmd->add_option("--pixels", t.pixels,
                  "the data input: u8 (8-bit images cross to the GPU; flip, conversion and "
                  "--normalize run in the step, docs/data.md), f32, or auto (f32 for now)")
      ->check(CLI::IsMember({"auto", "u8", "f32"}));
  cmd->add_option_function<std::vector<double>>(
         "--normalize",
         [&t](const std::vector<double>& v) {
           size_t half = v.size() / 2;
           t.pixelMean.assign(v.begin(), v.begin() + long(half));
           t.pixelStd.assign(v.begin() + long(half), v.end());
           if (v.size() % 2) t.pixelStd.clear(); // validate() reports the mismatch
         },
         "with --pixels u8: Normalize(mean, std) compiled into the step: MEAN,STD or per channel "
         "M1,M2,M3,S1,S2,S3")
      ->delimiter(',');
  cmd->add_option("--metrics-every", t.metricsRing,
                  "steps between metric read-backs (the on-device ring's size)");
  cmd->add_option("--ranks", t.ranks,
                  "data-parallel ranks (GPUs) to train on; --batch is per rank (docs/distributed.md)");
  cmd->add_option_function<double>(
      "--bucket-mb", [&t](double mb) { t.bucketBytes = int64_t(mb * (1 << 20)); },
      "gradient all-reduce bucket cap in MiB (default 25)");
  cmd->add_flag("--sync-bn", t.syncBn, "with --ranks: BatchNorm statistics over the global batch");
  cmd->add_flag("--freeze-bn", t.freezeBn,
                "keep inference-mode BatchNormalization (training_mode=0) frozen: no batch "
                "statistics, no running-statistics update (fine-tuning)");
}

void addPrecisionOption(CLI::App* cmd, Precision& p, const std::string& help) {
  cmd->add_option_function<std::string>(
         "--precision",
         [&p](const std::string& s) {
           if (Expected<Precision> parsed = parsePrecision(s)) p = *parsed;
         },
         help)
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
}

} // namespace hgp
