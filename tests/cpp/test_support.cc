// Test support implementation. See test_support.h.
#include "test_support.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/fp8.h"
#include "core/half.h"

namespace fusekit::testing {

const char* backend_name(Backend b) { return b == Backend::kCPU ? "cpu" : "gpu"; }

Device device_of(Backend b) { return b == Backend::kCPU ? Device::cpu() : Device::gpu(0); }

bool backend_available(Backend b, std::string* reason) {
  if (b == Backend::kCPU) return true;
  std::string why;
  if (gpu_count(&why) > 0) return true;
  if (reason != nullptr) *reason = "GPU tests skipped: " + why;
  return false;
}

bool repeat_runs_compared() {
  const char* flag = std::getenv("FUSEKIT_TEST_UNDER_SANITIZER");
  return flag == nullptr || std::string(flag).empty() || std::string(flag) == "0";
}

Tolerance output_tolerance(DType dtype) {
  // The kernels compute in float32 and round once to the output dtype, so an output may differ
  // from the correctly rounded float64 value by one unit in the last place when the float32 value
  // lies on the other side of a rounding boundary: 2^-7 relative for bfloat16 (8 significant
  // bits), 2^-10 for float16 (11 bits). float32 outputs carry the float32 reduction error of
  // sums over up to 262144 elements (~1e-5 relative for the rstd), hence 1e-4. The absolute term
  // covers LayerNorm's (h - mean) cancellation near zero.
  switch (dtype) {
    case DType::kBFloat16: return {1.0 / 128, 1e-4};
    case DType::kFloat16: return {1.0 / 1024, 1e-4};
    default: return {1e-4, 1e-6};
  }
}

double round_to_dtype(double v, DType dtype) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case DType::kBFloat16: return detail::bf16_to_float(detail::float_to_bf16(f));
    case DType::kFloat16: return detail::fp16_to_float(detail::float_to_fp16(f));
    default: return f;
  }
}

uint16_t poison_bits16() { return 0xffff; }

RowBuffer::RowBuffer(Backend backend, DType dtype, int64_t rows, int64_t cols, int64_t row_stride,
                     int64_t offset, int64_t run_rows, int64_t run_skip)
    : backend_(backend),
      dtype_(dtype),
      rows_(rows),
      cols_(cols),
      row_stride_(row_stride < 0 ? cols : row_stride),
      offset_(offset),
      run_rows_(run_rows),
      run_skip_(run_rows > 0 ? run_skip : 0) {
  if (run_rows_ > 0 && rows_ % run_rows_ != 0) {
    throw std::runtime_error("RowBuffer: rows must be whole runs");
  }
  const int64_t elems = (rows_ > 0 ? index_elems(rows_ - 1, cols_) : offset_) + 1;
  host_.assign(static_cast<size_t>(elems) * dtype_size(dtype_), poison_byte());
  if (backend_ == Backend::kGPU) {
    const Status s = gpu_malloc(&device_, host_.size());
    if (!s.ok()) throw std::runtime_error(s.to_string());
    upload();
  }
}

RowBuffer::~RowBuffer() {
  if (device_ != nullptr) (void)gpu_free(device_);
}

RowBuffer::RowBuffer(RowBuffer&& o) noexcept { *this = std::move(o); }

RowBuffer& RowBuffer::operator=(RowBuffer&& o) noexcept {
  if (this != &o) {
    if (device_ != nullptr) (void)gpu_free(device_);
    backend_ = o.backend_;
    dtype_ = o.dtype_;
    rows_ = o.rows_;
    cols_ = o.cols_;
    row_stride_ = o.row_stride_;
    offset_ = o.offset_;
    run_rows_ = o.run_rows_;
    run_skip_ = o.run_skip_;
    host_ = std::move(o.host_);
    device_ = o.device_;
    o.device_ = nullptr;
  }
  return *this;
}

void* RowBuffer::data() const {
  uint8_t* base = backend_ == Backend::kGPU ? static_cast<uint8_t*>(device_)
                                            : const_cast<uint8_t*>(host_.data());
  return base + offset_ * dtype_size(dtype_);
}

TensorView RowBuffer::view() const {
  if (run_rows_ > 0 && run_rows_ < rows_) {
    throw std::runtime_error("RowBuffer::view: rows in runs need view_3d");
  }
  return TensorView::strided(data(), dtype_, device_of(backend_), {rows_, cols_},
                             {row_stride_, 1});
}

TensorView RowBuffer::view_1d() const {
  return TensorView::contiguous(data(), dtype_, device_of(backend_), {cols_});
}

TensorView RowBuffer::view_3d(int64_t d0) const {
  if (run_rows_ > 0 && run_rows_ != rows_ / d0) {
    throw std::runtime_error("RowBuffer::view_3d: d0 must be the number of runs");
  }
  return TensorView::strided(data(), dtype_, device_of(backend_), {d0, rows_ / d0, cols_},
                             {rows_ / d0 * row_stride_ + run_skip_, row_stride_, 1});
}

int64_t RowBuffer::index_elems(int64_t r, int64_t c) const {
  return offset_ + r * row_stride_ + (run_rows_ > 0 ? r / run_rows_ * run_skip_ : 0) + c;
}

size_t RowBuffer::index_bytes(int64_t r, int64_t c) const {
  return static_cast<size_t>(index_elems(r, c)) * dtype_size(dtype_);
}

uint64_t RowBuffer::raw(int64_t r, int64_t c) const {
  uint64_t bits = 0;
  std::memcpy(&bits, host_.data() + index_bytes(r, c), dtype_size(dtype_));
  return bits;
}

double RowBuffer::get(int64_t r, int64_t c) const {
  const uint8_t* p = host_.data() + index_bytes(r, c);
  uint16_t h;
  switch (dtype_) {
    case DType::kBFloat16: std::memcpy(&h, p, 2); return detail::bf16_to_float(h);
    case DType::kFloat16: std::memcpy(&h, p, 2); return detail::fp16_to_float(h);
    case DType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kFloat64: { double d; std::memcpy(&d, p, 8); return d; }
    case DType::kFloat8E4M3FN: return detail::fp8_to_float(*p, Fp8Format::kE4M3FN);
    case DType::kFloat8E4M3FNUZ: return detail::fp8_to_float(*p, Fp8Format::kE4M3FNUZ);
    default: throw std::runtime_error("RowBuffer::get: not a float dtype");
  }
}

void RowBuffer::set(int64_t r, int64_t c, double v) {
  uint8_t* p = host_.data() + index_bytes(r, c);
  const float f = static_cast<float>(v);
  uint16_t h;
  switch (dtype_) {
    case DType::kBFloat16: h = detail::float_to_bf16(f); std::memcpy(p, &h, 2); break;
    case DType::kFloat16: h = detail::float_to_fp16(f); std::memcpy(p, &h, 2); break;
    case DType::kFloat32: std::memcpy(p, &f, 4); break;
    case DType::kFloat64: std::memcpy(p, &v, 8); break;
    case DType::kFloat8E4M3FN: *p = detail::float_to_fp8(f, Fp8Format::kE4M3FN); break;
    case DType::kFloat8E4M3FNUZ: *p = detail::float_to_fp8(f, Fp8Format::kE4M3FNUZ); break;
    default: {
      // Integer dtypes only appear in bad-input tests: store the truncated value.
      const int64_t i = static_cast<int64_t>(v);
      std::memcpy(p, &i, dtype_size(dtype_));
    }
  }
}

void RowBuffer::fill_random(std::mt19937& rng, double scale, double mean) {
  // Sum of two uniforms (a triangular distribution on [-2, 2] * scale, variance scale^2 * 2/3):
  // cheap, signed, spread over several binades, and never exactly zero.
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < cols_; ++c) {
      const double u = static_cast<double>(rng()) * (1.0 / 4294967296.0);
      const double w = static_cast<double>(rng()) * (1.0 / 4294967296.0);
      double v = (u + w - 1.0) * 2.0;
      if (std::fabs(v) < 1e-3) v = v < 0 ? -1e-3 : 1e-3;
      set(r, c, mean + scale * v);
    }
  }
}

void RowBuffer::fill_rows(const std::vector<double>& row) {
  if (rows_ == 0) return;
  for (int64_t c = 0; c < cols_; ++c) set(0, c, row[static_cast<size_t>(c)]);
  const size_t row_bytes = static_cast<size_t>(cols_) * dtype_size(dtype_);
  for (int64_t r = 1; r < rows_; ++r) {
    std::memcpy(host_.data() + index_bytes(r, 0), host_.data() + index_bytes(0, 0), row_bytes);
  }
}

void RowBuffer::poison() { std::fill(host_.begin(), host_.end(), poison_byte()); }

uint8_t RowBuffer::poison_byte() const {
  // All-ones bytes are NaN in every float dtype but e4m3fnuz, whose only NaN is 0x80.
  return dtype_ == DType::kFloat8E4M3FNUZ ? 0x80 : 0xff;
}

void RowBuffer::upload() {
  if (backend_ != Backend::kGPU) return;
  const Status s = gpu_memcpy(device_, host_.data(), host_.size(), CopyKind::kHostToDevice);
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

void RowBuffer::download() {
  if (backend_ != Backend::kGPU) return;
  const Status s = gpu_memcpy(host_.data(), device_, host_.size(), CopyKind::kDeviceToHost);
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

bool RowBuffer::padding_untouched() const {
  // Rows are disjoint and ascending: check the gaps between them, and before and after.
  const size_t row_bytes = static_cast<size_t>(cols_) * dtype_size(dtype_);
  size_t next = 0;
  for (int64_t r = 0; r <= rows_; ++r) {
    const size_t begin = r < rows_ ? index_bytes(r, 0) : host_.size();
    for (size_t b = next; b < begin; ++b) {
      if (host_[b] != poison_byte()) return false;
    }
    if (r < rows_) next = begin + row_bytes;
  }
  return true;
}

bool RowBuffer::rows_hold_no_nan() const {
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < cols_; ++c) {
      if (std::isnan(get(r, c))) return false;
    }
  }
  return true;
}

}  // namespace fusekit::testing
