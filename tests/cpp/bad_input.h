// The harness the bad-input suites share: a bad call must fail with the expected status code and
// a message holding every expected part (the argument, the expected and the actual value), and
// must write nothing: every buffer of the call is compared byte for byte with its state before
// it. Also the view edits those suites build bad arguments from.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test_support.h"

namespace fusekit::testing {

// One bad call over a suite's operands (a struct built from a Backend with an `all()` listing
// every buffer the call may touch).
template <typename Operands>
struct BadCase {
  std::string what;
  std::function<Status(Operands&)> call;
  StatusCode code;
  std::vector<std::string> message_parts;  // each must appear in the message
};

// Runs `call` and checks the refusal, then that none of `buffers` changed.
void expect_refused_untouched(Backend backend, const std::vector<RowBuffer*>& buffers,
                              const std::function<Status()>& call, StatusCode code,
                              const std::vector<std::string>& message_parts);

// Each case on fresh operands of `backend`.
template <typename Operands>
void expect_all_refused(Backend backend, const std::vector<BadCase<Operands>>& cases) {
  for (const BadCase<Operands>& c : cases) {
    SCOPED_TRACE(c.what);
    Operands o(backend);
    expect_refused_untouched(backend, o.all(), [&] { return c.call(o); }, c.code,
                             c.message_parts);
  }
}

// Copies of a view with one property changed.
TensorView with_dtype(TensorView t, DType d);
TensorView with_shape(TensorView t, std::initializer_list<int64_t> shape,
                      std::initializer_list<int64_t> strides);
TensorView with_data(TensorView t, void* data);
TensorView with_device(TensorView t, Device d);
void* offset_bytes(void* p, int64_t bytes);

// The device a suite on `backend` uses as "another device".
Device other_device(Backend backend);

}  // namespace fusekit::testing
