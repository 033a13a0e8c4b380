// FusedKernelSource.h - CUDA C source for a FusedElementwise program.
//
// The generated kernel is self-contained (no headers, so NVRTC needs no include path): 16-bit
// values are handled as raw bits, converted with the same PTX conversions the hand-written
// kernels' __float2bfloat16_rn / __float2half_rn use (a bit-exact software rounding for bf16 on
// targets older than sm_80). Each instruction is emitted with the float operation the unfused
// CUDA executor uses (__fadd_rn, __fsub_rn, __fmul_rn, IEEE division, never a contracted
// multiply-add), followed by a rounding to 16 bits where its dtype is 16-bit, so fused and
// unfused agree bit for bit. The kernel takes its inputs, then its results, then the element
// count n (long long) and `vec` (int): with vec != 0 (every pointer 16-byte aligned) it moves V
// elements per thread and iteration with 16-byte (or, for 16-bit tensors next to f32 ones,
// 8-byte) loads and stores, V = 8 when every tensor is 16-bit and 4 otherwise; a grid-stride
// loop covers the vectors and then the leftover elements one by one.
//
// Dropout and DropoutBwd recompute runtime/cuda/RandomOps.cu's mask: each thread reads the i64
// iteration counter once (a pointer parameter like any input, so a replayed graph sees its new
// value), the vector path makes one Philox call per dropout for each aligned quad of its V
// elements (element i is output i & 3 of the call for quad i >> 2), and the scalar path makes the
// call for its element's quad and picks the same output, so both paths draw the unfused op's bits.
//
// The activations use the unfused CUDA executors' functions (expf, tanhf, erff, logf; IEEE
// __fdiv_rn, __frcp_rn, __fsqrt_rn), and GenerateKernels compiles with --fmad=false as
// runtime/cuda/ActivationOps.cu is compiled, so fused and unfused CUDA compute the same bits when
// NVRTC and nvcc come from one CUDA release; against the CPU (glibc's functions) they agree within
// the functions' documented ulp bounds (docs/fusion.md).
#pragma once

#include "runtime/plan/FusedProgram.h"

#include <string>
#include <vector>

namespace hgp {

/// The name every generated kernel's entry point has (each cubin holds one).
constexpr const char* kFusedEntry = "hgp_fused";

/// The source of the kernel for `p` with input dtypes `in` (checked with checkFusedTypes), for
/// SM architecture `arch` (e.g. 90), and how each input is read (`maps`, one per input; empty:
/// every input has the result shape). A broadcast input's bk and k are compiled in as constants,
/// so the kernel is one of that step's shapes (and of its batch slices: the batch dim is never
/// broadcast, so bk and k do not depend on it); it takes no part in the vector width, is read
/// element by element, and its index advances with the element in the vector path.
Expected<std::string> fusedKernelSource(const FusedProgram& p, const std::vector<DType>& in, int arch,
                                        std::vector<FusedOperandMap> maps = {});

} // namespace hgp
