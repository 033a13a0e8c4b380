// OnnxTensor.h - ONNX tensors and types to IR TensorData and TensorType, and the small tensor
// utilities that constant folding needs.
//
// Everything read from a model is checked before it is trusted: element types must be ones the
// IR has, dims must be non-negative with at most 2^40 elements in all, and the declared size must
// match the bytes present (raw_data, the typed fields, or external data inside the model's
// folder). Sizes are checked against those bounds before anything is allocated, so a hostile file
// cannot make the loader allocate without bound.
#pragma once

#include "ir/Graph.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hgp {

using TensorDataPtr = std::shared_ptr<const TensorData>;

/// The most elements a tensor or a value may have.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;
/// The most bytes a tensor computed at compile time (a folded constant) may have. Shape chains
/// need a few bytes; this only stops a hostile model from folding gigabytes.
constexpr int64_t kMaxFoldedBytes = int64_t(64) << 20;

/// The IR dtype of an ONNX TensorProto.DataType, or an InvalidModel error naming `what` and the
/// type (string, float8, int4, complex, 16-bit and unsigned 32/64-bit integers are unsupported).
Expected<DType> dtypeFromOnnx(int32_t onnxType, const std::string& what);
/// "FLOAT", "INT64", "FLOAT8E4M3FN", ...; "type 42" for numbers ONNX does not define.
std::string onnxTypeName(int32_t onnxType);

/// Checks a dims list: every dim >= 0 (>= 1 unless `allowZero`), at most 2^40 elements.
/// `what` names the tensor in the error ("initializer 'w'").
Expected<Shape> checkedShape(const std::vector<int64_t>& dims, const std::string& what,
                             bool allowZero);

/// The contents of an initializer or Constant tensor, as little-endian raw bytes. `baseDir` is
/// the folder external data is resolved in; "" forbids external data. Checks the dtype, the dims
/// and that the bytes present match them exactly. Zero dims are allowed (such tensors can only
/// serve as compile-time operands; the importer rejects them as IR values).
Expected<std::shared_ptr<TensorData>>
tensorFromProto(const onnx::TensorProto& t, const std::string& baseDir, const std::string& what);

/// Reads external data for `t` (data_location EXTERNAL) from inside `baseDir`: the location
/// must be relative, must not contain "..", and no path component may be a symlink; offset and
/// length must lie inside the file and length must equal `expectedBytes`.
Expected<std::vector<uint8_t>> readExternalData(const onnx::TensorProto& t,
                                                const std::string& baseDir, int64_t expectedBytes,
                                                const std::string& what);

// ---- Tensor utilities for constant folding ------------------------------------------------

/// A tensor of `type` holding zeros; errors when it would exceed kMaxFoldedBytes.
Expected<std::shared_ptr<TensorData>> makeTensor(const TensorType& type, const std::string& what);
/// A 1-D (or, with `scalar`, rank-0) i64 tensor.
TensorDataPtr makeI64Tensor(const std::vector<int64_t>& values, bool scalar = false);

/// Element i as an integer. Floats are truncated toward zero and saturate; NaN reads as 0.
int64_t readInt(const TensorData& t, int64_t i);
/// Element i as a double.
double readDouble(const TensorData& t, int64_t i);
/// Stores `v` into element i, converting to the tensor's dtype (integers wrap like a C cast,
/// floats to integers saturate). Returns false for dtypes folding cannot write (f16, bf16).
bool writeDouble(TensorData& t, int64_t i, double v);
bool writeInt(TensorData& t, int64_t i, int64_t v);
/// Whether folding can compute in this dtype.
bool isFoldableDType(DType t);
/// All elements as integers.
std::vector<int64_t> readInts(const TensorData& t);

/// A copy of `in` with the same bytes and a new shape (same element count).
TensorDataPtr reshapeTensor(const TensorData& in, const Shape& shape);
/// Gathers `outShape` elements from `in`: output element (i0, i1, ...) reads input element
/// offset + sum(ik * strides[k]) (strides in elements, possibly 0 or negative). Slices,
/// transposes and broadcasts are all this. Errors only when the result is too large to fold.
Expected<TensorDataPtr> stridedCopy(const TensorData& in, const Shape& outShape,
                                    const std::vector<int64_t>& strides, int64_t offset,
                                    const std::string& what);
/// Row-major strides (in elements) of a shape.
std::vector<int64_t> rowMajorStrides(const Shape& s);

} // namespace hgp
