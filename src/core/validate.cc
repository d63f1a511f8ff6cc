// Argument checks shared by every op. See validate.h.
#include "core/validate.h"

#include <cmath>
#include <sstream>

namespace fusekit::detail {

int64_t Rows::span_bytes() const {
  if (rows == 0 || cols == 0) return 0;
  return ((rows - 1) * row_stride + cols) * static_cast<int64_t>(dtype_size(dtype));
}

Status invalid(const char* op, const char* arg, const std::string& message) {
  return Status::invalid_argument(std::string(op) + ": " + arg + ": " + message);
}

Status unsupported(const char* op, const char* arg, const std::string& message) {
  return Status::unsupported(std::string(op) + ": " + arg + ": " + message);
}

Status as_rows(const char* op, const char* arg, const TensorView& t, Rows* rows) {
  if (!t.defined()) return invalid(op, arg, "expected a tensor but got none");
  if (t.ndim < 1 || t.ndim > kMaxDims) {
    return invalid(op, arg, "expected rank 1 to " + std::to_string(kMaxDims) + " but got rank " +
                                std::to_string(t.ndim));
  }
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) {
      return invalid(op, arg, "expected non-negative sizes but got shape " + t.shape_string());
    }
    if (t.strides[d] < 0) {
      return invalid(op, arg, "expected non-negative strides but got stride " +
                                  std::to_string(t.strides[d]) + " in dim " + std::to_string(d));
    }
  }
  const int64_t n = t.shape[t.ndim - 1];
  if (n > 1 && t.strides[t.ndim - 1] != 1) {
    return invalid(op, arg, "expected a contiguous last dimension (stride 1) but got stride " +
                                std::to_string(t.strides[t.ndim - 1]));
  }
  // Flatten the leading dims: walking outwards, every dim of size > 1 must step by exactly the
  // span of the dims inside it, measured in rows of `row_stride`. A leading dim of size 0 leaves
  // no rows, whatever the strides (an empty slice of a larger tensor keeps its parent's).
  bool no_rows = false;
  for (int d = 0; d + 1 < t.ndim; ++d) no_rows = no_rows || t.shape[d] == 0;
  int64_t m = no_rows ? 0 : 1;
  int64_t row_stride = -1;
  for (int d = t.ndim - 2; d >= 0 && !no_rows; --d) {
    const int64_t size = t.shape[d];
    if (size == 1) continue;
    if (row_stride < 0) {
      row_stride = t.strides[d];
    } else if (t.strides[d] != m * row_stride) {
      return invalid(op, arg,
                     "expected leading dimensions that flatten into rows of one stride, but dim " +
                         std::to_string(d) + " has stride " + std::to_string(t.strides[d]) +
                         " where " + std::to_string(m * row_stride) + " was needed");
    }
    m *= size;
  }
  if (row_stride < 0) row_stride = n;  // a single row: its stride is never used
  if (m > 1 && row_stride < n) {
    return invalid(op, arg, "expected a row stride >= N = " + std::to_string(n) +
                                " (rows must not overlap) but got " + std::to_string(row_stride));
  }
  if (m * n > 0 && t.data == nullptr) {
    return invalid(op, arg, "expected a non-null data pointer for shape " + t.shape_string() +
                                " but got nullptr");
  }
  rows->data = t.data;
  rows->dtype = t.dtype;
  rows->rows = m;
  rows->cols = n;
  rows->row_stride = row_stride;
  return Status();
}

Status as_vector(const char* op, const char* arg, const TensorView& t, int64_t n) {
  if (!t.defined()) return invalid(op, arg, "expected a tensor but got none");
  if (t.ndim < 1 || t.ndim > kMaxDims) {
    return invalid(op, arg, "expected a 1-D tensor of shape [" + std::to_string(n) +
                                "] but got rank " + std::to_string(t.ndim));
  }
  int64_t numel = 1;
  int big_dims = 0;
  for (int d = 0; d < t.ndim; ++d) {
    numel *= t.shape[d];
    if (t.shape[d] != 1) ++big_dims;
  }
  if (numel != n || big_dims > 1 || t.shape[t.ndim - 1] != n) {
    return invalid(op, arg, "expected shape [" + std::to_string(n) + "] but got " +
                                t.shape_string());
  }
  if (n > 1 && t.strides[t.ndim - 1] != 1) {
    return invalid(op, arg, "expected a contiguous tensor (stride 1) but got stride " +
                                std::to_string(t.strides[t.ndim - 1]));
  }
  if (n > 0 && t.data == nullptr) {
    return invalid(op, arg, "expected a non-null data pointer for shape " + t.shape_string() +
                                " but got nullptr");
  }
  return Status();
}

Status expect_same_shape(const char* op, const char* arg, const TensorView& t,
                         const char* ref_arg, const TensorView& ref) {
  bool same = t.ndim == ref.ndim;
  for (int d = 0; same && d < t.ndim && d < kMaxDims; ++d) same = t.shape[d] == ref.shape[d];
  if (!same) {
    return invalid(op, arg, "expected shape " + ref.shape_string() + " (" + ref_arg +
                                "'s shape) but got " + t.shape_string());
  }
  return Status();
}

Status expect_dtype_in(const char* op, const char* arg, DType actual,
                       std::initializer_list<DType> allowed) {
  for (DType d : allowed) {
    if (d == actual) return Status();
  }
  // Only a failed check pays for building the message.
  std::ostringstream names;
  int i = 0;
  for (DType d : allowed) names << (i++ ? " or " : "") << dtype_name(d);
  return unsupported(op, arg, "expected dtype " + names.str() + " but got " + dtype_name(actual));
}

Status expect_device(const char* op, const char* arg, const TensorView& t, const Device& device,
                     const char* ref_arg) {
  if (t.device != device) {
    return invalid(op, arg, "expected device " + device.to_string() + " (" + ref_arg +
                                "'s device) but got " + t.device.to_string());
  }
  return Status();
}

Status expect_no_overlap(const char* op, const char* a_arg, const Rows& a, const char* b_arg,
                         const Rows& b, bool exact_alias_ok) {
  const int64_t a_len = a.span_bytes();
  const int64_t b_len = b.span_bytes();
  if (a_len == 0 || b_len == 0) return Status();
  const auto a_lo = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b_lo = reinterpret_cast<std::uintptr_t>(b.data);
  const bool overlap = a_lo < b_lo + static_cast<std::uintptr_t>(b_len) &&
                       b_lo < a_lo + static_cast<std::uintptr_t>(a_len);
  if (!overlap) return Status();
  const bool exact = a.data == b.data && a.dtype == b.dtype && a.rows == b.rows &&
                     a.cols == b.cols && (a.rows <= 1 || a.row_stride == b.row_stride);
  if (exact && exact_alias_ok) return Status();
  return invalid(op, a_arg,
                 std::string("expected memory disjoint from ") + b_arg +
                     (exact_alias_ok ? " or identical to it (in place)" : "") +
                     " but the two overlap");
}

Status expect_positive_eps(const char* op, float eps) {
  if (!(std::isfinite(eps) && eps > 0.0f)) {
    std::ostringstream s;
    s << "expected a finite value > 0 but got " << eps;
    return invalid(op, "eps", s.str());
  }
  return Status();
}

}  // namespace fusekit::detail
