// BatchNormOperands.h - where BatchNormTrain's and BatchNormBwd's optional operands are.
//
// BatchNormTrain(X, scale, bias, residual?, sum?, sumsq?) has a residual (fuse-batch-norm's
// Add + Relu) and, with given_stats=1, the convolution's channel sums (fuse-conv-bn), always
// the last two; bnTrainOperands says where each is.
//
// BatchNormBwd(dY, X, scale, mean, var, Z | bias?, dY2?) (runtime/plan/OpList.def) has two
// optional trailing operands from fuse-batch-norm (docs/fusion.md): what the fused activation's
// gradient needs, and dY2, the second part of a folded gradient Sum (dy_parts=2), always last.
// Relu's gradient needs only its output Z (the mask Z > 0); Silu's and HardSwish's need their
// input, the BatchNorm's result y, which the fused forward never stores: the backward
// recomputes it from X, scale, mean and var and the BatchNorm's bias, its sixth operand. A
// six-operand op is therefore any of three forms, and only the attributes tell which. The shape
// rules and the CPU and CUDA executors read the operand list through this one function, so that
// they cannot disagree about it.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/support/Status.h"

#include <string>

namespace hgp {

/// The activation a BatchNorm absorbed (attribute activation=): none, relu, silu or hardswish.
/// Relu's gradient is read off its output; the others' off their input, recomputed.
enum class BnActivation : int { None, Relu, Silu, HardSwish };

/// Reads activation= into `act`; InvalidModel for a name it does not know.
inline Status bnActivation(const AttrMap& attrs, BnActivation& act) {
  std::string name = attrs.getString("activation", "none");
  if (name == "none") act = BnActivation::None;
  else if (name == "relu") act = BnActivation::Relu;
  else if (name == "silu") act = BnActivation::Silu;
  else if (name == "hardswish") act = BnActivation::HardSwish;
  else
    return Status(ErrorCode::InvalidModel, "activation must be none, relu, silu or hardswish, not '" +
                                               name + "'");
  return Status::ok();
}

/// The optional operands of one BatchNormTrain: indices into its operand list, -1 when absent.
struct BnTrainOperands {
  int residual = -1; ///< The residual S (activation="relu"): Y = relu(round(BN(X)) + S).
  int sum = -1;      ///< given_stats=1: the sums of X, and at sum + 1 those of X^2.
  bool givenStats() const { return sum >= 0; }
};

/// Reads given_stats (0 or 1) and checks that the operand count is 3 + (residual) + 2 *
/// given_stats; a residual needs activation="relu". InvalidModel otherwise.
inline Expected<BnTrainOperands> bnTrainOperands(const AttrMap& attrs, size_t numInputs) {
  int64_t given = attrs.getInt("given_stats", 0);
  if (given != 0 && given != 1)
    return Status(ErrorCode::InvalidModel, "given_stats must be 0 or 1, got " + std::to_string(given));
  size_t base = 3 + 2 * size_t(given);
  if (numInputs != base && numInputs != base + 1)
    return Status(ErrorCode::InvalidModel,
                  "given_stats=" + std::to_string(given) + " takes " + std::to_string(base) +
                      " or " + std::to_string(base + 1) + " operands (X, scale, bias, residual?" +
                      (given ? ", sum, sumsq" : "") + "), got " + std::to_string(numInputs));
  BnTrainOperands ops;
  if (numInputs == base + 1) {
    if (attrs.getString("activation", "none") != "relu")
      return Status(ErrorCode::InvalidModel, "a residual input needs activation=\"relu\"");
    ops.residual = 3;
  }
  if (given) ops.sum = int(numInputs) - 2;
  return ops;
}

/// The optional operands of one BatchNormBwd: indices into its operand list, -1 when absent.
struct BnBwdOperands {
  BnActivation act = BnActivation::None;
  int z = -1;    ///< Z (activation="relu"): the mask source of the fused ReluBwd.
  int bias = -1; ///< bias[C] (silu, hardswish): with scale, mean and var, recomputes y from X.
  int dy2 = -1;  ///< dY2 (dy_parts=2): dY is round(dY + dY2), a folded Sum.
  bool relu() const { return z >= 0; }
  bool recomputes() const { return bias >= 0; }
  bool fused() const { return act != BnActivation::None; }
  bool split() const { return dy2 >= 0; }
};

/// Reads activation and dy_parts (1 or 2) and checks that the operand count is 5 + (Z or bias)
/// + (dY2); an InvalidModel error saying what disagrees otherwise (callers add their context:
/// the node or the step).
inline Expected<BnBwdOperands> bnBwdOperands(const AttrMap& attrs, size_t numInputs) {
  BnBwdOperands ops;
  HGP_TRY(bnActivation(attrs, ops.act));
  int64_t parts = attrs.getInt("dy_parts", 1);
  if (parts != 1 && parts != 2)
    return Status(ErrorCode::InvalidModel,
                  "dy_parts must be 1 or 2, got " + std::to_string(parts));
  bool fused = ops.fused();
  size_t want = 5 + (fused ? 1 : 0) + (parts == 2 ? 1 : 0);
  const char* sixth = ops.act == BnActivation::Relu ? ", Z" : ", bias";
  if (numInputs != want)
    return Status(ErrorCode::InvalidModel,
                  "activation=\"" + attrs.getString("activation", "none") + "\" with dy_parts=" +
                      std::to_string(parts) + " takes " + std::to_string(want) +
                      " operands (dY, X, scale, mean, var" + (fused ? sixth : "") +
                      (parts == 2 ? ", dY2" : "") + "), got " + std::to_string(numInputs));
  if (ops.act == BnActivation::Relu) ops.z = 5;
  else if (fused) ops.bias = 5;
  if (parts == 2) ops.dy2 = int(want) - 1;
  return ops;
}

} // namespace hgp
