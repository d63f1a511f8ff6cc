// The C++ API as a user outside the tree sees it, through an installed fusekit: the public headers
// alone (no CUDA, HIP or PyTorch header), one op on CPU tensors against a double-precision
// reference, a bad call that must name its argument and write nothing, and, where the library
// has a usable GPU, the same op on the GPU against the CPU's result. Exit code 0 only if all hold.
#include <fusekit/fusekit.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr int64_t kRows = 3;
constexpr int64_t kCols = 13;  // not a multiple of any vector width
constexpr float kEps = 1e-6f;

int fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "FAIL: %s: %s\n", what, detail.c_str());
  return 1;
}

// |got - want| <= 1e-5 |want| + 1e-6 for every element.
bool close(const std::vector<float>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 * std::fabs(want[i]) + 1e-6)) return false;
  }
  return true;
}

// rms_norm on the GPU with the CPU's inputs; its output in `out`.
fusekit::Status gpu_rms_norm(const std::vector<float>& x, const std::vector<float>& w,
                             std::vector<float>* out) {
  using fusekit::CopyKind;
  const auto gpu = fusekit::Device::gpu(0);
  const size_t x_bytes = x.size() * sizeof(float), w_bytes = w.size() * sizeof(float);
  void *dx = nullptr, *dw = nullptr, *dout = nullptr;
  fusekit::Status s = fusekit::gpu_malloc(&dx, x_bytes);
  if (s.ok()) s = fusekit::gpu_malloc(&dw, w_bytes);
  if (s.ok()) s = fusekit::gpu_malloc(&dout, x_bytes);
  if (s.ok()) s = fusekit::gpu_memcpy(dx, x.data(), x_bytes, CopyKind::kHostToDevice);
  if (s.ok()) s = fusekit::gpu_memcpy(dw, w.data(), w_bytes, CopyKind::kHostToDevice);
  if (s.ok()) {
    s = fusekit::rms_norm(
        fusekit::TensorView::contiguous(dout, fusekit::DType::kFloat32, gpu, {kRows, kCols}),
        fusekit::TensorView::contiguous(dx, fusekit::DType::kFloat32, gpu, {kRows, kCols}),
        fusekit::TensorView::contiguous(dw, fusekit::DType::kFloat32, gpu, {kCols}), kEps);
  }
  if (s.ok()) s = fusekit::gpu_memcpy(out->data(), dout, x_bytes, CopyKind::kDeviceToHost);
  if (s.ok()) s = fusekit::gpu_synchronize();
  for (void* p : {dx, dw, dout}) {
    if (p != nullptr) fusekit::gpu_free(p);
  }
  return s;
}

}  // namespace

int main() {
  using fusekit::DType;
  using fusekit::TensorView;
  const auto cpu = fusekit::Device::cpu();
  std::vector<float> x(kRows * kCols), w(kCols), out(kRows * kCols, NAN);
  for (int64_t i = 0; i < kRows * kCols; ++i) x[i] = 0.37f * static_cast<float>(i % 11) - 1.3f;
  for (int64_t c = 0; c < kCols; ++c) w[c] = 0.5f + 0.05f * static_cast<float>(c);

  const TensorView xv = TensorView::contiguous(x.data(), DType::kFloat32, cpu, {kRows, kCols});
  const TensorView wv = TensorView::contiguous(w.data(), DType::kFloat32, cpu, {kCols});
  fusekit::Status s = fusekit::rms_norm(
      TensorView::contiguous(out.data(), DType::kFloat32, cpu, {kRows, kCols}), xv, wv, kEps);
  if (!s.ok()) return fail("rms_norm on the CPU", s.to_string());
  std::vector<double> want(out.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double squares = 0.0;
    for (int64_t c = 0; c < kCols; ++c) squares += double(x[r * kCols + c]) * x[r * kCols + c];
    const double rstd = 1.0 / std::sqrt(squares / kCols + kEps);
    for (int64_t c = 0; c < kCols; ++c) want[r * kCols + c] = x[r * kCols + c] * rstd * w[c];
  }
  if (!close(out, want)) return fail("rms_norm on the CPU", "differs from the reference");

  // A weight one element short: refused with a message naming it, and nothing written.
  std::vector<float> untouched(out.size(), 7.0f);
  s = fusekit::rms_norm(
      TensorView::contiguous(untouched.data(), DType::kFloat32, cpu, {kRows, kCols}), xv,
      TensorView::contiguous(w.data(), DType::kFloat32, cpu, {kCols - 1}), kEps);
  if (s.ok() || s.message().find("weight") == std::string::npos) {
    return fail("a weight of the wrong length", s.ok() ? "accepted" : s.to_string());
  }
  for (float v : untouched) {
    if (v != 7.0f) return fail("a weight of the wrong length", "the output was written");
  }

  std::string reason;
  const int gpus = fusekit::gpu_count(&reason);
  if (gpus > 0) {
    std::vector<float> gpu_out(out.size(), NAN);
    s = gpu_rms_norm(x, w, &gpu_out);
    if (!s.ok()) return fail("rms_norm on the GPU", s.to_string());
    if (!close(gpu_out, want)) return fail("rms_norm on the GPU", "differs from the reference");
  }
  std::printf("fusekit %s (GPU backend %s): the installed package works; GPU: %s\n",
              FUSEKIT_VERSION, fusekit::gpu_backend_name(),
              gpus > 0 ? fusekit::gpu_name(0).c_str() : ("none (" + reason + ")").c_str());
  return 0;
}
