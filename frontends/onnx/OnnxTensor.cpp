#include "frontends/onnx/OnnxTensor.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hgp {

static_assert(std::endian::native == std::endian::little,
              "the loader copies raw_data as is: it assumes a little-endian host");

namespace {

Status invalid(const std::string& msg) {
  return Status(ErrorCode::InvalidModel, msg);
}

/// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Parses a non-negative decimal integer with no sign, spaces or overflow.
bool parseSize(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

template <typename T> void putLE(std::vector<uint8_t>& bytes, size_t i, T v) {
  std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
}

/// Converts the typed repeated field that holds `t`'s elements to raw bytes.
Expected<std::vector<uint8_t>> typedFieldBytes(const onnx::TensorProto& t, DType dt, int64_t n,
                                               const std::string& what) {
  auto count = [&](int64_t have, const char* field) -> Status {
    if (have != n)
      return invalid(what + " has " + std::to_string(have) + " values in " + field + ", its dims " +
                     "need " + std::to_string(n));
    return Status::ok();
  };
  switch (dt) {
  case DType::F32:
    HGP_TRY(count(t.float_data_size(), "float_data"));
    break;
  case DType::F64:
    HGP_TRY(count(t.double_data_size(), "double_data"));
    break;
  case DType::I64:
    HGP_TRY(count(t.int64_data_size(), "int64_data"));
    break;
  default:
    HGP_TRY(count(t.int32_data_size(), "int32_data"));
    break;
  }
  // The counts match the repeated fields present, so this is bounded by the file size.
  std::vector<uint8_t> bytes(static_cast<size_t>(n * dtypeSize(dt)));
  switch (dt) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i) putLE<float>(bytes, size_t(i), t.float_data(int(i)));
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i) putLE<double>(bytes, size_t(i), t.double_data(int(i)));
    break;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i) putLE<int64_t>(bytes, size_t(i), t.int64_data(int(i)));
    break;
  default:
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = t.int32_data(int(i));
      switch (dt) {
      case DType::I32:
        putLE<int32_t>(bytes, size_t(i), v);
        break;
      case DType::F16:
      case DType::BF16:
        putLE<uint16_t>(bytes, size_t(i), uint16_t(v));
        break;
      case DType::Bool:
        bytes[size_t(i)] = v != 0;
        break;
      default:
        bytes[size_t(i)] = uint8_t(v);
        break; // I8, U8
      }
    }
    break;
  }
  return bytes;
}

/// Opens `location` below the directory `baseDir`, refusing symlinks anywhere on the way.
Expected<int> openInside(const std::string& baseDir, const std::string& location,
                         const std::string& what) {
  if (location.empty()) return invalid(what + ": external data has no location");
  if (location[0] == '/')
    return invalid(what + ": external data location '" + location + "' is an absolute path");
  if (location.find('\0') != std::string::npos)
    return invalid(what + ": external data location contains a NUL byte");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find('/', start);
    if (end == std::string::npos) end = location.size();
    std::string p = location.substr(start, end - start);
    if (p == "..")
      return invalid(what + ": external data location '" + location +
                     "' escapes the model folder (it contains '..')");
    if (!p.empty() && p != ".") parts.push_back(p);
    start = end + 1;
  }
  if (parts.empty()) return invalid(what + ": external data location '" + location + "' is empty");
  Fd dir(::open(baseDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd < 0) return invalid(what + ": cannot open the model folder '" + baseDir + "'");
  for (size_t i = 0; i < parts.size(); ++i) {
    struct stat st;
    if (::fstatat(dir.fd, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return invalid(what + ": external data file '" + location + "' does not exist");
    if (S_ISLNK(st.st_mode))
      return invalid(what + ": external data path '" + location + "' goes through a symlink ('" +
                     parts[i] + "'); symlinks could escape the model folder");
    bool last = i + 1 == parts.size();
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    int fd = ::openat(dir.fd, parts[i].c_str(), flags);
    if (fd < 0) return invalid(what + ": cannot open external data '" + location + "'");
    if (last) {
      Fd file(fd);
      if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
        return invalid(what + ": external data '" + location + "' is not a regular file");
      file.fd = -1;
      return fd;
    }
    ::close(dir.fd);
    dir.fd = fd;
  }
  return invalid(what + ": bad external data location");
}

} // namespace

Expected<DType> dtypeFromOnnx(int32_t onnxType, const std::string& what) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::UINT8:
    return DType::U8;
  case onnx::TensorProto::INT8:
    return DType::I8;
  case onnx::TensorProto::INT32:
    return DType::I32;
  case onnx::TensorProto::INT64:
    return DType::I64;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::DOUBLE:
    return DType::F64;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  default:
    break;
  }
  if (onnxType == 0) return invalid(what + " has no element type");
  return invalid(what + " has unsupported element type " + onnxTypeName(onnxType));
}

std::string onnxTypeName(int32_t onnxType) {
  static const char* const kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1"};
  if (onnxType >= 0 && onnxType < int32_t(std::size(kNames))) return kNames[onnxType];
  return "type " + std::to_string(onnxType);
}

Expected<Shape> checkedShape(const std::vector<int64_t>& dims, const std::string& what,
                             bool allowZero) {
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < 0 || (d == 0 && !allowZero))
      return invalid(what + " has an invalid dim " + std::to_string(d) + " at position " +
                     std::to_string(i) + " (dims must be positive)");
    if (d > 0 && n > kMaxTensorElements / d) return invalid(what + " has more than 2^40 elements");
    n = d == 0 ? 0 : n * d;
  }
  if (n > kMaxTensorElements) return invalid(what + " has more than 2^40 elements");
  return Shape(dims);
}

Expected<std::vector<uint8_t>> readExternalData(const onnx::TensorProto& t,
                                                const std::string& baseDir, int64_t expectedBytes,
                                                const std::string& what) {
  if (baseDir.empty())
    return invalid(what + " uses external data, which is not allowed here (no model folder)");
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      if (!parseSize(kv.value(), offset))
        return invalid(what + ": external data offset '" + kv.value() + "' is not a number");
    } else if (kv.key() == "length") {
      if (!parseSize(kv.value(), length))
        return invalid(what + ": external data length '" + kv.value() + "' is not a number");
    }
  }
  HGP_ASSIGN_OR_RETURN(int fdRaw, openInside(baseDir, location, what));
  Fd file(fdRaw);
  struct stat st;
  if (::fstat(file.fd, &st) != 0) return invalid(what + ": cannot stat '" + location + "'");
  int64_t size = st.st_size;
  if (length < 0) length = size >= offset ? size - offset : -1;
  if (offset > size || length < 0 || length > size - offset)
    return invalid(what + ": external data offset " + std::to_string(offset) + " + length " +
                   std::to_string(length) + " runs past the end of '" + location + "' (" +
                   std::to_string(size) + " bytes)");
  if (length != expectedBytes)
    return invalid(what + ": external data length " + std::to_string(length) +
                   " does not match its dims and type (" + std::to_string(expectedBytes) +
                   " bytes)");
  std::vector<uint8_t> bytes(static_cast<size_t>(length));
  int64_t done = 0;
  while (done < length) {
    ssize_t r = ::pread(file.fd, bytes.data() + done, size_t(length - done), off_t(offset + done));
    if (r <= 0) return invalid(what + ": cannot read external data from '" + location + "'");
    done += r;
  }
  return bytes;
}

Expected<std::shared_ptr<TensorData>>
tensorFromProto(const onnx::TensorProto& t, const std::string& baseDir, const std::string& what) {
  if (t.has_segment()) return invalid(what + " is segmented, which is not supported");
  HGP_ASSIGN_OR_RETURN(DType dt, dtypeFromOnnx(t.data_type(), what));
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  HGP_ASSIGN_OR_RETURN(Shape shape, checkedShape(dims, what, /*allowZero=*/true));
  auto data = std::make_shared<TensorData>();
  data->type = {dt, shape};
  int64_t n = numElements(shape);
  int64_t nbytes = n * dtypeSize(dt);
  bool typed = t.float_data_size() || t.double_data_size() || t.int64_data_size() ||
               t.int32_data_size() || t.uint64_data_size() || t.string_data_size();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (typed || t.has_raw_data())
      return invalid(what + " has external data and inline data at once");
    HGP_ASSIGN_OR_RETURN(data->bytes, readExternalData(t, baseDir, nbytes, what));
  } else if (t.has_raw_data()) {
    if (typed) return invalid(what + " has both raw_data and a typed data field");
    if (int64_t(t.raw_data().size()) != nbytes)
      return invalid(what + " raw_data has " + std::to_string(t.raw_data().size()) +
                     " bytes, its dims and type need " + std::to_string(nbytes));
    data->bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else if (n > 0 || typed) {
    if (!typed) return invalid(what + " has no data");
    HGP_ASSIGN_OR_RETURN(data->bytes, typedFieldBytes(t, dt, n, what));
  }
  return data;
}

// ---- Folding utilities ----------------------------------------------------------------------

Expected<std::shared_ptr<TensorData>> makeTensor(const TensorType& type, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : type.shape) {
    if (d < 0) return invalid(what + ": negative dim");
    if (d > 0 && n > kMaxFoldedBytes / d)
      return invalid(what + ": the folded constant would exceed 64 MiB");
    n *= d;
  }
  if (n * dtypeSize(type.dtype) > kMaxFoldedBytes)
    return invalid(what + ": the folded constant would exceed 64 MiB");
  auto t = std::make_shared<TensorData>();
  t->type = type;
  t->bytes.assign(size_t(n * dtypeSize(type.dtype)), 0);
  return t;
}

TensorDataPtr makeI64Tensor(const std::vector<int64_t>& values, bool scalar) {
  auto t = std::make_shared<TensorData>();
  t->type = {DType::I64, scalar ? Shape{} : Shape{int64_t(values.size())}};
  t->bytes.resize(values.size() * 8);
  if (!values.empty()) std::memcpy(t->bytes.data(), values.data(), values.size() * 8);
  return t;
}

bool isFoldableDType(DType t) {
  return t != DType::F16 && t != DType::BF16;
}

int64_t readInt(const TensorData& t, int64_t i) {
  if (!isFloatDType(t.type.dtype)) return t.elementAsInt(i);
  double v = t.elementAsDouble(i);
  if (std::isnan(v)) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return int64_t(v);
}

double readDouble(const TensorData& t, int64_t i) {
  return t.elementAsDouble(i);
}

std::vector<int64_t> readInts(const TensorData& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.type.numElements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = readInt(t, int64_t(i));
  return out;
}

bool writeInt(TensorData& t, int64_t i, int64_t v) {
  uint8_t* p = t.bytes.data() + i * dtypeSize(t.type.dtype);
  switch (t.type.dtype) {
  case DType::I64:
    std::memcpy(p, &v, 8);
    return true;
  case DType::I32: {
    int32_t x = int32_t(v);
    std::memcpy(p, &x, 4);
    return true;
  }
  case DType::I8:
  case DType::U8:
    *p = uint8_t(v);
    return true;
  case DType::Bool:
    *p = v != 0;
    return true;
  case DType::F32: {
    float x = float(v);
    std::memcpy(p, &x, 4);
    return true;
  }
  case DType::F64: {
    double x = double(v);
    std::memcpy(p, &x, 8);
    return true;
  }
  default:
    return false;
  }
}

bool writeDouble(TensorData& t, int64_t i, double v) {
  uint8_t* p = t.bytes.data() + i * dtypeSize(t.type.dtype);
  switch (t.type.dtype) {
  case DType::F32: {
    float x = float(v);
    std::memcpy(p, &x, 4);
    return true;
  }
  case DType::F64:
    std::memcpy(p, &v, 8);
    return true;
  case DType::Bool:
    *p = v != 0;
    return true;
  default:
    break;
  }
  if (!isFoldableDType(t.type.dtype)) return false;
  int64_t x = std::isnan(v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : int64_t(v);
  return writeInt(t, i, x);
}

TensorDataPtr reshapeTensor(const TensorData& in, const Shape& shape) {
  auto t = std::make_shared<TensorData>(in);
  t->type.shape = shape;
  t->onnxName.clear();
  return t;
}

std::vector<int64_t> rowMajorStrides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Expected<TensorDataPtr> stridedCopy(const TensorData& in, const Shape& outShape,
                                    const std::vector<int64_t>& strides, int64_t offset,
                                    const std::string& what) {
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({in.type.dtype, outShape}, what));
  int64_t n = out->type.numElements(), esize = dtypeSize(in.type.dtype);
  int64_t inN = in.type.numElements();
  if (n == 0) return TensorDataPtr(std::move(out));
  std::vector<int64_t> idx(outShape.size(), 0);
  int64_t src = offset;
  for (int64_t k = 0; k < n; ++k) {
    if (src < 0 || src >= inN || int64_t(in.bytes.size()) < inN * esize)
      return Status(ErrorCode::Internal, what + ": folding read out of bounds");
    std::memcpy(out->bytes.data() + k * esize, in.bytes.data() + src * esize, size_t(esize));
    for (size_t d = outShape.size(); d-- > 0;) {
      if (++idx[d] < outShape[d]) {
        src += strides[d];
        break;
      }
      src -= strides[d] * (outShape[d] - 1);
      idx[d] = 0;
    }
  }
  return TensorDataPtr(std::move(out));
}

} // namespace hgp
