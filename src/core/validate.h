// Argument checks shared by every op: the one place that turns a TensorView into rows, and that
// words the error messages ("<op>: <arg>: expected <what> but got <what>").
//
// Ops validate everything before any backend runs, so a failed call writes nothing.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "fusekit/status.h"
#include "fusekit/tensor.h"

#define FUSEKIT_RETURN_IF_ERROR(expr)   \
  do {                                  \
    ::fusekit::Status status_ = (expr); \
    if (!status_.ok()) return status_;  \
  } while (0)

namespace fusekit::detail {

// A tensor seen as M rows of N contiguous elements, row r starting at data + r * row_stride.
struct Rows {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements

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

// Checks that `t` is a contiguous 1-D tensor of `n` elements (sizes of 1 may be added around it).
Status as_vector(const char* op, const char* arg, const TensorView& t, int64_t n);

Status expect_same_shape(const char* op, const char* arg, const TensorView& t,
                         const char* ref_arg, const TensorView& ref);
Status expect_dtype_in(const char* op, const char* arg, DType actual,
                       std::initializer_list<DType> allowed);
Status expect_device(const char* op, const char* arg, const TensorView& t, const Device& device,
                     const char* ref_arg);

// Fails if the memory of output `a` overlaps that of `b`. When `exact_alias_ok`, `a` may be the
// very same view as `b` (same pointer, dtype and row stride): an op computing in place.
Status expect_no_overlap(const char* op, const char* a_arg, const Rows& a, const char* b_arg,
                         const Rows& b, bool exact_alias_ok = false);

// Fails unless `eps` is finite and > 0.
Status expect_positive_eps(const char* op, float eps);

}  // namespace fusekit::detail
