// Test support: buffers that live on the CPU or the GPU, poisoned with NaN, filled with random
// values, and read back as doubles; the backends the suite runs on; per-dtype tolerances.
//
// Every test allocates through RowBuffer, which holds `rows` rows of `cols` elements at
// `row_stride` apart, starting `offset` elements into its storage. The storage outside those
// elements (row padding, the offset) is poisoned with NaN and checked afterwards: an op that reads
// it produces NaN, and one that writes it is caught by rows_untouched().
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fusekit/fusekit.h"
#include "gtest/gtest.h"

namespace fusekit::testing {

enum class Backend { kCPU, kGPU };
const char* backend_name(Backend b);
Device device_of(Backend b);

// True when the suite can run on `b`; otherwise `reason` says why (for GTEST_SKIP).
bool backend_available(Backend b, std::string* reason);

// Skips the running test, printing why, where the suite cannot run on `backend` (a macro: the
// skip returns from the test body or SetUp that names it).
#define FUSEKIT_SKIP_UNLESS_AVAILABLE(backend)                                         \
  do {                                                                                 \
    std::string fusekit_skip_reason;                                                   \
    if (!::fusekit::testing::backend_available((backend), &fusekit_skip_reason)) {     \
      GTEST_SKIP() << fusekit_skip_reason;                                             \
    }                                                                                  \
  } while (0)

// Tests whose parameter is the backend alone, skipped where it is unavailable.
class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { FUSEKIT_SKIP_UNLESS_AVAILABLE(GetParam()); }
};

// Whether the invariance tests run each batch a second time to compare the two runs' bits
// (determinism). False where FUSEKIT_TEST_UNDER_SANITIZER is set to anything but 0, as
// scripts/sanitize_tests.sh sets it: a tool such as racecheck checks a launch's accesses, and a
// second launch of the same kernel on the same inputs makes the same ones, so under the tool it
// costs a sixth to a third of those tests' time (minutes each; racecheck measured 0.65-0.85x the
// time without it) and checks nothing new. Everything else
// in them (a row alone against the batch) still runs; the plain runs check determinism.
bool repeat_runs_compared();

// Tolerance for comparing an output of `dtype` with the float64 reference:
// |out - ref| <= rel * |ref| + abs.
struct Tolerance {
  double rel;
  double abs;
};
Tolerance output_tolerance(DType dtype);

double round_to_dtype(double v, DType dtype);  // through float32, as the kernels store
uint16_t poison_bits16();

class RowBuffer {
 public:
  RowBuffer() = default;
  // Rows `row_stride` elements apart from `offset`; with run_rows > 0, in runs of run_rows rows
  // whose starts lie a further run_skip elements apart (row r at offset + r * row_stride +
  // (r / run_rows) * run_skip; runs must not overlap).
  RowBuffer(Backend backend, DType dtype, int64_t rows, int64_t cols, int64_t row_stride = -1,
            int64_t offset = 0, int64_t run_rows = 0, int64_t run_skip = 0);
  ~RowBuffer();
  RowBuffer(RowBuffer&& other) noexcept;
  RowBuffer& operator=(RowBuffer&& other) noexcept;
  RowBuffer(const RowBuffer&) = delete;
  RowBuffer& operator=(const RowBuffer&) = delete;

  // Views over the same elements: [rows, cols] (one run only), [cols] (rows == 1), or [d0,
  // rows / d0, cols] (runs of rows / d0 rows, when the buffer has runs).
  TensorView view() const;
  TensorView view_1d() const;
  TensorView view_3d(int64_t d0) const;
  void* data() const;  // first element, on the buffer's device

  // Host-side access; call download() first after a device op, upload() after writing.
  double get(int64_t r, int64_t c) const;
  void set(int64_t r, int64_t c, double v);  // rounds to dtype
  uint64_t raw(int64_t r, int64_t c) const;   // the element's bits
  void fill_random(std::mt19937& rng, double scale = 1.0, double mean = 0.0);
  void fill_rows(const std::vector<double>& row);  // every row the same values
  void poison();  // whole storage to NaN bits
  uint8_t poison_byte() const;  // the byte poison() writes: a NaN pattern of the dtype
  void upload();
  void download();

  // Whether the storage outside the rows still holds the poison.
  bool padding_untouched() const;
  // Whether every element of the rows decodes to a number: an output the op never wrote still
  // holds the NaN poison, which bit-for-bit comparisons of two runs would find equal.
  bool rows_hold_no_nan() const;
  // Whether all of the storage equals that of `snapshot` bytes.
  std::vector<uint8_t> snapshot() const { return host_; }
  bool equals_snapshot(const std::vector<uint8_t>& s) const { return host_ == s; }

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t row_stride() const { return row_stride_; }
  DType dtype() const { return dtype_; }
  Backend backend() const { return backend_; }

 private:
  int64_t index_elems(int64_t r, int64_t c) const;
  size_t index_bytes(int64_t r, int64_t c) const;
  Backend backend_ = Backend::kCPU;
  DType dtype_ = DType::kFloat32;
  int64_t rows_ = 0, cols_ = 0, row_stride_ = 0, offset_ = 0, run_rows_ = 0, run_skip_ = 0;
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
};

// The memory layouts the norm families' cases (x, out, residual, residual_out with `_pad` and
// `_offset` fields, rows, rank3_d0, rank1) are checked over, each passed to `check` as a copy of
// `c`: padded rows, each tensor with its own stride (odd pads force narrow accesses); base
// pointers one or three elements past 16-byte alignment with aligned strides; a rank-3
// [3, 3, N] view over padded rows; and a 1-D [N] view (rank 1: one row), unaligned.
template <class Case, class Check>
void for_each_row_layout(const Case& c, Check check) {
  Case padded = c;
  padded.rows = 5;
  padded.x_pad = 8;
  padded.out_pad = 3;
  padded.residual_pad = 5;
  padded.residual_out_pad = 1;
  check(padded);
  Case unaligned = c;
  unaligned.rows = 5;
  unaligned.x_offset = 1;
  unaligned.out_offset = 3;
  unaligned.residual_offset = 1;
  check(unaligned);
  Case rank3 = c;
  rank3.rows = 9;
  rank3.rank3_d0 = 3;
  rank3.x_pad = 16;
  rank3.out_pad = 8;
  rank3.residual_pad = 24;
  check(rank3);
  Case rank1 = c;
  rank1.rows = 1;
  rank1.rank1 = true;
  rank1.x_offset = 1;
  rank1.out_offset = 3;
  rank1.residual_offset = 1;
  check(rank1);
}

}  // namespace fusekit::testing
