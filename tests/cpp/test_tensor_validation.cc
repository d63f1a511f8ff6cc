// TensorView and Status basics, and the row flattening every op relies on.
#include "core/validate.h"
#include "fusekit/fusekit.h"
#include "gtest/gtest.h"

namespace fusekit {
namespace {

TEST(TensorView, ContiguousStridesAndNumel) {
  const TensorView t = TensorView::contiguous(nullptr, DType::kBFloat16, Device::cpu(), {2, 3, 5});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.strides[0], 15);
  EXPECT_EQ(t.strides[1], 5);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.size(-1), 5);
  EXPECT_EQ(t.shape_string(), "[2, 3, 5]");
  EXPECT_FALSE(TensorView().defined());
  EXPECT_EQ(Device::gpu(1).to_string(), "gpu:1");
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_STREQ(dtype_name(DType::kFloat16), "float16");
}

TEST(TensorView, MismatchedStrideListIsRejectedByOps) {
  float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const TensorView bad = TensorView::strided(buf, DType::kFloat32, Device::cpu(), {2, 4}, {4});
  detail::Rows rows;
  const Status s = detail::as_rows("op", "x", bad, &rows);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(Rows, FlattensLeadingDimsAndSkipsUnitDims) {
  float buf[64];
  detail::Rows rows;
  // [2, 1, 3, 4] with a padded row stride of 5 and a unit dim of arbitrary stride.
  const TensorView t = TensorView::strided(buf, DType::kFloat32, Device::cpu(), {2, 1, 3, 4},
                                           {15, 999, 5, 1});
  ASSERT_TRUE(detail::as_rows("op", "x", t, &rows).ok());
  EXPECT_EQ(rows.rows, 6);
  EXPECT_EQ(rows.cols, 4);
  EXPECT_EQ(rows.row_stride, 5);
  EXPECT_EQ(rows.span_bytes(), (5 * 5 + 4) * 4);
}

// Sizes and strides that would wrap the 64-bit element count or offsets are refused, not
// flattened into a wrong row count (2^62 x 4 rows is 2^64: 0 when wrapped, a silent no-op).
TEST(Rows, ExtentsPast2To63BytesAreRefused) {
  float buf[64];
  detail::Rows rows;
  const int64_t huge = int64_t{1} << 62;
  const TensorView rows_wrap =
      TensorView::strided(buf, DType::kFloat32, Device::cpu(), {huge, 4, 8}, {32, 8, 1});
  Status s = detail::as_rows("op", "x", rows_wrap, &rows);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("op: x: expected a tensor whose elements lie within 2^63 bytes but "
                             "got shape [4611686018427387904, 4, 8] with strides [32, 8, 1]"),
            std::string::npos)
      << s.message();
  // Two rows, the second 2^62 floats (2^64 bytes) on: its byte offset wraps.
  const TensorView far_row =
      TensorView::strided(buf, DType::kFloat32, Device::cpu(), {2, 8}, {huge, 1});
  EXPECT_EQ(detail::as_rows("op", "x", far_row, &rows).code(), StatusCode::kInvalidArgument);
  // 2^61 floats apart (2^63 bytes): past the bound too; 2^59 (2^61 bytes) is within it.
  const TensorView at_bound =
      TensorView::strided(buf, DType::kFloat32, Device::cpu(), {2, 8}, {huge / 2, 1});
  EXPECT_EQ(detail::as_rows("op", "x", at_bound, &rows).code(), StatusCode::kInvalidArgument);
  const TensorView within =
      TensorView::strided(buf, DType::kFloat32, Device::cpu(), {2, 8}, {huge / 8, 1});
  ASSERT_TRUE(detail::as_rows("op", "x", within, &rows).ok());
  EXPECT_EQ(rows.row_stride, huge / 8);
}

// Which views of one buffer share a byte (expect_no_overlap): rows that interleave without
// meeting do not, whatever their spans; anything else whose spans meet is taken to.
TEST(Rows, InterleavedRowsThatShareNoByteDoNotOverlap) {
  float buf[256];
  auto rows_of = [&](int64_t offset, int64_t m, int64_t n, int64_t stride) {
    detail::Rows r;
    const TensorView t =
        TensorView::strided(buf + offset, DType::kFloat32, Device::cpu(), {m, n}, {stride, 1});
    EXPECT_TRUE(detail::as_rows("op", "t", t, &r).ok());
    return r;
  };
  auto disjoint = [&](const detail::Rows& out, const detail::Rows& in) {
    return detail::expect_no_overlap("op", "out", out, "x", in).ok();
  };
  const detail::Rows x = rows_of(0, 3, 8, 12);  // columns 0-7 of rows of 12
  EXPECT_TRUE(disjoint(rows_of(8, 3, 4, 12), x));    // columns 8-11
  EXPECT_FALSE(disjoint(rows_of(6, 3, 4, 12), x));   // columns 6-9
  EXPECT_FALSE(disjoint(rows_of(8, 3, 5, 12), x));   // 8-12: the next row's first column
  EXPECT_TRUE(disjoint(rows_of(20, 3, 4, 12), x));   // columns 8-11 of rows 1-3
  EXPECT_TRUE(disjoint(rows_of(8, 1, 4, 12), x));    // one row in the first gap
  EXPECT_FALSE(disjoint(rows_of(8, 1, 6, 12), x));   // one row running into the second row
  EXPECT_FALSE(disjoint(rows_of(8, 3, 4, 24), x));   // another stride: taken to overlap
  // Even and odd rows of rows of 4.
  const detail::Rows even = rows_of(0, 4, 4, 8);
  EXPECT_TRUE(disjoint(rows_of(4, 4, 4, 8), even));
  EXPECT_TRUE(disjoint(even, rows_of(4, 4, 4, 8)));
  EXPECT_FALSE(disjoint(rows_of(8, 4, 4, 8), even));  // the even rows from the second on
  EXPECT_TRUE(disjoint(rows_of(20, 2, 4, 8), even));  // the odd rows 2 and 3
  EXPECT_FALSE(disjoint(even, even));                 // the same view, where that is not allowed
}

TEST(Status, MessagesAndCheck) {
  const Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.to_string(), "ok");
  const Status bad = Status::unsupported("op: x: nope");
  EXPECT_EQ(bad.to_string(), "unsupported: op: x: nope");
  EXPECT_NO_THROW(check(ok));
  EXPECT_THROW(check(bad), Error);
}

}  // namespace
}  // namespace fusekit
