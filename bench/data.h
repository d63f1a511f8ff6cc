// Memory and input data for benchmark cases, on the GPU or on the host.
//
// Inputs are random (normal, never exactly zero) but generating hundreds of millions of values on
// the host per shape would dominate the run, so one pool of a few million values is generated
// once per dtype (and copied to the device once) and every tensor is filled by copying windows of
// it at varying offsets. The values repeat with a long period; a bandwidth benchmark does not
// care, and tests, not the benchmark, check numerics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fusekit/status.h"
#include "fusekit/tensor.h"
#include "ops.h"

namespace fusekit::bench {

// One allocation, on the GPU (device 0) or on the host (64-byte aligned).
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Status allocate(bool gpu, std::size_t bytes);
  Status release();  // frees now, reporting a runtime error; the destructor ignores errors
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  bool gpu_ = false;
};

class RandomPool {
 public:
  Status create(DType dtype, bool gpu);
  // Fills `elems` elements at `dst` (same place as the pool: GPU or host) from the pool; `salt`
  // picks the windows so that different tensors get different data.
  Status fill(void* dst, int64_t elems, uint64_t salt) const;
  Status release() { return device_.release(); }

 private:
  DType dtype_ = DType::kBFloat16;
  std::size_t elem_bytes_ = 2;
  bool gpu_ = false;
  std::vector<unsigned char> host_;
  Buffer device_;
};

// The tensors of one benchmark case: the family's slots selected by `slots`, shaped for M x N.
struct Workspace {
  Buffer buffers[kMaxSlots];
  OpArgs args;

  // Per-row tensors as [M, cols] views whose rows lie cols + row_pad elements apart.
  Status allocate(const FamilySpec& family, uint32_t slots, int64_t m, int64_t n, DType dtype,
                  bool gpu, int64_t row_pad = 0);
  // Refills the slots `op` reads (their whole storage, pads included), so in-place ops start
  // every measurement from fresh values.
  Status refill_inputs(const OpSpec& op, const RandomPool& pool);
  Status release();
};

}  // namespace fusekit::bench
