// fusekit's gated-activation operators for PyTorch (torch.ops.fusekit.{act}_and_mul and their
// split, fp8 and backward forms): schemas, and the functions that turn tensors into the C++ API's
// calls, once per activation as templates on fusekit::Activation. Conventions: fusekit_ops.cc.
#include "op_support.h"

namespace fusekit::torch_ops {
namespace {

// ---- Gated activations ---------------------------------------------------------------------
// x: [..., 2N], gate in x[..., :N] and up in x[..., N:]; or gate, up: [..., N] (strided views
// allowed, as the C++ API allows). out: [..., N] in the inputs' dtype, or for the fp8 forms in the
// fp8 dtype of `format`, with a float32 scale per row: [M], or [..., 1] with scale_keepdim.

constexpr Activation kActivations[] = {Activation::kSilu, Activation::kGeluTanh,
                                       Activation::kGelu};

// The operator's name: e.g. act_op_name(kGelu, "_split_out") == "gelu_and_mul_split_out".
std::string act_op_name(Activation act, const char* suffix) {
  return std::string(activation_name(act)) + "_and_mul" + suffix;
}

template <Activation kAct>
void act_and_mul_out(Tensor out, Tensor x) {
  const std::string op = act_op_name(kAct, "_out");
  raise_if_error(fusekit::act_and_mul(kAct, view(out, op.c_str(), "out"),
                                      view(x, op.c_str(), "x"), stream_of(x)));
}

template <Activation kAct>
Tensor act_and_mul(Tensor x) {
  Tensor out = torch::stable::new_empty(x, with_last(x, last_dim(x) / 2), x.scalar_type());
  act_and_mul_out<kAct>(out, x);
  return out;
}

template <Activation kAct>
void act_and_mul_split_out(Tensor out, Tensor gate, Tensor up) {
  const std::string op = act_op_name(kAct, "_split_out");
  raise_if_error(fusekit::act_and_mul(kAct, view(out, op.c_str(), "out"),
                                      view(gate, op.c_str(), "gate"), view(up, op.c_str(), "up"),
                                      stream_of(gate)));
}

template <Activation kAct>
Tensor act_and_mul_split(Tensor gate, Tensor up) {
  Tensor out = empty_like_rows(gate, gate.scalar_type());
  act_and_mul_split_out<kAct>(out, gate, up);
  return out;
}

template <Activation kAct>
void act_and_mul_quant_fp8_out(Tensor out, Tensor scale, Tensor x, std::string format,
                               double scale_upper_bound) {
  const std::string op = act_op_name(kAct, "_quant_fp8_out");
  const char* o = op.c_str();
  raise_if_error(fusekit::act_and_mul_quant_fp8(
      kAct, view(out, o, "out"), view(scale, o, "scale"), view(x, o, "x"),
      fp8_format_of(format, op), to_float(scale_upper_bound), stream_of(x)));
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_quant_fp8(Tensor x, std::string format,
                                                 double scale_upper_bound, bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, act_op_name(kAct, "_quant_fp8"));
  Tensor out = torch::stable::new_empty(x, with_last(x, last_dim(x) / 2), fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  act_and_mul_quant_fp8_out<kAct>(out, scale, x, format, scale_upper_bound);
  return {out, scale};
}

template <Activation kAct>
void act_and_mul_split_quant_fp8_out(Tensor out, Tensor scale, Tensor gate, Tensor up,
                                     std::string format, double scale_upper_bound) {
  const std::string op = act_op_name(kAct, "_split_quant_fp8_out");
  const char* o = op.c_str();
  raise_if_error(fusekit::act_and_mul_quant_fp8(
      kAct, view(out, o, "out"), view(scale, o, "scale"), view(gate, o, "gate"),
      view(up, o, "up"), fp8_format_of(format, op), to_float(scale_upper_bound),
      stream_of(gate)));
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_split_quant_fp8(Tensor gate, Tensor up,
                                                       std::string format,
                                                       double scale_upper_bound,
                                                       bool scale_keepdim) {
  const Fp8Format f = fp8_format_of(format, act_op_name(kAct, "_split_quant_fp8"));
  Tensor out = empty_like_rows(gate, fp8_scalar_type(f));
  Tensor scale = row_scales(out, scale_keepdim);
  act_and_mul_split_quant_fp8_out<kAct>(out, scale, gate, up, format, scale_upper_bound);
  return {out, scale};
}

template <Activation kAct>
Tensor act_and_mul_backward(Tensor grad_out, Tensor x) {
  const std::string op = act_op_name(kAct, "_backward");
  const char* o = op.c_str();
  Tensor grad_x = empty_like_rows(x, x.scalar_type());
  raise_if_error(fusekit::act_and_mul_backward(kAct, view(grad_x, o, "grad_x"),
                                               view(grad_out, o, "grad_out"), view(x, o, "x"),
                                               stream_of(x)));
  return grad_x;
}

template <Activation kAct>
std::tuple<Tensor, Tensor> act_and_mul_split_backward(Tensor grad_out, Tensor gate, Tensor up) {
  const std::string op = act_op_name(kAct, "_split_backward");
  const char* o = op.c_str();
  Tensor grad_gate = empty_like_rows(gate, gate.scalar_type());
  Tensor grad_up = empty_like_rows(gate, gate.scalar_type());
  raise_if_error(fusekit::act_and_mul_backward(
      kAct, view(grad_gate, o, "grad_gate"), view(grad_up, o, "grad_up"),
      view(grad_out, o, "grad_out"), view(gate, o, "gate"), view(up, o, "up"), stream_of(gate)));
  return {grad_gate, grad_up};
}

template <Activation kAct>
void register_kernels_of(Library& m) {
  const auto impl = [&](const char* suffix, auto boxed) {
    m.impl(act_op_name(kAct, suffix).c_str(), boxed);
  };
  impl("", TORCH_BOX(&act_and_mul<kAct>));
  impl("_out", TORCH_BOX(&act_and_mul_out<kAct>));
  impl("_split", TORCH_BOX(&act_and_mul_split<kAct>));
  impl("_split_out", TORCH_BOX(&act_and_mul_split_out<kAct>));
  impl("_quant_fp8", TORCH_BOX(&act_and_mul_quant_fp8<kAct>));
  impl("_quant_fp8_out", TORCH_BOX(&act_and_mul_quant_fp8_out<kAct>));
  impl("_split_quant_fp8", TORCH_BOX(&act_and_mul_split_quant_fp8<kAct>));
  impl("_split_quant_fp8_out", TORCH_BOX(&act_and_mul_split_quant_fp8_out<kAct>));
  impl("_backward", TORCH_BOX(&act_and_mul_backward<kAct>));
  impl("_split_backward", TORCH_BOX(&act_and_mul_split_backward<kAct>));
}

// The schemas of one activation's operators.
void define_ops_of(Library& m, Activation act) {
  const std::string name = act_op_name(act, "");
  const std::string fp8 = "str format, float scale_upper_bound=0.0";
  for (const std::string& schema : {
           name + "(Tensor x) -> Tensor",
           name + "_out(Tensor(a!) out, Tensor x) -> ()",
           name + "_split(Tensor gate, Tensor up) -> Tensor",
           name + "_split_out(Tensor(a!) out, Tensor gate, Tensor up) -> ()",
           name + "_quant_fp8(Tensor x, " + fp8 + ", bool scale_keepdim=False) -> "
                  "(Tensor out, Tensor scale)",
           name + "_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor x, " + fp8 + ") -> ()",
           name + "_split_quant_fp8(Tensor gate, Tensor up, " + fp8 +
               ", bool scale_keepdim=False) -> (Tensor out, Tensor scale)",
           name + "_split_quant_fp8_out(Tensor(a!) out, Tensor(b!) scale, Tensor gate, "
                  "Tensor up, " + fp8 + ") -> ()",
           name + "_backward(Tensor grad_out, Tensor x) -> Tensor grad_x",
           name + "_split_backward(Tensor grad_out, Tensor gate, Tensor up) -> "
                  "(Tensor grad_gate, Tensor grad_up)",
       }) {
    m.def(schema.c_str());
  }
}

}  // namespace

void define_act_ops(Library& m) {
  for (const Activation act : kActivations) define_ops_of(m, act);
}

void register_act_kernels(Library& m) {
  register_kernels_of<Activation::kSilu>(m);
  register_kernels_of<Activation::kGeluTanh>(m);
  register_kernels_of<Activation::kGelu>(m);
}

}  // namespace fusekit::torch_ops
