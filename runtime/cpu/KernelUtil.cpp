#include "runtime/cpu/KernelUtil.h"

#include <memory>

namespace hgp::cpu {

Status checkArity(const KernelArgs& a, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut) {
  if (a.in.size() < minIn || a.in.size() > maxIn || a.out.size() < minOut || a.out.size() > maxOut)
    return a.fail("got " + std::to_string(a.in.size()) + " inputs and " +
                  std::to_string(a.out.size()) + " outputs");
  for (const auto& v : a.in)
    if (!v.shape || !v.data) return a.fail("an input has no shape or no data");
  for (const auto& v : a.out)
    if (!v.shape || !v.data) return a.fail("an output has no shape or no data");
  return Status::ok();
}

Status checkF32(const KernelArgs& a, const TensorView& v, const char* what) {
  if (v.dtype != DType::F32)
    return a.fail(std::string(what) + " must be f32, got " + dtypeName(v.dtype));
  return Status::ok();
}

Status checkShape(const KernelArgs& a, const TensorView& v, const Shape& want, const char* what) {
  if (*v.shape != want)
    return a.fail(std::string(what) + " has shape " + str(*v.shape) + ", expected " + str(want));
  return Status::ok();
}

Status checkScalar(const KernelArgs& a, const TensorView& v, DType t, const char* what) {
  if (v.dtype != t || v.numel() != 1)
    return a.fail(std::string(what) + " must be a " + dtypeName(t) + " scalar, got " +
                  dtypeName(v.dtype) + str(*v.shape));
  return Status::ok();
}

Status badData(const KernelArgs& a, const std::string& msg) {
  return Status(ErrorCode::BadData,
                std::string("cpu ") + opName(a.step.op) + " '" + a.step.loc + "': " + msg);
}

Status readInts(const KernelArgs& a, const char* name, size_t n, std::vector<int64_t>& out) {
  return inStep(a, readIntList(a.attrs(), name, n, out));
}

float* threadScratch(Scratch slot, size_t n) {
  struct Buffer {
    std::unique_ptr<float[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffers[3];
  Buffer& b = buffers[int(slot)];
  if (b.size < n) {
    b.data.reset(new float[n]); // uninitialized: callers overwrite what they use
    b.size = n;
  }
  return b.data.get();
}

namespace {
template <typename T>
void copyTyped(T* dst, const T* src, const Shape& shape, const std::vector<int64_t>& strides,
               int64_t base) {
  forEachStrided(shape, strides, base, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
}
} // namespace

void stridedCopy(void* dst, const void* src, Shape shape, std::vector<int64_t> srcStrides,
                 int64_t base, int64_t elemSize) {
  coalesceDims(shape, {&srcStrides});
  int64_t rowElems = numElements(shape) / shape[0];
  // Split the outermost dim over the pool; each chunk is a smaller strided copy.
  parallelFor(shape[0], std::max<int64_t>(1, kElementwiseGrain / rowElems),
              [&](int64_t b, int64_t e) {
                Shape part = shape;
                part[0] = e - b;
                int64_t partBase = base + b * srcStrides[0];
                uint8_t* d = static_cast<uint8_t*>(dst) + b * rowElems * elemSize;
                switch (elemSize) {
                case 1:
                  copyTyped(d, static_cast<const uint8_t*>(src), part, srcStrides, partBase);
                  break;
                case 2:
                  copyTyped(reinterpret_cast<uint16_t*>(d), static_cast<const uint16_t*>(src), part,
                            srcStrides, partBase);
                  break;
                case 4:
                  copyTyped(reinterpret_cast<uint32_t*>(d), static_cast<const uint32_t*>(src), part,
                            srcStrides, partBase);
                  break;
                case 8:
                  copyTyped(reinterpret_cast<uint64_t*>(d), static_cast<const uint64_t*>(src), part,
                            srcStrides, partBase);
                  break;
                default: {
                  const uint8_t* s = static_cast<const uint8_t*>(src);
                  forEachStrided(part, srcStrides, partBase, [&](int64_t i, int64_t off) {
                    std::memcpy(d + i * elemSize, s + off * elemSize, size_t(elemSize));
                  });
                }
                }
              });
}

} // namespace hgp::cpu
