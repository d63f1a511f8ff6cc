// Argument checks shared by every op. See validate.h.
#include "core/validate.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace fusekit::detail {

int64_t Rows::span_bytes() const {
  if (rows == 0 || cols == 0) return 0;
  const int64_t last_row = rows - 1;
  const int64_t runs_before_last = run_rows > 0 ? last_row / run_rows : 0;
  return (last_row * row_stride + runs_before_last * run_skip + cols) *
         static_cast<int64_t>(dtype_size(dtype));
}

Status invalid(const char* op, const char* arg, const std::string& message) {
  return Status::invalid_argument(std::string(op) + ": " + arg + ": " + message);
}

Status unsupported(const char* op, const char* arg, const std::string& message) {
  return Status::unsupported(std::string(op) + ": " + arg + ": " + message);
}

namespace {

// Whether the element count and the byte offset just past the farthest element (sizes > 0,
// strides >= 0) both stay below 2^63.
bool extent_fits(const TensorView& t) {
  int64_t count = 1;
  int64_t last = 0;  // elements from the first to the farthest
  for (int d = 0; d < t.ndim; ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(count, t.shape[d], &count) ||
        __builtin_mul_overflow(t.shape[d] - 1, t.strides[d], &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return false;
    }
  }
  int64_t bytes = 0;
  return !__builtin_add_overflow(last, int64_t{1}, &last) &&
         !__builtin_mul_overflow(std::max(count, last), static_cast<int64_t>(dtype_size(t.dtype)),
                                 &bytes);
}

// as_rows and as_row_runs: the leading dimensions flattened into one stride, or (allow_runs) into
// two.
Status flatten_rows(const char* op, const char* arg, const TensorView& t, bool allow_runs,
                    Rows* rows) {
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
  // A leading dim of size 0 leaves no rows, whatever the strides (an empty slice of a larger
  // tensor keeps its parent's, such as x[:0, ::2]): such a tensor is a no-op, not a layout error.
  bool no_rows = false;
  for (int d = 0; d + 1 < t.ndim; ++d) no_rows = no_rows || t.shape[d] == 0;
  const int64_t n = t.shape[t.ndim - 1];
  if (!no_rows && n > 1 && t.strides[t.ndim - 1] != 1) {
    return invalid(op, arg, "expected a contiguous last dimension (stride 1) but got stride " +
                                std::to_string(t.strides[t.ndim - 1]));
  }
  // Sizes and strides whose element count or farthest element lies past 2^63 bytes would wrap
  // the 64-bit row count and offsets below.
  if (!no_rows && n > 0 && !extent_fits(t)) {
    return invalid(op, arg,
                   "expected a tensor whose elements lie within 2^63 bytes but got shape " +
                       t.shape_string() + " with strides " +
                       shape_string(std::vector<int64_t>(t.strides, t.strides + t.ndim)));
  }
  // Flatten the leading dims: walking outwards, every dim of size > 1 must step by exactly the
  // span of the dims inside it, measured in rows of `row_stride`. With runs, the first dim that
  // breaks this starts the outer level: the rows so far are one run, and the dims from there out
  // must flatten in units of its stride.
  int64_t m = no_rows ? 0 : 1;
  int64_t row_stride = -1;
  int64_t run_rows = 0;      // rows per run, once the outer level has started
  int64_t run_stride = -1;   // elements from one run's first row to the next one's
  for (int d = t.ndim - 2; d >= 0 && !no_rows; --d) {
    const int64_t size = t.shape[d];
    if (size == 1) continue;
    if (row_stride < 0) {
      row_stride = t.strides[d];
    } else if (run_rows == 0 && t.strides[d] != m * row_stride) {
      if (!allow_runs) {
        return invalid(
            op, arg,
            "expected leading dimensions that flatten into rows of one stride, but dim " +
                std::to_string(d) + " has stride " + std::to_string(t.strides[d]) + " where " +
                std::to_string(m * row_stride) + " was needed");
      }
      run_rows = m;
      run_stride = t.strides[d];
    } else if (run_rows > 0 && t.strides[d] != m / run_rows * run_stride) {
      return invalid(op, arg,
                     "expected leading dimensions that flatten into at most two strides (runs "
                     "of rows), but dim " + std::to_string(d) + " has stride " +
                         std::to_string(t.strides[d]) + " where " +
                         std::to_string(m / run_rows * run_stride) + " was needed");
    }
    m *= size;
  }
  if (row_stride < 0) row_stride = n;  // a single row: its stride is never used
  if ((run_rows > 0 ? run_rows : m) > 1 && row_stride < n) {
    return invalid(op, arg, "expected a row stride >= N = " + std::to_string(n) +
                                " (rows must not overlap) but got " + std::to_string(row_stride));
  }
  if (run_rows > 0 && run_stride < (run_rows - 1) * row_stride + n) {
    return invalid(op, arg,
                   "expected runs of " + std::to_string(run_rows) + " rows of stride " +
                       std::to_string(row_stride) + " at least " +
                       std::to_string((run_rows - 1) * row_stride + n) +
                       " elements apart (each run ending before the next) but got " +
                       std::to_string(run_stride));
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
  rows->run_rows = run_rows;
  rows->run_skip = run_rows > 0 ? run_stride - run_rows * row_stride : 0;
  return Status();
}

}  // namespace

Status as_rows(const char* op, const char* arg, const TensorView& t, Rows* rows) {
  return flatten_rows(op, arg, t, /*allow_runs=*/false, rows);
}

Status as_row_runs(const char* op, const char* arg, const TensorView& t, Rows* rows) {
  return flatten_rows(op, arg, t, /*allow_runs=*/true, rows);
}

Status common_run_rows(const char* op,
                       std::initializer_list<std::pair<const char*, const Rows*>> tensors,
                       int64_t* run_rows) {
  int64_t common = 0;
  const char* first = nullptr;
  for (const auto& [arg, t] : tensors) {
    if (t == nullptr || t->run_rows == 0) continue;
    if (common == 0) {
      common = t->run_rows;
      first = arg;
    } else if (t->run_rows != common) {
      return invalid(op, arg,
                     "expected rows in runs of " + std::to_string(common) + " (as " + first +
                         "'s) or in one run but got runs of " + std::to_string(t->run_rows));
    }
    if (t->rows >= kRunRowsLimit) {
      return unsupported(op, arg,
                         "expected fewer than 2^31 rows for rows in runs but got " +
                             std::to_string(t->rows));
    }
    if (t->run_skip >= kRunRowsLimit || t->run_skip < -kRunRowsLimit) {
      return unsupported(op, arg,
                         "expected runs less than 2^31 elements further apart than their rows "
                         "but got " + std::to_string(t->run_skip));
    }
  }
  *run_rows = common;
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

namespace {

// Whether two tensors of rows, whose spans (first to last byte) overlap, still touch no common
// byte because their rows interleave: both of one row stride in bytes (a single row takes the
// other's), no runs, rows no longer than the stride. Such are the column blocks of one buffer
// (x = buf[:, :2N], out = buf[:, 2N:3N]) or its even and odd rows. Anything else is taken to
// overlap.
bool rows_interleave(const Rows& a, const Rows& b) {
  if (a.run_rows != 0 || b.run_rows != 0 || (a.rows <= 1 && b.rows <= 1)) return false;
  const int64_t a_row = a.cols * static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t b_row = b.cols * static_cast<int64_t>(dtype_size(b.dtype));
  const int64_t a_stride = a.row_stride * static_cast<int64_t>(dtype_size(a.dtype));
  const int64_t b_stride = b.row_stride * static_cast<int64_t>(dtype_size(b.dtype));
  const int64_t stride = a.rows > 1 ? a_stride : b_stride;
  if ((a.rows > 1 && b.rows > 1 && a_stride != b_stride) || a_row > stride || b_row > stride) {
    return false;
  }
  // Relative to a's start, a's row r is [r * stride, r * stride + a_row) and b's row q is
  // [(q + t) * stride + e, ... + b_row), 0 <= e < stride. Since neither row is longer than the
  // stride, b's row q can meet a's rows q + t (when e < a_row) and q + t + 1 (when it runs past
  // the next row's start), and only where such a row exists.
  const int64_t d = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(b.data) -
                                         reinterpret_cast<std::uintptr_t>(a.data));
  int64_t t = d / stride;
  int64_t e = d % stride;
  if (e < 0) e += stride, t -= 1;
  auto rows_meet = [&](int64_t shift) {  // some q in [0, b.rows) with q + shift in [0, a.rows)
    return std::max<int64_t>(0, -shift) < std::min<int64_t>(b.rows, a.rows - shift);
  };
  const bool same_row = e < a_row && rows_meet(t);
  const bool next_row = e + b_row > stride && rows_meet(t + 1);
  return !same_row && !next_row;
}

}  // namespace

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
                     a.cols == b.cols && (a.rows <= 1 || a.row_stride == b.row_stride) &&
                     a.run_rows == b.run_rows && a.run_skip == b.run_skip;
  if (exact && exact_alias_ok) return Status();
  if (!exact && rows_interleave(a, b)) return Status();
  return invalid(op, a_arg,
                 std::string("expected memory disjoint from ") + b_arg +
                     (exact_alias_ok ? " or identical to it (in place)" : "") +
                     " but the two overlap");
}

std::string float_string(float v) {
  std::ostringstream s;
  s << v;  // shortest %g form at 6 digits: -1e-10, 0.5, inf, nan
  return s.str();
}

Status expect_positive_eps(const char* op, float eps) {
  if (!(std::isfinite(eps) && eps > 0.0f)) {
    return invalid(op, "eps", "expected a finite value > 0 but got " + float_string(eps));
  }
  return Status();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t d = 0; d < shape.size(); ++d) s << (d ? ", " : "") << shape[d];
  s << "]";
  return s.str();
}

std::vector<int64_t> with_last(const TensorView& ref, int64_t last) {
  std::vector<int64_t> shape(ref.shape, ref.shape + ref.ndim);
  shape.back() = last;
  return shape;
}

Status expect_shape(const char* op, const char* arg, const TensorView& t,
                    const std::vector<int64_t>& expected, const char* why) {
  bool same = t.ndim == static_cast<int>(expected.size());
  for (int d = 0; same && d < t.ndim; ++d) same = t.shape[d] == expected[static_cast<size_t>(d)];
  if (!same) {
    return invalid(op, arg, "expected shape " + shape_string(expected) + " (" + why +
                                ") but got " + t.shape_string());
  }
  return Status();
}

Status expect_fp8_format(const char* op, Fp8Format format) {
  if (format == Fp8Format::kE4M3FN || format == Fp8Format::kE4M3FNUZ) return Status();
  return unsupported(op, "format", "expected e4m3fn or e4m3fnuz but got value " +
                                       std::to_string(static_cast<int>(format)));
}

Status expect_scale_upper_bound(const char* op, float bound) {
  if (std::isnan(bound) || bound < 0.0f) {
    return invalid(op, "scale_upper_bound",
                   "expected 0 (no bound) or a value > 0 but got " + float_string(bound));
  }
  return Status();
}

Status expect_fp8_dtype(const char* op, const char* arg, DType actual, Fp8Format format) {
  const DType want = fp8_format_dtype(format);
  if (actual == want) return Status();
  return unsupported(op, arg, std::string("expected dtype ") + dtype_name(want) + " (format " +
                                  fp8_format_name(format) + ") but got " + dtype_name(actual));
}

Status as_row_scales(const char* op, const char* arg, const TensorView& scale, int64_t rows,
                     const TensorView& out, const Device& device, const char* device_ref,
                     Rows* scale_rows) {
  if (!scale.defined()) {
    return invalid(op, arg, "expected a float32 tensor of " + std::to_string(rows) +
                                " elements but got none");
  }
  const bool flat = scale.ndim == 1 && scale.shape[0] == rows;
  if (!flat) {
    const std::string why =
        "one per row: [" + std::to_string(rows) + "] or out's shape with last dimension 1";
    FUSEKIT_RETURN_IF_ERROR(expect_shape(op, arg, scale, with_last(out, 1), why.c_str()));
  }
  Rows r;
  FUSEKIT_RETURN_IF_ERROR(as_rows(op, arg, scale, &r));
  // [..., 1]: one element per row, so the rows themselves must be contiguous.
  if (r.cols == 1 && r.rows > 1 && r.row_stride != 1) {
    return invalid(op, arg, "expected contiguous elements (row stride 1) but got row stride " +
                                std::to_string(r.row_stride));
  }
  FUSEKIT_RETURN_IF_ERROR(expect_dtype_in(op, arg, scale.dtype, {DType::kFloat32}));
  FUSEKIT_RETURN_IF_ERROR(expect_device(op, arg, scale, device, device_ref));
  *scale_rows = Rows{scale.data, DType::kFloat32, 1, rows, rows};
  return Status();
}

Status as_scalar_scale(const char* op, const char* arg, const TensorView& scale,
                       const Device& device, const char* device_ref, Rows* scale_rows) {
  if (!scale.defined()) {
    return invalid(op, arg, "expected a float32 tensor of one element (shape [] or [1]) but got "
                            "none");
  }
  if (!(scale.ndim == 0 || (scale.ndim == 1 && scale.shape[0] == 1))) {
    return invalid(op, arg, "expected shape [] or [1] (one element) but got " +
                                (scale.ndim > kMaxDims ? "rank " + std::to_string(scale.ndim)
                                                       : scale.shape_string()));
  }
  if (scale.data == nullptr) {
    return invalid(op, arg, "expected a non-null data pointer for shape " + scale.shape_string() +
                                " but got nullptr");
  }
  FUSEKIT_RETURN_IF_ERROR(expect_dtype_in(op, arg, scale.dtype, {DType::kFloat32}));
  FUSEKIT_RETURN_IF_ERROR(expect_device(op, arg, scale, device, device_ref));
  *scale_rows = Rows{scale.data, DType::kFloat32, 1, 1, 1};
  return Status();
}

}  // namespace fusekit::detail
