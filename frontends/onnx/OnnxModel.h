// OnnxModel.h - model-level steps shared by the importer and the template builder: reading a
// model file within bounds, parsing it, and validating the header (IR version, opsets, graph).
#pragma once

#include "frontends/onnx/ImportContext.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hgp {

/// The IR versions and default-domain opsets the loader accepts.
constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 10;
constexpr int64_t kMinOpset = 6, kMaxOpset = 20;

/// The error with control characters escaped and its length bounded: names in a model can hold
/// anything, and the message printed for a bad model must stay one line.
Status oneLine(Status s);

/// Reads a whole model file (Io error when it cannot be read; InvalidModel when it is over the
/// 2 GiB protobuf limit or not a regular file).
Expected<std::vector<uint8_t>> readModelFile(const std::string& path);

/// The folder external data of the model at `path` is resolved in.
std::string modelDirOf(const std::string& path);

/// Parses serialized ModelProto bytes; a truncated or corrupt file is an InvalidModel error.
Status parseModel(std::span<const uint8_t> bytes, onnx::ModelProto& model);

/// Checks the IR version, the opset imports and that there is a graph; returns the default
/// domain's opset.
Expected<int64_t> checkModelHeader(const onnx::ModelProto& model);

/// Imports a validated model's main graph into ctx.graph (ImportContext.h describes the state),
/// recording the batch in `info`.
Status importGraph(ImportContext& ctx, const onnx::GraphProto& g, const std::string& baseDir,
                   OnnxModelInfo& info);

} // namespace hgp
