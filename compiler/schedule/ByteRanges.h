// ByteRanges.h - the bytes a step touches, for the passes that order steps by them.
//
// The memory plan lets tensors with disjoint lifetimes share bytes, and a batch slice is a
// tensor over part of its parent's bytes, so "do these two steps conflict" is a question about
// byte ranges within the two storage regions, not about tensor identity. The stream schedule
// (dependencies) and batch slicing (how far a run may be reordered) both ask it.
#pragma once

#include "runtime/plan/Plan.h"

#include <vector>

namespace hgp {

struct ByteRange {
  bool persistent;
  int64_t lo, hi; ///< [lo, hi) within the region.
};

/// Appends the ranges of the given tensors (empty tensors touch nothing).
inline void appendByteRanges(const Plan& plan, const std::vector<int>& tensors,
                             std::vector<ByteRange>& out) {
  for (int t : tensors) {
    const PlanTensor& pt = plan.tensors[size_t(t)];
    // A pitched view touches every row of its span (and not the gaps between them, which belong
    // to the other parts of its parent); the span stands for it, an over-approximation.
    if (pt.bytes() > 0)
      out.push_back({pt.storage == StorageClass::Persistent, pt.offset, pt.offset + pt.spanBytes()});
  }
}

inline std::vector<ByteRange> byteRanges(const Plan& plan, const std::vector<int>& tensors) {
  std::vector<ByteRange> out;
  appendByteRanges(plan, tensors, out);
  return out;
}

/// Whether any range of `a` shares a byte with any range of `b`.
inline bool overlap(const std::vector<ByteRange>& a, const std::vector<ByteRange>& b) {
  for (const ByteRange& x : a)
    for (const ByteRange& y : b)
      if (x.persistent == y.persistent && x.lo < y.hi && y.lo < x.hi) return true;
  return false;
}

} // namespace hgp
