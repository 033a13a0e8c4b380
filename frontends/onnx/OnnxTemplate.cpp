// buildOnnxTemplate: the model re-serialized with every initializer inline as raw_data (and, if
// asked, in inference form), plus the byte offset of each initializer's raw_data, found by
// walking the serialized bytes with protobuf's CodedInputStream.
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxModel.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

namespace hgp {

namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

Status invalid(const std::string& msg) {
  return Status(ErrorCode::InvalidModel, msg);
}

// Field numbers in onnx.proto.
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorName = 8, kTensorRawData = 9;

bool isDefaultDomain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

/// Skips or descends into the fields of one message until its limit.
Status walkTensor(CodedInputStream& in, std::map<std::string, int64_t>& offsets) {
  std::string name;
  int64_t raw = -1;
  while (uint32_t tag = in.ReadTag()) {
    uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == kTensorName && WireFormatLite::GetTagWireType(tag) == 2) {
      uint32_t len;
      if (!in.ReadVarint32(&len) || !in.ReadString(&name, int(len)))
        return invalid("template: bad tensor name");
    } else if (field == kTensorRawData && WireFormatLite::GetTagWireType(tag) == 2) {
      uint32_t len;
      if (!in.ReadVarint32(&len)) return invalid("template: bad raw_data");
      raw = in.CurrentPosition();
      if (!in.Skip(int(len))) return invalid("template: bad raw_data");
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return invalid("template: bad tensor field");
    }
  }
  if (raw < 0) return invalid("template: initializer '" + name + "' has no raw_data");
  offsets[name] = raw;
  return Status::ok();
}

/// Calls `body` for the length-delimited field that follows, with the stream limited to it.
template <typename F> Status nested(CodedInputStream& in, F body) {
  uint32_t len;
  if (!in.ReadVarint32(&len)) return invalid("template: bad length");
  auto limit = in.PushLimit(int(len));
  HGP_TRY(body());
  if (!in.ConsumedEntireMessage()) return invalid("template: bad nested message");
  in.PopLimit(limit);
  return Status::ok();
}

Expected<std::map<std::string, int64_t>> rawDataOffsets(const std::string& bytes) {
  std::map<std::string, int64_t> offsets;
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == kModelGraph &&
        WireFormatLite::GetTagWireType(tag) == 2) {
      HGP_TRY(nested(in, [&]() -> Status {
        while (uint32_t gtag = in.ReadTag()) {
          if (WireFormatLite::GetTagFieldNumber(gtag) == kGraphInitializer &&
              WireFormatLite::GetTagWireType(gtag) == 2) {
            HGP_TRY(nested(in, [&] { return walkTensor(in, offsets); }));
          } else if (!WireFormatLite::SkipField(&in, gtag)) {
            return invalid("template: bad graph field");
          }
        }
        return Status::ok();
      }));
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return invalid("template: bad model field");
    }
  }
  return offsets;
}

/// Rewrites training-mode nodes into inference form: BatchNormalization keeps only Y (readers of
/// its running statistics outputs read the running statistics inputs instead), and Dropout
/// loses its training_mode input (absent means false).
Status toInferenceForm(onnx::GraphProto& g, int64_t opset) {
  std::unordered_map<std::string, std::string> renamed;
  std::unordered_set<std::string> dropped;
  for (auto& node : *g.mutable_node()) {
    if (!isDefaultDomain(node.domain())) continue;
    if (node.op_type() == "BatchNormalization") {
      auto* attrs = node.mutable_attribute();
      for (int i = 0; i < attrs->size(); ++i)
        if (attrs->Get(i).name() == "training_mode") attrs->DeleteSubrange(i--, 1);
      for (int k = 1; k < node.output_size(); ++k) {
        if (node.output(k).empty()) continue;
        if (k <= 2 && node.input_size() > k + 2)
          renamed[node.output(k)] = node.input(k + 2);
        else
          dropped.insert(node.output(k));
      }
      if (node.output_size() > 1) node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
    } else if (node.op_type() == "Dropout" && opset >= 12 && node.input_size() > 2) {
      node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
    }
  }
  for (auto& node : *g.mutable_node())
    for (auto& in : *node.mutable_input()) {
      if (dropped.count(in))
        return invalid("template: node '" + node.name() + "' reads '" + in +
                       "', a training-only output");
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    }
  for (auto& out : *g.mutable_output()) {
    if (dropped.count(out.name()))
      return invalid("template: graph output '" + out.name() + "' is a training-only output");
    if (auto it = renamed.find(out.name()); it != renamed.end()) out.set_name(it->second);
  }
  return Status::ok();
}

} // namespace

namespace {
Expected<OnnxTemplate> buildTemplate(const std::string& path, bool inferenceForm) {
  HGP_ASSIGN_OR_RETURN(auto file, readModelFile(path));
  onnx::ModelProto model;
  HGP_TRY(parseModel(file, model));
  file.clear();
  HGP_ASSIGN_OR_RETURN(int64_t opset, checkModelHeader(model));
  std::string baseDir = modelDirOf(path);
  onnx::GraphProto& g = *model.mutable_graph();
  std::unordered_set<std::string> names;
  for (auto& t : *g.mutable_initializer()) {
    std::string what = "initializer '" + t.name() + "'";
    if (!names.insert(t.name()).second) return invalid(what + " is defined twice");
    HGP_ASSIGN_OR_RETURN(auto data, tensorFromProto(t, baseDir, what));
    t.clear_float_data();
    t.clear_int32_data();
    t.clear_int64_data();
    t.clear_double_data();
    t.clear_uint64_data();
    t.clear_external_data();
    t.clear_data_location();
    t.set_raw_data(data->bytes.data(), data->bytes.size());
  }
  if (inferenceForm) HGP_TRY(toInferenceForm(g, opset));
  if (model.ByteSizeLong() > size_t(INT_MAX))
    return invalid("the model with its weights inline is larger than 2 GiB, the protobuf limit");
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    return Status(ErrorCode::Internal, "cannot serialize the template model");
  HGP_ASSIGN_OR_RETURN(auto offsets, rawDataOffsets(serialized));
  if (offsets.size() != names.size())
    return Status(ErrorCode::Internal, "template: found " + std::to_string(offsets.size()) +
                                           " raw_data fields for " + std::to_string(names.size()) +
                                           " initializers");
  OnnxTemplate out;
  out.bytes.assign(serialized.begin(), serialized.end());
  out.initializerOffsets = std::move(offsets);
  return out;
}
} // namespace

Expected<OnnxTemplate> buildOnnxTemplate(const std::string& path, bool inferenceForm) {
  auto t = buildTemplate(path, inferenceForm);
  if (!t) return oneLine(t.takeStatus());
  return t;
}

Expected<std::map<std::string, int64_t>> onnxInitializerFileOffsets(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid("cannot read '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() > size_t(INT_MAX))
    return invalid("'" + path + "' is larger than 2 GiB, the protobuf limit");
  auto offsets = rawDataOffsets(bytes);
  if (!offsets) return oneLine(offsets.takeStatus());
  return offsets;
}

} // namespace hgp
