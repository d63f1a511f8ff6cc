// Buffers, the random-value pool and per-case workspaces (see data.h).
#include "data.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <random>

#include "core/half.h"
#include "fusekit/runtime.h"

namespace fusekit::bench {
namespace {

constexpr int64_t kPoolElems = int64_t{1} << 22;
constexpr int64_t kWindow = kPoolElems / 2;  // the longest run copied from one offset
constexpr std::align_val_t kHostAlign{64};

}  // namespace

Buffer::~Buffer() {
  if (ptr_ == nullptr) return;
  if (gpu_) (void)gpu_free(ptr_);
  else ::operator delete(ptr_, kHostAlign);
}

Status Buffer::allocate(bool gpu, std::size_t bytes) {
  Status s = release();
  if (!s.ok()) return s;
  gpu_ = gpu;
  if (gpu) {
    s = gpu_malloc(&ptr_, bytes, 0);
    if (!s.ok()) {
      ptr_ = nullptr;
      return s;
    }
  } else {
    ptr_ = ::operator new(bytes, kHostAlign, std::nothrow);
    if (ptr_ == nullptr) {
      return Status::runtime_error("host allocation of " + std::to_string(bytes) + " bytes failed");
    }
  }
  bytes_ = bytes;
  return Status();
}

Status Buffer::release() {
  void* p = ptr_;
  ptr_ = nullptr;
  bytes_ = 0;
  if (p == nullptr) return Status();
  if (gpu_) return gpu_free(p);
  ::operator delete(p, kHostAlign);
  return Status();
}

Status RandomPool::create(DType dtype, bool gpu) {
  dtype_ = dtype;
  elem_bytes_ = dtype_size(dtype);
  gpu_ = gpu;
  host_.resize(static_cast<std::size_t>(kPoolElems) * elem_bytes_);
  std::mt19937 rng(0x5eedu);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < kPoolElems; ++i) {
    unsigned char* at = host_.data() + i * elem_bytes_;
    for (;;) {  // redraw anything that rounds to zero
      const float v = normal(rng);
      if (dtype == DType::kFloat32) {
        if (v == 0.0f) continue;
        std::memcpy(at, &v, 4);
      } else {
        const uint16_t bits = dtype == DType::kBFloat16 ? detail::float_to_bf16(v)
                                                        : detail::float_to_fp16(v);
        if ((bits & 0x7fffu) == 0) continue;
        std::memcpy(at, &bits, 2);
      }
      break;
    }
  }
  if (!gpu) return Status();
  Status s = device_.allocate(true, host_.size());
  if (!s.ok()) return s;
  return gpu_memcpy(device_.data(), host_.data(), host_.size(), CopyKind::kHostToDevice);
}

Status RandomPool::fill(void* dst, int64_t elems, uint64_t salt) const {
  auto* out = static_cast<unsigned char*>(dst);
  const unsigned char* src = gpu_ ? static_cast<const unsigned char*>(device_.data())
                                  : host_.data();
  uint64_t state = salt * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t done = 0; done < elems;) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG step
    const int64_t offset = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(kWindow));
    const int64_t len = std::min(kWindow, elems - done);
    const std::size_t bytes = static_cast<std::size_t>(len) * elem_bytes_;
    const unsigned char* from = src + offset * elem_bytes_;
    unsigned char* to = out + done * elem_bytes_;
    if (gpu_) {
      const Status s = gpu_memcpy(to, from, bytes, CopyKind::kDeviceToDevice);
      if (!s.ok()) return s;
    } else {
      std::memcpy(to, from, bytes);
    }
    done += len;
  }
  return Status();
}

Status Workspace::allocate(const FamilySpec& family, uint32_t slots, int64_t m, int64_t n,
                           DType dtype, bool gpu, int64_t row_pad) {
  args = OpArgs();
  args.m = m;
  args.n = n;
  args.dtype = dtype;
  const Device device = gpu ? Device::gpu(0) : Device::cpu();
  for (std::size_t i = 0; i < family.slots.size() && i < kMaxSlots; ++i) {
    if ((slots >> i & 1u) == 0) continue;
    const SlotSpec& spec = family.slots[i];
    const int64_t cols = spec.cols_mult * n;
    const int64_t stride = cols + row_pad;
    const int64_t elems = spec.per_row ? m * stride : cols;
    const int64_t bytes = std::max<int64_t>(elems * static_cast<int64_t>(dtype_size(dtype)),
                                            m * spec.min_row_bytes);
    const Status s = buffers[i].allocate(gpu, static_cast<std::size_t>(bytes));
    if (!s.ok()) return s;
    args.t[i] = spec.per_row
                    ? TensorView::strided(buffers[i].data(), dtype, device, {m, cols}, {stride, 1})
                    : TensorView::contiguous(buffers[i].data(), dtype, device, {cols});
  }
  return Status();
}

Status Workspace::refill_inputs(const OpSpec& op, const RandomPool& pool) {
  for (int i = 0; i < kMaxSlots; ++i) {
    if ((op.inputs >> i & 1u) == 0) continue;
    if (buffers[i].data() == nullptr) {
      return Status::invalid_argument(std::string("fusekit_bench: ") + op.name +
                                      ": input slot " + std::to_string(i) + " not allocated");
    }
    const int64_t elems =
        static_cast<int64_t>(buffers[i].bytes() / dtype_size(args.t[i].dtype));
    const Status s = pool.fill(buffers[i].data(), elems, static_cast<uint64_t>(i) + 1);
    if (!s.ok()) return s;
  }
  return Status();
}

Status Workspace::release() {
  Status first;
  for (Buffer& b : buffers) {
    const Status s = b.release();
    if (first.ok() && !s.ok()) first = s;
  }
  args = OpArgs();
  return first;
}

}  // namespace fusekit::bench
