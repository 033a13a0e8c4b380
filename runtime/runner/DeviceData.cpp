#include "runtime/runner/DeviceData.h"

#include <cstring>

namespace hgp {

Expected<DeviceBatchTensors> addDeviceBatch(Plan& plan, int64_t samples) {
  int input = plan.binding("input"), flip = plan.binding("input.flip");
  PlanProgram* train = nullptr;
  for (PlanProgram& p : plan.programs)
    if (p.name == "train") train = &p;
  if (input < 0 || flip < 0 || !train || plan.tensors[size_t(input)].type.dtype != DType::U8)
    return Status(ErrorCode::DataNotOnDevice, "--data-on-device needs an executable compiled with "
                                              "--pixels u8 (hgpc compile --pixels u8)");
  const Shape px = plan.tensors[size_t(input)].type.shape; // [N, H, W, C]
  auto add = [&](const std::string& name, TensorRole role, TensorType type, InitKind init) {
    PlanTensor t;
    t.name = name;
    t.role = role;
    t.type = std::move(type);
    t.storage = StorageClass::Persistent;
    t.init = init;
    t.offset = (plan.persistentBytes + 63) / 64 * 64;
    plan.persistentBytes = t.offset + (t.bytes() + 63) / 64 * 64;
    plan.tensors.push_back(std::move(t));
    int idx = int(plan.tensors.size() - 1);
    plan.bindings[name] = idx;
    return idx;
  };
  DeviceBatchTensors out;
  out.data = add("input.resident", TensorRole::Const, {DType::U8, {samples, px[1], px[2], px[3]}},
                 InitKind::None);
  out.rows = add("input.rows", TensorRole::Input, {DType::I64, {px[0]}}, InitKind::None);
  out.draw = add("input.draw", TensorRole::Input, {DType::I64, {4}}, InitKind::None);
  // The pixels and flags are now written by a step, not copied in from the host.
  plan.tensors[size_t(input)].role = TensorRole::Activation;
  plan.tensors[size_t(flip)].role = TensorRole::Activation;
  PlanStep s;
  s.op = OpKind::DeviceBatch;
  s.inputs = {out.data, out.rows, out.draw};
  s.outputs = {input, flip};
  s.loc = "device_batch";
  s.stream = 0;
  std::vector<bool> seen(kMaxPlanStreams, false);
  seen[0] = true;
  for (PlanStep& step : train->steps) {
    for (int& w : step.waits) ++w;
    if (!seen[size_t(step.stream)]) {
      seen[size_t(step.stream)] = true;
      step.waits.insert(step.waits.begin(), 0);
    }
  }
  train->steps.insert(train->steps.begin(), std::move(s));
  HGP_TRY(plan.validate());
  return out;
}

std::array<int64_t, 4> deviceDraws(uint64_t seed, int64_t epoch, const ResidentData& data) {
  int64_t flipBits = 0;
  std::memcpy(&flipBits, &data.flip, sizeof flipBits);
  return {int64_t(seed), epoch, data.padding, flipBits};
}

} // namespace hgp
