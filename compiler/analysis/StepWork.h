// StepWork.h - how much work one op is: FLOPs, bytes moved, and for convolutions and matrix
// products the implicit-GEMM dimensions their kernels tile.
//
// This is hgpc's one FLOP model. The cost model and the kernel analyzer read it for plan steps
// (stepWork), `hgpc inspect` for the nodes of the imported graph (nodeWork), and `hgpc compare`
// and `hgpc explore` through the cost model, so every report counts the same FLOPs. Multiply-adds
// count two FLOPs; a memory-bound op counts one FLOP per element of its largest operand, four for
// normalizations, losses and other reductions, which is rough but keeps reports comparable.
#pragma once

#include "runtime/plan/Plan.h"

#include <vector>

namespace hgp {

class Node;

struct StepWork {
  double flops = 0;     ///< Multiply-adds count two.
  double bytes = 0;     ///< Every operand read once and every result written once.
  bool gemm = false;    ///< A convolution phase or a matrix product (tensor-core work); not
                        ///< depthwise-like convolutions, which run as direct kernels.
  int64_t m = 0, n = 0, k = 0, groups = 1; ///< The GEMM each group computes, when `gemm`.
  int64_t elements = 0; ///< The largest operand or result, for memory-bound kernels.
  bool reduction = false; ///< Sums across elements (statistics, losses, reductions).
};

/// Operand types of one op; a tensor that appears twice (an in-place result) counts once.
using Operands = std::vector<const TensorType*>;

/// The work of `op` with attributes `attrs` over these operands and results: the model itself.
StepWork opWork(OpKind op, const AttrMap& attrs, const Operands& inputs, const Operands& outputs);

/// The work of one plan step (its operands are plan tensors).
StepWork stepWork(const Plan& plan, const PlanStep& step);

/// The work of one IR node, as the same op in a plan would count it.
StepWork nodeWork(const Node& n);

} // namespace hgp
