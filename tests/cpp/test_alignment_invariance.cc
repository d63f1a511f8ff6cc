// Results do not depend on where a tensor lies in memory, on every backend present.
//
// The GPU kernels split a row into 16-byte groups by its length alone, and move each group with
// accesses as wide as its address allows: one vector access where every pointer and row stride
// is aligned, else, group by group, the aligned chunks that hold it, shifted into place, and
// stores in the widest pieces the address allows, each row's first and last groups element by
// element (gpu/common/vec_io.cuh). So every op must write the same bits with each tensor's base
// at every element offset within 16 bytes, and with row strides that put successive rows at
// different offsets, as with everything aligned. The layouts here give each tensor its own offset
// and stride, so that no two of them share a phase; fp8 codes (one byte each) take every byte
// offset, and the lengths cover a row of one partial group, groups straddling the row's start and
// end, (20483) the long-row paths, and rows of whole groups, whose aligned and narrow launches
// take different kernels (NormRowsOfWholeGroupsAtEachBatchShape; 16384 in the fp8 forms).
#include <cstdint>
#include <string>
#include <vector>

#include "act_cases.h"
#include "gtest/gtest.h"
#include "norm_cases.h"
#include "norm_fp8_cases.h"

namespace fusekit::testing {
namespace {

class AlignmentInvariance : public BackendTest {};

// Layout k of eight (0: every base aligned, rows of exactly N): bases k, k + 3, k + 5 and k + 1
// elements past alignment, row pads that differ per tensor.
struct Layout {
  int64_t a, b, c, d;  // base offsets
  int64_t pad_a, pad_b, pad_c, pad_d;
};
Layout layout(int k) {
  if (k == 0) return Layout{};
  return Layout{k, (k + 3) % 8, (k + 5) % 8, (k + 1) % 8, k, 8 - k, (2 * k) % 8 + 1, k % 3};
}
constexpr int kLayouts = 8;

// Layouts 1 .. kLayouts - 1: every one but the aligned.
std::vector<int> moved_layouts() {
  std::vector<int> ks;
  for (int k = 1; k < kLayouts; ++k) ks.push_back(k);
  return ks;
}

// A norm case (NormCase or NormFp8Case) with its row tensors laid out as `l` says.
template <class Case>
Case with_row_layout(const Case& c, const Layout& l) {
  Case moved = c;
  moved.x_offset = l.a;
  moved.out_offset = l.b;
  moved.residual_offset = l.c;
  moved.x_pad = l.pad_a;
  moved.out_pad = l.pad_b;
  moved.residual_pad = l.pad_c;
  moved.residual_out_pad = l.pad_d;
  return moved;
}

std::vector<uint64_t> norm_bits(const NormCase& c, const NormRun& run) {
  const RowBuffer& out = is_in_place(c.op) ? run.x : run.out;
  const RowBuffer& r_out = is_in_place(c.op) ? run.residual : run.residual_out;
  std::vector<uint64_t> bits;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.cols; ++j) bits.push_back(out.raw(r, j));
    if (is_add(c.op)) {
      for (int64_t j = 0; j < c.cols; ++j) bits.push_back(r_out.raw(r, j));
    }
    bits.push_back(run.rstd.raw(0, r));
    if (is_layer(c.op)) bits.push_back(run.mean.raw(0, r));
  }
  return bits;
}

// Runs `c` as laid out (all aligned) and at each layout k of `layouts`, and expects the same
// bits from each, with the padding between rows left alone.
void expect_norm_bits_at_layouts(const NormCase& c, Backend backend,
                                 const std::vector<int>& layouts) {
  const NormRun aligned = run_norm_case(c, backend);
  ASSERT_TRUE(aligned.status.ok()) << aligned.status.to_string();
  const std::vector<uint64_t> expected = norm_bits(c, aligned);
  for (int k : layouts) {
    const Layout l = layout(k);
    NormCase moved = with_row_layout(c, l);
    moved.affine_offset = l.d;
    SCOPED_TRACE(moved.name());
    const NormRun run = run_norm_case(moved, backend);
    ASSERT_TRUE(run.status.ok()) << run.status.to_string();
    ASSERT_EQ(norm_bits(moved, run), expected);
    ASSERT_TRUE((is_in_place(c.op) ? run.x : run.out).padding_untouched());
  }
}

TEST_P(AlignmentInvariance, Norm) {
  const Backend backend = GetParam();
  struct Dtypes {
    DType x, weight, residual;
  };
  for (NormOp op : {NormOp::kRms, NormOp::kAddRmsInPlace, NormOp::kAddRms, NormOp::kLayer,
                    NormOp::kAddLayer}) {
    // One dtype; and bf16 rows with an fp32 weight and residual stream (32-byte groups of those).
    for (const Dtypes d : {Dtypes{DType::kBFloat16, DType::kBFloat16, DType::kBFloat16},
                           Dtypes{DType::kFloat32, DType::kFloat32, DType::kFloat32},
                           Dtypes{DType::kBFloat16, DType::kFloat32, DType::kFloat32}}) {
      for (int64_t n : {7, 769, 4100, 5125, 20483}) {
        NormCase c;
        c.op = op;
        c.x_dtype = d.x;
        c.weight_dtype = d.weight;
        c.residual_dtype = is_add(op) ? d.residual : d.x;
        c.rows = 6;
        c.cols = n;
        c.stats = true;
        c.seed = static_cast<uint32_t>(n);
        ASSERT_NO_FATAL_FAILURE(expect_norm_bits_at_layouts(c, backend, moved_layouts()));
      }
    }
  }
}

// Rows of whole groups at the batch sizes whose launch shapes differ by alignment: the GPU gives
// rows whose accesses are narrower than a group (a base or row stride off 16 bytes) the kernels
// that test each thread's last group (RowFit::kLastPartial) where aligned rows take the exact
// ones, four groups a thread in both (N = 16384 bf16 at M = 1 on 512 threads, split over a
// cluster where aligned; 8192 at M = 128 on 256; 4096 at M = 1024 on 128). LayerNorm's rows of
// a power-of-two number of groups take their moments in one reduction (gpu/norm/norm_moments.cuh,
// TreeMoments) in every kernel, or their bits would follow the alignment; N = 5120 (640 groups)
// takes two in every kernel. Rows past the registers path (20480 and 32768 bf16) take the
// cluster kernel of exact rows where aligned and that of any row where not.
TEST_P(AlignmentInvariance, NormRowsOfWholeGroupsAtEachBatchShape) {
  const Backend backend = GetParam();
  struct Shape {
    int64_t rows, cols;
  };
  for (NormOp op : {NormOp::kLayer, NormOp::kAddLayer, NormOp::kRms}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
      for (const Shape s : {Shape{1, 16384}, Shape{128, 8192}, Shape{1024, 4096}, Shape{1, 5120},
                            Shape{1024, 5120}, Shape{3, 20480}, Shape{2, 32768}}) {
        NormCase c;
        c.op = op;
        c.x_dtype = c.weight_dtype = c.residual_dtype = dtype;
        c.rows = s.rows;
        c.cols = s.cols;
        c.stats = true;
        c.seed = static_cast<uint32_t>(s.rows * 7 + s.cols);
        ASSERT_NO_FATAL_FAILURE(expect_norm_bits_at_layouts(c, backend, {1, 2}));
      }
    }
  }
}

TEST_P(AlignmentInvariance, NormFp8) {
  const Backend backend = GetParam();
  for (NormFp8Op op : {NormFp8Op::kRms, NormFp8Op::kAddRms}) {
    for (Fp8Scale scale : {Fp8Scale::kDynamic, Fp8Scale::kStatic}) {
      for (Fp8Format format : {Fp8Format::kE4M3FN, Fp8Format::kE4M3FNUZ}) {
        for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
          for (int64_t n : {7, 769, 4100, 5125, 16384}) {
            NormFp8Case c;
            c.op = op;
            c.scale = scale;
            c.format = format;
            c.x_dtype = c.weight_dtype = c.residual_dtype = dtype;
            c.rows = 6;
            c.cols = n;
            c.seed = static_cast<uint32_t>(n);
            const NormFp8Run aligned = run_norm_fp8_case(c, backend);
            ASSERT_TRUE(aligned.status.ok()) << aligned.status.to_string();
            std::vector<uint64_t> expected;
            for (int64_t r = 0; r < c.rows; ++r) {
              for (uint64_t b : norm_fp8_row_bits(c, aligned, r)) expected.push_back(b);
            }
            for (int k = 1; k < kLayouts; ++k) {
              const NormFp8Case moved = with_row_layout(c, layout(k));
              SCOPED_TRACE(moved.name());
              const NormFp8Run run = run_norm_fp8_case(moved, backend);
              ASSERT_TRUE(run.status.ok()) << run.status.to_string();
              std::vector<uint64_t> bits;
              for (int64_t r = 0; r < c.rows; ++r) {
                for (uint64_t b : norm_fp8_row_bits(moved, run, r)) bits.push_back(b);
              }
              ASSERT_EQ(bits, expected);
              ASSERT_TRUE(run.out.padding_untouched());
            }
          }
        }
      }
    }
  }
}

std::vector<uint64_t> act_bits(const ActRun& run) {
  std::vector<uint64_t> bits;
  for (int64_t r = 0; r < run.out.rows(); ++r) {
    for (int64_t j = 0; j < run.out.cols(); ++j) bits.push_back(run.out.raw(r, j));
    for (int64_t j = 0; j < run.grad_up.cols(); ++j) bits.push_back(run.grad_up.raw(r, j));
    if (run.scale.cols() > 0) bits.push_back(run.scale.raw(0, r));
  }
  return bits;
}

TEST_P(AlignmentInvariance, Act) {
  const Backend backend = GetParam();
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    for (ActMode mode : {ActMode::kForward, ActMode::kQuantFp8, ActMode::kBackward}) {
      for (ActLayout layout_kind : {ActLayout::kFused, ActLayout::kSplitSeparate}) {
        for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
          for (int64_t n : {7, 769, 4100, 5125}) {
            ActCase c;
            c.act = act;
            c.mode = mode;
            c.layout = layout_kind;
            c.dtype = dtype;
            c.rows = 6;
            c.cols = n;
            c.format = act == Activation::kSilu ? Fp8Format::kE4M3FN : Fp8Format::kE4M3FNUZ;
            c.seed = static_cast<uint32_t>(n);
            const ActRun aligned = run_act_case(c, backend);
            ASSERT_TRUE(aligned.status.ok()) << aligned.status.to_string();
            const std::vector<uint64_t> expected = act_bits(aligned);
            for (int k = 1; k < kLayouts; ++k) {
              const Layout l = layout(k);
              ActCase moved = c;
              moved.in_offset = l.a;
              moved.out_offset = l.b;
              moved.in_pad = l.pad_a;
              moved.out_pad = l.pad_b;
              SCOPED_TRACE(moved.name());
              const ActRun run = run_act_case(moved, backend);
              ASSERT_TRUE(run.status.ok()) << run.status.to_string();
              ASSERT_EQ(act_bits(run), expected);
              ASSERT_TRUE(run.out.padding_untouched());
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AlignmentInvariance,
                         ::testing::Values(Backend::kCPU, Backend::kGPU),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backend_name(info.param));
                         });

}  // namespace
}  // namespace fusekit::testing
