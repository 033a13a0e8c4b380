// Entry points of the ONNX frontend: reading and parsing the model, validating its header, and
// handing the graph to GraphImporter.cpp.
#include "frontends/onnx/OnnxImporter.h"

#include "frontends/onnx/OnnxModel.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace hgp {

namespace {
Status invalid(const std::string& msg) {
  return Status(ErrorCode::InvalidModel, msg);
}

} // namespace

Status oneLine(Status s) {
  if (s.isOk()) return s;
  constexpr size_t kMaxLength = 2000;
  static const char* const kHex = "0123456789abcdef";
  std::string m;
  for (unsigned char c : s.message()) {
    if (m.size() >= kMaxLength) {
      m += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      m += "\\x";
      m += kHex[c >> 4];
      m += kHex[c & 15];
    } else {
      m += char(c);
    }
  }
  return Status(s.code(), m);
}

Expected<std::vector<uint8_t>> readModelFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status(ErrorCode::Io, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(ErrorCode::Io, "'" + path + "' is not a regular file");
  }
  if (st.st_size > INT_MAX) {
    ::close(fd);
    return invalid("'" + path +
                   "' is larger than 2 GiB, the protobuf limit; store the weights "
                   "as external data");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      return Status(ErrorCode::Io, "cannot read '" + path + "'");
    }
    done += size_t(r);
  }
  ::close(fd);
  return bytes;
}

std::string modelDirOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

Status parseModel(std::span<const uint8_t> bytes, onnx::ModelProto& model) {
  if (bytes.size() > size_t(INT_MAX))
    return invalid("the model is larger than 2 GiB, the protobuf limit");
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    return invalid("cannot parse the model as an ONNX ModelProto (the file is truncated, "
                   "corrupt or not ONNX)");
  return Status::ok();
}

Expected<int64_t> checkModelHeader(const onnx::ModelProto& model) {
  if (!model.has_ir_version() || model.ir_version() == 0)
    return invalid("the model has no IR version (is it an ONNX model?)");
  int64_t ir = model.ir_version();
  if (ir < kMinIrVersion || ir > kMaxIrVersion)
    return invalid("IR version " + std::to_string(ir) + " is not supported (supported: " +
                   std::to_string(kMinIrVersion) + " to " + std::to_string(kMaxIrVersion) + ")");
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
    if (opset >= 0 && opset != o.version())
      return invalid("the model imports the default domain twice, at opsets " +
                     std::to_string(opset) + " and " + std::to_string(o.version()));
    opset = o.version();
  }
  if (opset < 0) return invalid("the model imports no opset of the default ONNX domain");
  if (opset < kMinOpset || opset > kMaxOpset)
    return invalid("opset " + std::to_string(opset) +
                   " of the default domain is not supported "
                   "(supported: " +
                   std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  if (!model.has_graph()) return invalid("the model has no graph");
  return opset;
}

namespace {

/// Counts the BatchNormalization modes into `info` and adds the two warnings about them: a
/// PyTorch model with convolutions and no normalization at all may have had its BatchNorm folded
/// into the convolutions by an eval-mode export; inference-mode BatchNorm trains in training mode.
void noteBatchNormModes(const onnx::GraphProto& g, const ImportContext& ctx, OnnxModelInfo& info) {
  info.trainingBatchNorms = ctx.trainingBatchNorms;
  info.retrainedBatchNorms = ctx.retrainedBatchNorms;
  info.frozenBatchNorms = ctx.frozenBatchNorms;
  bool conv = false, norm = false;
  for (const auto& node : g.node()) {
    const std::string& op = node.op_type();
    conv = conv || op == "Conv";
    norm = norm || op == "BatchNormalization" || op == "LayerNormalization" ||
           op == "InstanceNormalization" || op == "GroupNormalization";
  }
  if (ctx.pytorchProducer && conv && !norm)
    info.warnings.push_back(
        "the model has no BatchNormalization: if the PyTorch model has BatchNorm layers, an "
        "eval-mode export folded them into the convolutions; export with "
        "training=torch.onnx.TrainingMode.TRAINING to train it as designed (docs/training.md)");
  if (ctx.retrainedBatchNorms)
    info.warnings.push_back(
        std::to_string(ctx.retrainedBatchNorms) +
        " BatchNormalization nodes are in inference mode (training_mode=0); they train in "
        "training mode with batch statistics, as model.train() would (--freeze-bn keeps their "
        "statistics frozen)");
}

Expected<OnnxImportResult> importBytes(std::span<const uint8_t> bytes, const std::string& baseDir,
                                       const OnnxImportOptions& options) {
  onnx::ModelProto model;
  HGP_TRY(parseModel(bytes, model));
  HGP_ASSIGN_OR_RETURN(int64_t opset, checkModelHeader(model));
  OnnxImportResult result;
  result.info.irVersion = model.ir_version();
  result.info.opsetVersion = opset;
  result.info.producerName = model.producer_name();
  result.info.producerVersion = model.producer_version();
  result.info.graphName = model.graph().name();
  result.graph =
      std::make_unique<Graph>(model.graph().name().empty() ? "main" : model.graph().name());
  ImportContext ctx(*result.graph, options);
  ctx.opset = opset;
  ctx.pytorchProducer = model.producer_name() == "pytorch";
  HGP_TRY(importGraph(ctx, model.graph(), baseDir, result.info));
  noteBatchNormModes(model.graph(), ctx, result.info);
  if (ctx.rebatchedShapes)
    result.info.warnings.push_back(
        std::to_string(ctx.rebatchedShapes) + " shape constants of the static export start with "
        "its batch " + std::to_string(ctx.exportBatch) + " and were moved to --batch " +
        std::to_string(options.batch) + " (Reshape and Expand targets whose input has the new "
        "batch, ConstantOfShape shapes such as stochastic depth's noise, the indices of an "
        "as_strided written as Gather); export at the batch "
        "you train at if one of them is not a batch dim");
  return result;
}
} // namespace

Expected<OnnxImportResult> importOnnxBytes(std::span<const uint8_t> bytes,
                                           const std::string& baseDir,
                                           const OnnxImportOptions& options) {
  auto r = importBytes(bytes, baseDir, options);
  if (!r) return oneLine(r.takeStatus());
  return r;
}

Expected<OnnxImportResult> importOnnxFile(const std::string& path,
                                          const OnnxImportOptions& options) {
  auto bytes = readModelFile(path);
  if (!bytes) return oneLine(bytes.takeStatus());
  return importOnnxBytes(*bytes, modelDirOf(path), options);
}

} // namespace hgp
