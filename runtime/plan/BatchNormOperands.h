// BatchNormOperands.h - where BatchNormTrain's and BatchNormBwd's optional operands are.
//
// BatchNormTrain(X, scale, bias, residual?, sum?, sumsq?) has a residual (fuse-batch-norm's
// Add + Relu) and, with given_stats=1, the convolution's channel sums (fuse-conv-bn), always
// the last two; bnTrainOperands says where each is.
//
// BatchNormBwd(dY, X, scale, mean, var, Z?, dY2?) (runtime/plan/OpList.def) has two optional
// trailing operands from fuse-batch-norm (docs/fusion.md): Z, the output of a fused Relu
// (activation="relu"), and dY2, the second part of a folded gradient Sum (dy_parts=2), always
// last. A six-operand op is therefore either form, and only the attributes tell which. The shape
// rules, the CPU and CUDA executors, the cost model and the plan report all read the operand
// list through this one function, so that they cannot disagree about it.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/support/Status.h"

#include <string>

namespace hgp {

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
  int z = -1;   ///< Z (activation="relu"): the mask source of the fused ReluBwd.
  int dy2 = -1; ///< dY2 (dy_parts=2): dY is round(dY + dY2), a folded Sum.
  bool relu() const { return z >= 0; }
  bool split() const { return dy2 >= 0; }
};

/// Reads activation ("none" or "relu") and dy_parts (1 or 2) and checks that the operand count is
/// 5 + (Z) + (dY2); an InvalidModel error saying what disagrees otherwise (callers add their
/// context: the node or the step).
inline Expected<BnBwdOperands> bnBwdOperands(const AttrMap& attrs, size_t numInputs) {
  std::string act = attrs.getString("activation", "none");
  int64_t parts = attrs.getInt("dy_parts", 1);
  if (act != "none" && act != "relu")
    return Status(ErrorCode::InvalidModel, "unknown activation '" + act + "'");
  if (parts != 1 && parts != 2)
    return Status(ErrorCode::InvalidModel,
                  "dy_parts must be 1 or 2, got " + std::to_string(parts));
  size_t want = 5 + (act == "relu" ? 1 : 0) + (parts == 2 ? 1 : 0);
  if (numInputs != want)
    return Status(ErrorCode::InvalidModel,
                  "activation=\"" + act + "\" with dy_parts=" + std::to_string(parts) + " takes " +
                      std::to_string(want) + " operands (dY, X, scale, mean, var" +
                      (act == "relu" ? ", Z" : "") + (parts == 2 ? ", dY2" : "") + "), got " +
                      std::to_string(numInputs));
  BnBwdOperands ops;
  if (act == "relu") ops.z = 5;
  if (parts == 2) ops.dy2 = int(want) - 1;
  return ops;
}

} // namespace hgp
