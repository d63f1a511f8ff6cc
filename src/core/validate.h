// Argument checks shared by every op: the one place that turns a TensorView into rows, and that
// words the error messages ("<op>: <arg>: expected <what> but got <what>").
//
// Ops validate everything before any backend runs, so a failed call writes nothing.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/fp8.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"

#define FUSEKIT_RETURN_IF_ERROR(expr)   \
  do {                                  \
    ::fusekit::Status status_ = (expr); \
    if (!status_.ok()) return status_;  \
  } while (0)

namespace fusekit::detail {

// A tensor seen as M rows of N contiguous elements, row r starting at data + r * row_stride, or,
// for a tensor whose rows come in runs (as_row_runs), at
//   data + r * row_stride + (r / run_rows) * run_skip:
// runs of run_rows rows one row_stride apart, each run starting run_skip elements further on than
// the row stride alone would put it. Per-head rows of a fused projection's output are such runs:
// q = qkv[:, :H * D].view(T, H, D) has runs of H rows of stride D, one run per token (run_skip =
// qkv's row width - H * D).
struct Rows {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements
  int64_t run_rows = 0;    // 0: one run (row r at data + r * row_stride); else divides rows
  int64_t run_skip = 0;    // elements; may be negative (rows padded past N within a run)

  // Bytes from the first to one past the last element touched; 0 when empty.
  int64_t span_bytes() const;
};

// Formats "<op>: <arg>: <message>".
Status invalid(const char* op, const char* arg, const std::string& message);
Status unsupported(const char* op, const char* arg, const std::string& message);

// Checks that `t` is defined, has rank 1..kMaxDims, non-negative sizes, a contiguous last
// dimension and leading dimensions that flatten into one row stride >= N, and a non-null pointer
// when non-empty. Fills `rows`.
Status as_rows(const char* op, const char* arg, const TensorView& t, Rows* rows);

// as_rows, where the leading dimensions may also flatten into two strides: runs of rows of one
// stride >= N (the inner dimensions), the runs themselves one stride apart (the outer ones), each
// run ending before the next begins. Such tensors get run_rows > 0.
Status as_row_runs(const char* op, const char* arg, const TensorView& t, Rows* rows);

// Puts the rows of one call's tensors on one run length: every tensor in runs must have the same
// run_rows (else an error naming the second one), and that length is returned in `run_rows` (0
// when no tensor is in runs). Fewer than 2^31 rows when there are runs (the GPU kernels divide
// 32-bit row indices), and run skips within 32 bits (the kernels' arguments hold them so).
// Tensors of one run keep run_skip 0, which places their rows the same way under any run length.
constexpr int64_t kRunRowsLimit = int64_t{1} << 31;
Status common_run_rows(const char* op, std::initializer_list<std::pair<const char*, const Rows*>>
                                           tensors,
                       int64_t* run_rows);

// Checks that `t` is a contiguous 1-D tensor of `n` elements (sizes of 1 may be added around it).
Status as_vector(const char* op, const char* arg, const TensorView& t, int64_t n);

Status expect_same_shape(const char* op, const char* arg, const TensorView& t,
                         const char* ref_arg, const TensorView& ref);
Status expect_dtype_in(const char* op, const char* arg, DType actual,
                       std::initializer_list<DType> allowed);
Status expect_device(const char* op, const char* arg, const TensorView& t, const Device& device,
                     const char* ref_arg);

// Fails if output `a` and `b` share a byte. Rows that interleave without meeting (column blocks
// of one buffer, or its even and odd rows) do not overlap; otherwise tensors whose spans (first
// to last byte) meet are taken to. When `exact_alias_ok`, `a` may be the very same view as `b`
// (same pointer, dtype and row stride): an op computing in place.
Status expect_no_overlap(const char* op, const char* a_arg, const Rows& a, const char* b_arg,
                         const Rows& b, bool exact_alias_ok = false);

// A float as the messages print it: "-1e-10", "0.5", "inf" (std::to_string would print
// "-0.000000" for the first).
std::string float_string(float v);

// Fails unless `eps` is finite and > 0.
Status expect_positive_eps(const char* op, float eps);

// Shapes as the messages print them ("[4, 64]"), and `ref`'s shape with the last dimension
// replaced by `last`.
std::string shape_string(const std::vector<int64_t>& shape);
std::vector<int64_t> with_last(const TensorView& ref, int64_t last);

// Fails unless `t` has exactly the shape `expected`; `why` says where that shape comes from.
Status expect_shape(const char* op, const char* arg, const TensorView& t,
                    const std::vector<int64_t>& expected, const char* why);

// ---- fp8 outputs (every op that writes fp8 codes with float32 scales) ----

// Fails unless `format` is one of the Fp8Format values.
Status expect_fp8_format(const char* op, Fp8Format format);

// Fails unless `bound` is 0 (no bound) or > 0 (NaN and negative values fail).
Status expect_scale_upper_bound(const char* op, float bound);

// Fails unless `actual` is the fp8 dtype of `format`, naming both (the e4m3fn / e4m3fnuz mix-up
// that would silently halve or double every value).
Status expect_fp8_dtype(const char* op, const char* arg, DType actual, Fp8Format format);

// A dynamic scale, one float32 per row of `out`: shape [rows] or out's shape with the last
// dimension 1, elements contiguous, on `device`. Fills `scale_rows` (one row of `rows` elements)
// for the overlap checks.
Status as_row_scales(const char* op, const char* arg, const TensorView& scale, int64_t rows,
                     const TensorView& out, const Device& device, const char* device_ref,
                     Rows* scale_rows);

// A static scale: one float32 element, shape [] or [1], on `device` (read by the op, so it may
// live on the GPU and change between CUDA-graph replays). Fills `scale_rows` (one element).
Status as_scalar_scale(const char* op, const char* arg, const TensorView& scale,
                       const Device& device, const char* device_ref, Rows* scale_rows);

}  // namespace fusekit::detail
