// TensorView helpers and dtype names: the small, dependency-free core every op builds on.
#include <sstream>

#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8_e4m3fnuz";
  }
  return "unknown-dtype";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
    case DType::kFloat8E4M3FN: return 1;
    case DType::kFloat8E4M3FNUZ: return 1;
  }
  return 0;
}

std::string Device::to_string() const {
  return type == DeviceType::kCPU ? std::string("cpu") : "gpu:" + std::to_string(index);
}

TensorView TensorView::from_arrays(void* data, DType dtype, Device device, int ndim,
                                   const int64_t* shape, const int64_t* strides) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = ndim;  // kept even when > kMaxDims, so validation can say what came
  const int kept = ndim < kMaxDims ? ndim : kMaxDims;
  for (int d = 0; d < kept; ++d) t.shape[d] = shape[d];
  if (strides != nullptr) {
    for (int d = 0; d < kept; ++d) t.strides[d] = strides[d];
  } else {
    int64_t s = 1;
    for (int d = kept - 1; d >= 0; --d) {
      t.strides[d] = s;
      s *= shape[d];
    }
  }
  return t;
}

TensorView TensorView::contiguous(void* data, DType dtype, Device device,
                                  std::initializer_list<int64_t> shape) {
  return from_arrays(data, dtype, device, static_cast<int>(shape.size()), shape.begin(), nullptr);
}

TensorView TensorView::strided(void* data, DType dtype, Device device,
                               std::initializer_list<int64_t> shape,
                               std::initializer_list<int64_t> strides) {
  if (strides.size() != shape.size()) {
    // A mismatched stride list cannot describe a tensor: keep the rank and leave strides zero,
    // which validation rejects for any dimension larger than one.
    TensorView t = from_arrays(data, dtype, device, static_cast<int>(shape.size()),
                               shape.begin(), nullptr);
    for (int64_t& s : t.strides) s = 0;
    return t;
  }
  return from_arrays(data, dtype, device, static_cast<int>(shape.size()), shape.begin(),
                     strides.begin());
}

int64_t TensorView::numel() const {
  if (ndim < 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < ndim && d < kMaxDims; ++d) n *= shape[d];
  return n;
}

std::string TensorView::shape_string() const {
  std::ostringstream s;
  s << "[";
  for (int d = 0; d < ndim && d < kMaxDims; ++d) s << (d ? ", " : "") << shape[d];
  s << "]";
  return s.str();
}

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kRuntimeError: return "runtime error";
  }
  return "unknown status";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace fusekit
