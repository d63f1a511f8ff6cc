// The public fp8 format queries (fusekit/fp8.h), answered from the one definition in core/fp8.h.
#include "core/fp8.h"

#include "fusekit/fp8.h"

namespace fusekit {

const char* fp8_format_name(Fp8Format format) {
  switch (format) {
    case Fp8Format::kE4M3FN: return "e4m3fn";
    case Fp8Format::kE4M3FNUZ: return "e4m3fnuz";
  }
  return "unknown-fp8-format";
}

float fp8_format_max(Fp8Format format) {
  return detail::dispatch_fp8_format(format, [](auto tag) { return decltype(tag)::kMax; });
}

DType fp8_format_dtype(Fp8Format format) {
  return format == Fp8Format::kE4M3FNUZ ? DType::kFloat8E4M3FNUZ : DType::kFloat8E4M3FN;
}

}  // namespace fusekit
