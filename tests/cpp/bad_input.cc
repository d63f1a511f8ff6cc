// The shared bad-input harness. See bad_input.h.
#include "bad_input.h"

namespace fusekit::testing {

void expect_refused_untouched(Backend backend, const std::vector<RowBuffer*>& buffers,
                              const std::function<Status()>& call, StatusCode code,
                              const std::vector<std::string>& message_parts) {
  std::vector<std::vector<uint8_t>> before;
  for (RowBuffer* b : buffers) before.push_back(b->snapshot());
  const Status s = call();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& part : message_parts) {
    EXPECT_NE(s.message().find(part), std::string::npos)
        << "message \"" << s.message() << "\" lacks \"" << part << "\"";
  }
  if (backend == Backend::kGPU) ASSERT_TRUE(gpu_synchronize(0).ok());
  for (size_t i = 0; i < buffers.size(); ++i) {
    buffers[i]->download();
    EXPECT_TRUE(buffers[i]->equals_snapshot(before[i])) << "buffer " << i << " was written";
  }
}

TensorView with_dtype(TensorView t, DType d) {
  t.dtype = d;
  return t;
}

TensorView with_shape(TensorView t, std::initializer_list<int64_t> shape,
                      std::initializer_list<int64_t> strides) {
  return TensorView::strided(t.data, t.dtype, t.device, shape, strides);
}

TensorView with_data(TensorView t, void* data) {
  t.data = data;
  return t;
}

TensorView with_device(TensorView t, Device d) {
  t.device = d;
  return t;
}

void* offset_bytes(void* p, int64_t bytes) { return static_cast<char*>(p) + bytes; }

Device other_device(Backend backend) {
  return backend == Backend::kCPU ? Device::gpu(0) : Device::cpu();
}

}  // namespace fusekit::testing
