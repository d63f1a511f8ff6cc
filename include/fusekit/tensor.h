// TensorView: the non-owning description of a tensor that every fusekit op takes.
//
// fusekit owns no memory. A TensorView is a data pointer plus dtype, device, shape and strides
// (in elements, as PyTorch counts them), so it can describe a PyTorch tensor, a CUDA/HIP
// allocation or a std::vector alike without copying. A default-constructed view is "absent":
// optional arguments (a LayerNorm without bias, an rstd output nobody asked for) are passed as
// TensorView() and report defined() == false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace fusekit {

enum class DType : int32_t {
  kFloat32 = 0,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt32,
  kInt64,
  kUInt8,
  // 8-bit floats (1 sign, 4 exponent, 3 mantissa bits) in the two incompatible encodings in use;
  // see fusekit/fp8.h. A view says which one it holds: the same bits mean different numbers.
  kFloat8E4M3FN,    // NVIDIA / OCP: bias 7, largest 448, NaN S.1111.111, no inf
  kFloat8E4M3FNUZ,  // AMD MI300: bias 8, largest 240, one NaN (0x80), no inf, no -0
};

const char* dtype_name(DType dtype);  // "float32", "bfloat16", ...
std::size_t dtype_size(DType dtype);  // bytes per element

enum class DeviceType : int32_t { kCPU = 0, kGPU = 1 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // GPU ordinal; 0 for the CPU

  static Device cpu() { return Device{DeviceType::kCPU, 0}; }
  static Device gpu(int index = 0) { return Device{DeviceType::kGPU, index}; }
  bool is_gpu() const { return type == DeviceType::kGPU; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string to_string() const;  // "cpu", "gpu:0"
};

// A cudaStream_t or hipStream_t, passed opaquely so that public headers need no GPU header.
// nullptr is the default (legacy) stream. CPU calls ignore it.
using Stream = void*;

constexpr int kMaxDims = 8;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Device device;
  int ndim = -1;  // -1: absent. Ranks above kMaxDims are kept here and rejected by every op.
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  TensorView() = default;

  // Row-major contiguous strides.
  static TensorView contiguous(void* data, DType dtype, Device device,
                               std::initializer_list<int64_t> shape);
  // Explicit strides, in elements; `strides` must have as many entries as `shape`.
  static TensorView strided(void* data, DType dtype, Device device,
                            std::initializer_list<int64_t> shape,
                            std::initializer_list<int64_t> strides);
  // Array form of the above (strides == nullptr means contiguous).
  static TensorView from_arrays(void* data, DType dtype, Device device, int ndim,
                                const int64_t* shape, const int64_t* strides);

  bool defined() const { return ndim >= 0; }
  int64_t numel() const;
  // Negative dims count from the end, as in Python.
  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t stride(int dim) const { return strides[dim < 0 ? dim + ndim : dim]; }
  std::string shape_string() const;  // "[2, 4096]"
};

}  // namespace fusekit
