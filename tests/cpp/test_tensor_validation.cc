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
