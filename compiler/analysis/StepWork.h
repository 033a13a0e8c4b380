// StepWork.h - how much work one plan step is: FLOPs, bytes moved, and for convolutions and
// matrix products the implicit-GEMM dimensions their kernels tile.
#pragma once

#include "runtime/plan/Plan.h"

namespace hgp {

struct StepWork {
  double flops = 0;     ///< Multiply-adds count two.
  double bytes = 0;     ///< Every operand read once and every result written once.
  bool gemm = false;    ///< A convolution phase or a matrix product (tensor-core work); not
                        ///< depthwise-like convolutions, which run as direct kernels.
  int64_t m = 0, n = 0, k = 0, groups = 1; ///< The GEMM each group computes, when `gemm`.
  int64_t elements = 0; ///< The largest operand or result, for memory-bound kernels.
  bool reduction = false; ///< Sums across elements (statistics, losses, reductions).
};

StepWork stepWork(const Plan& plan, const PlanStep& step);

} // namespace hgp
