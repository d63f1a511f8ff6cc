// Gated activations of transformer MLPs: out = act(gate) * up, alone or fused with dynamic
// per-token fp8 quantization, and the backward pass.
//
// Shapes. The fused-input form takes x [..., 2N] holding gate in x[..., :N] and up in
// x[..., N:] (the output of a fused gate-up projection) and writes out [..., N]. The split form
// takes gate and up [..., N] as separate views, each with its own row stride (e.g. two halves of
// a projection output, or two tensors). Any rank >= 1; leading dimensions are flattened into M
// rows; rows may be strided (row stride >= the row length) but the last dimension must be
// contiguous; any N, odd included; M == 0 is a no-op. All tensors of a call live on one device.
//
// Dtypes. x / gate / up / out: float32, float16 or bfloat16, all the same. Computed in float32
// and rounded once to out's dtype. The float32 math is the same operations on every backend, so
// the CPU and GPU give the same bits, except for the plain op's bfloat16 and float16 outputs on a
// GPU: there exp and the reciprocal come from the hardware's approximations (a few 1e-6 relative
// before the rounding to 16 bits, up to 1e-5 for gelu at |x| near 15; a 16-bit step is 2^-8 or
// 2^-11).
//
// Activations (Activation), right for every finite input up to the dtype's largest value (no
// inf * 0 or inf / inf inside, never NaN from finite inputs; NaN in gives NaN out; a product that
// overflows the output dtype is +-inf as rounding says; act(g) itself has float32's resolution,
// so where it underflows (silu or gelu of g < -103) the result is 0 even for a huge up):
//   kSilu:     silu(g) = g * sigmoid(g)
//   kGeluTanh: gelu_tanh(g) = 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 * g^3)))
//   kGelu:     gelu(g) = 0.5 * g * (1 + erf(g / sqrt(2)))
//
// fp8 quantization (act_and_mul_quant_fp8). Per row, y = act(gate) * up in float32 (a shorter
// form of the activation math, within about 1e-5 relative, which an fp8 code's 3 mantissa bits
// cannot see; the same operations on every backend), then
//   scale = max(min(max|y| / fp8_max, scale_upper_bound), min_scale),  out = fp8(y * (1 / scale))
// with fp8_max = 448 (e4m3fn) or 240 (e4m3fnuz), min_scale = 1 / (fp8_max * 512) (the floor
// vLLM uses, so scales interoperate; it keeps an all-zero row at a finite positive scale and its
// outputs zeros, -0 where y is -0 and the format has one), and scale_upper_bound = 0 meaning no
// bound. 1 / scale is one IEEE float32 division per row and y * (1 / scale) one float32 multiply
// per element; the float -> fp8 conversion rounds to nearest even and saturates (fusekit/fp8.h).
// `scale` is float32 with one element per row: shape [M] or out's shape with the last dimension
// 1. out's dtype must be the fp8 dtype of `format`. A row whose y holds NaN gets a NaN scale and
// NaN outputs. A y beyond float32's range (only float32 or bfloat16 inputs near their largest
// values reach it) is taken as +-FLT_MAX: scales stay finite, such elements saturate.
// The format is always an explicit argument: the two encodings are not interchangeable.
//
// Backward (act_and_mul_backward): from grad_out [..., N] and the forward inputs,
//   grad_gate = grad_out * up * act'(gate),  grad_up = grad_out * act(gate)
// in float32, rounded once, all tensors one dtype. The fused form writes both into grad_x
// [..., 2N] (grad_gate in the first half).
//
// Aliasing. Outputs must not overlap any input or each other (inputs may overlap each other).
// Overlap means a shared byte: views of one buffer whose rows interleave without meeting (an
// output in the columns beside the input's, or on the rows between them) are accepted.
//
// Determinism. Each row's outputs (and scale) depend only on that row: bitwise the same alone or
// in a batch of any size, and run to run; the CPU and GPU backends give the same fp8 codes and
// scales bit for bit.
#pragma once

#include <cstdint>

#include "fusekit/fp8.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"

namespace fusekit {

enum class Activation : int32_t {
  kSilu = 0,
  kGeluTanh = 1,
  kGelu = 2,  // exact, with erf
};

const char* activation_name(Activation act);  // "silu", "gelu_tanh", "gelu"

// out [..., N] = act(x[..., :N]) * x[..., N:], x [..., 2N].
Status act_and_mul(Activation act, const TensorView& out, const TensorView& x,
                   Stream stream = nullptr);
// out [..., N] = act(gate) * up; gate and up [..., N].
Status act_and_mul(Activation act, const TensorView& out, const TensorView& gate,
                   const TensorView& up, Stream stream = nullptr);

// out [..., N] fp8 of `format` and scale [M] (or [..., 1]) float32: dynamic per-row quantization
// of act(x[..., :N]) * x[..., N:]. scale_upper_bound: 0 for none, else a positive cap.
Status act_and_mul_quant_fp8(Activation act, const TensorView& out, const TensorView& scale,
                             const TensorView& x, Fp8Format format,
                             float scale_upper_bound = 0.0f, Stream stream = nullptr);
// The same for separate gate and up [..., N].
Status act_and_mul_quant_fp8(Activation act, const TensorView& out, const TensorView& scale,
                             const TensorView& gate, const TensorView& up, Fp8Format format,
                             float scale_upper_bound = 0.0f, Stream stream = nullptr);

// grad_x [..., 2N] = (grad_gate, grad_up) for out = act(x[..., :N]) * x[..., N:].
Status act_and_mul_backward(Activation act, const TensorView& grad_x,
                            const TensorView& grad_out, const TensorView& x,
                            Stream stream = nullptr);
// grad_gate, grad_up [..., N] for out = act(gate) * up.
Status act_and_mul_backward(Activation act, const TensorView& grad_gate,
                            const TensorView& grad_up, const TensorView& grad_out,
                            const TensorView& gate, const TensorView& up,
                            Stream stream = nullptr);

// Named forms of the above.
inline Status silu_and_mul(const TensorView& out, const TensorView& x, Stream stream = nullptr) {
  return act_and_mul(Activation::kSilu, out, x, stream);
}
inline Status silu_and_mul(const TensorView& out, const TensorView& gate, const TensorView& up,
                           Stream stream = nullptr) {
  return act_and_mul(Activation::kSilu, out, gate, up, stream);
}
inline Status gelu_tanh_and_mul(const TensorView& out, const TensorView& x,
                                Stream stream = nullptr) {
  return act_and_mul(Activation::kGeluTanh, out, x, stream);
}
inline Status gelu_tanh_and_mul(const TensorView& out, const TensorView& gate,
                                const TensorView& up, Stream stream = nullptr) {
  return act_and_mul(Activation::kGeluTanh, out, gate, up, stream);
}
inline Status gelu_and_mul(const TensorView& out, const TensorView& x, Stream stream = nullptr) {
  return act_and_mul(Activation::kGelu, out, x, stream);
}
inline Status gelu_and_mul(const TensorView& out, const TensorView& gate, const TensorView& up,
                           Stream stream = nullptr) {
  return act_and_mul(Activation::kGelu, out, gate, up, stream);
}
inline Status silu_and_mul_quant_fp8(const TensorView& out, const TensorView& scale,
                                     const TensorView& x, Fp8Format format,
                                     float scale_upper_bound = 0.0f, Stream stream = nullptr) {
  return act_and_mul_quant_fp8(Activation::kSilu, out, scale, x, format, scale_upper_bound,
                               stream);
}
inline Status gelu_tanh_and_mul_quant_fp8(const TensorView& out, const TensorView& scale,
                                          const TensorView& x, Fp8Format format,
                                          float scale_upper_bound = 0.0f,
                                          Stream stream = nullptr) {
  return act_and_mul_quant_fp8(Activation::kGeluTanh, out, scale, x, format, scale_upper_bound,
                               stream);
}
inline Status gelu_and_mul_quant_fp8(const TensorView& out, const TensorView& scale,
                                     const TensorView& x, Fp8Format format,
                                     float scale_upper_bound = 0.0f, Stream stream = nullptr) {
  return act_and_mul_quant_fp8(Activation::kGelu, out, scale, x, format, scale_upper_bound,
                               stream);
}

}  // namespace fusekit
