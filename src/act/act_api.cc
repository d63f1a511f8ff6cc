// The public gated-activation entry points: validate every argument, describe the call as one
// ActProblem (ActBackwardProblem), and hand it to the backend of the tensors' device. Nothing is
// written unless every check has passed.
#include <string>
#include <vector>

#include "act/act_problem.h"
#include "core/validate.h"
#include "fusekit/activation.h"

namespace fusekit {

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::kSilu: return "silu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kGelu: return "gelu";
  }
  return "unknown-activation";
}

namespace {

using detail::ActBackwardProblem;
using detail::ActProblem;
using detail::Rows;

constexpr std::initializer_list<DType> kFloatDtypes = {DType::kFloat32, DType::kFloat16,
                                                       DType::kBFloat16};

Status expect_activation(const char* op, Activation act) {
  if (act == Activation::kSilu || act == Activation::kGeluTanh || act == Activation::kGelu) {
    return Status();
  }
  return detail::invalid(op, "act", "expected silu, gelu_tanh or gelu but got value " +
                                        std::to_string(static_cast<int>(act)));
}

enum class Entry { kForward, kQuantFp8, kBackward };

// What error messages call an op of a valid activation: the function for it that the caller most
// likely called (silu_and_mul, gelu_tanh_and_mul_quant_fp8, ...), rather than the generic entry
// (act_and_mul, whose name they give when the activation itself is invalid).
const char* op_name(Activation act, Entry entry) {
  static constexpr const char* kNames[3][3] = {
      {"silu_and_mul", "silu_and_mul_quant_fp8", "silu_and_mul_backward"},
      {"gelu_tanh_and_mul", "gelu_tanh_and_mul_quant_fp8", "gelu_tanh_and_mul_backward"},
      {"gelu_and_mul", "gelu_and_mul_quant_fp8", "gelu_and_mul_backward"}};
  const int a = act == Activation::kSilu ? 0 : act == Activation::kGeluTanh ? 1 : 2;
  return kNames[a][static_cast<int>(entry)];
}

// A float input: rows, dtype among the float dtypes (and equal to `dtype_ref` when given),
// device equal to `device`.
Status float_rows(const char* op, const char* arg, const TensorView& t, const Device& device,
                  const char* device_ref, const TensorView* dtype_ref, const char* dtype_ref_arg,
                  Rows* rows) {
  FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, arg, t, rows));
  if (dtype_ref == nullptr) {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_dtype_in(op, arg, t.dtype, kFloatDtypes));
  } else if (t.dtype != dtype_ref->dtype) {
    return detail::unsupported(op, arg, std::string("expected dtype ") +
                                            dtype_name(dtype_ref->dtype) + " (" + dtype_ref_arg +
                                            "'s dtype) but got " + dtype_name(t.dtype));
  }
  return detail::expect_device(op, arg, t, device, device_ref);
}

// The two halves of a [..., 2N] tensor as separate row sets.
void split_halves(const Rows& whole, Rows* first, Rows* second) {
  const int64_t n = whole.cols / 2;
  *first = whole;
  first->cols = n;
  *second = *first;
  second->data = static_cast<char*>(whole.data) + n * static_cast<int64_t>(dtype_size(whole.dtype));
}

struct Operand {
  const char* name;
  Rows rows;
};

// Every output disjoint from every input and from the other outputs.
Status expect_outputs_disjoint(const char* op, const std::vector<Operand>& inputs,
                               const std::vector<Operand>& outputs) {
  for (size_t a = 0; a < outputs.size(); ++a) {
    for (const Operand& in : inputs) {
      FUSEKIT_RETURN_IF_ERROR(
          detail::expect_no_overlap(op, outputs[a].name, outputs[a].rows, in.name, in.rows));
    }
    for (size_t b = 0; b < a; ++b) {
      FUSEKIT_RETURN_IF_ERROR(detail::expect_no_overlap(op, outputs[a].name, outputs[a].rows,
                                                        outputs[b].name, outputs[b].rows));
    }
  }
  return Status();
}

// What the forward entry points share. `x` is set for the fused-input form, else gate and up.
struct ForwardCall {
  const char* op;
  Activation act;
  const TensorView* out;
  const TensorView* x;
  const TensorView* gate;
  const TensorView* up;
  bool quantize;
  const TensorView* scale;
  Fp8Format format;
  float scale_upper_bound;
};

Status build_forward(const ForwardCall& c, ActProblem* p) {
  FUSEKIT_RETURN_IF_ERROR(expect_activation(c.op, c.act));
  const char* op = op_name(c.act, c.quantize ? Entry::kQuantFp8 : Entry::kForward);
  Rows gate, up, out;
  const TensorView* in;  // the tensor out's shape and the dtype derive from
  std::vector<Operand> inputs;
  if (c.x != nullptr) {
    in = c.x;
    Rows x;
    FUSEKIT_RETURN_IF_ERROR(
        float_rows(op, "x", *c.x, c.x->device, "x", nullptr, nullptr, &x));
    if (x.cols % 2 != 0) {
      return detail::invalid(op, "x",
                             "expected an even last dimension (gate and up halves of 2N) but got " +
                                 std::to_string(x.cols));
    }
    split_halves(x, &gate, &up);
    inputs.push_back({"x", x});
  } else {
    in = c.gate;
    FUSEKIT_RETURN_IF_ERROR(
        float_rows(op, "gate", *c.gate, c.gate->device, "gate", nullptr, nullptr, &gate));
    FUSEKIT_RETURN_IF_ERROR(
        float_rows(op, "up", *c.up, c.gate->device, "gate", c.gate, "gate", &up));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "up", *c.up, "gate", *c.gate));
    inputs.push_back({"gate", gate});
    inputs.push_back({"up", up});
  }
  const Device device = in->device;
  const char* in_name = c.x != nullptr ? "x" : "gate";

  if (c.quantize) {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_fp8_format(op, c.format));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_scale_upper_bound(op, c.scale_upper_bound));
  }
  FUSEKIT_RETURN_IF_ERROR(detail::as_rows(op, "out", *c.out, &out));
  const std::string why = std::string(in_name) + "'s shape with last dimension N";
  FUSEKIT_RETURN_IF_ERROR(
      detail::expect_shape(op, "out", *c.out, detail::with_last(*in, gate.cols), why.c_str()));
  if (c.quantize) {
    FUSEKIT_RETURN_IF_ERROR(detail::expect_fp8_dtype(op, "out", c.out->dtype, c.format));
  } else if (c.out->dtype != in->dtype) {
    return detail::unsupported(op, "out", std::string("expected dtype ") + dtype_name(in->dtype) +
                                              " (" + in_name + "'s dtype) but got " +
                                              dtype_name(c.out->dtype));
  }
  FUSEKIT_RETURN_IF_ERROR(detail::expect_device(op, "out", *c.out, device, in_name));

  std::vector<Operand> outputs = {{"out", out}};
  if (c.quantize) {
    Rows scale_rows;
    FUSEKIT_RETURN_IF_ERROR(detail::as_row_scales(op, "scale", *c.scale, gate.rows, *c.out, device,
                                                  in_name, &scale_rows));
    outputs.push_back({"scale", scale_rows});
  }
  FUSEKIT_RETURN_IF_ERROR(expect_outputs_disjoint(op, inputs, outputs));

  p->act = c.act;
  p->rows = gate.rows;
  p->cols = gate.cols;
  p->dtype = in->dtype;
  p->gate = gate.data;
  p->gate_stride = gate.row_stride;
  p->up = up.data;
  p->up_stride = up.row_stride;
  p->out = out.data;
  p->out_stride = out.row_stride;
  p->quantize = c.quantize;
  p->format = c.format;
  p->scale = c.quantize ? static_cast<float*>(c.scale->data) : nullptr;
  p->scale_upper_bound = c.scale_upper_bound;
  p->device = device;
  return Status();
}

Status run_forward(const ForwardCall& c, Stream stream) {
  ActProblem p;
  FUSEKIT_RETURN_IF_ERROR(build_forward(c, &p));
  if (p.rows == 0) return Status();
  if (p.device.is_gpu()) return detail::run_act_gpu(p, stream);
  return detail::run_act_cpu(p);
}

struct BackwardCall {
  const char* op;
  Activation act;
  const TensorView* grad_x;  // fused form
  const TensorView* grad_gate;
  const TensorView* grad_up;
  const TensorView* grad_out;
  const TensorView* x;  // fused form
  const TensorView* gate;
  const TensorView* up;
};

Status build_backward(const BackwardCall& c, ActBackwardProblem* p) {
  FUSEKIT_RETURN_IF_ERROR(expect_activation(c.op, c.act));
  const char* op = op_name(c.act, Entry::kBackward);
  Rows gate, up, grad_out, grad_gate, grad_up;
  const TensorView* in;
  const char* in_name;
  std::vector<Operand> inputs, outputs;
  if (c.x != nullptr) {
    in = c.x;
    in_name = "x";
    Rows x, grad_x;
    FUSEKIT_RETURN_IF_ERROR(float_rows(op, "x", *c.x, c.x->device, "x", nullptr, nullptr, &x));
    if (x.cols % 2 != 0) {
      return detail::invalid(op, "x",
                             "expected an even last dimension (gate and up halves of 2N) but got " +
                                 std::to_string(x.cols));
    }
    split_halves(x, &gate, &up);
    FUSEKIT_RETURN_IF_ERROR(float_rows(op, "grad_x", *c.grad_x, c.x->device, "x", c.x, "x",
                                       &grad_x));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "grad_x", *c.grad_x, "x", *c.x));
    split_halves(grad_x, &grad_gate, &grad_up);
    inputs.push_back({"x", x});
    outputs.push_back({"grad_x", grad_x});
  } else {
    in = c.gate;
    in_name = "gate";
    const Device d = c.gate->device;
    FUSEKIT_RETURN_IF_ERROR(float_rows(op, "gate", *c.gate, d, "gate", nullptr, nullptr, &gate));
    FUSEKIT_RETURN_IF_ERROR(float_rows(op, "up", *c.up, d, "gate", c.gate, "gate", &up));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "up", *c.up, "gate", *c.gate));
    FUSEKIT_RETURN_IF_ERROR(
        float_rows(op, "grad_gate", *c.grad_gate, d, "gate", c.gate, "gate", &grad_gate));
    FUSEKIT_RETURN_IF_ERROR(
        detail::expect_same_shape(op, "grad_gate", *c.grad_gate, "gate", *c.gate));
    FUSEKIT_RETURN_IF_ERROR(
        float_rows(op, "grad_up", *c.grad_up, d, "gate", c.gate, "gate", &grad_up));
    FUSEKIT_RETURN_IF_ERROR(detail::expect_same_shape(op, "grad_up", *c.grad_up, "gate", *c.gate));
    inputs.push_back({"gate", gate});
    inputs.push_back({"up", up});
    outputs.push_back({"grad_gate", grad_gate});
    outputs.push_back({"grad_up", grad_up});
  }
  FUSEKIT_RETURN_IF_ERROR(
      float_rows(op, "grad_out", *c.grad_out, in->device, in_name, in, in_name, &grad_out));
  const std::string why = std::string(in_name) + "'s shape with last dimension N";
  FUSEKIT_RETURN_IF_ERROR(detail::expect_shape(op, "grad_out", *c.grad_out,
                                               detail::with_last(*in, gate.cols), why.c_str()));
  inputs.push_back({"grad_out", grad_out});
  FUSEKIT_RETURN_IF_ERROR(expect_outputs_disjoint(op, inputs, outputs));

  p->act = c.act;
  p->rows = gate.rows;
  p->cols = gate.cols;
  p->dtype = in->dtype;
  p->grad_out = grad_out.data;
  p->grad_out_stride = grad_out.row_stride;
  p->gate = gate.data;
  p->gate_stride = gate.row_stride;
  p->up = up.data;
  p->up_stride = up.row_stride;
  p->grad_gate = grad_gate.data;
  p->grad_gate_stride = grad_gate.row_stride;
  p->grad_up = grad_up.data;
  p->grad_up_stride = grad_up.row_stride;
  p->device = in->device;
  return Status();
}

Status run_backward(const BackwardCall& c, Stream stream) {
  ActBackwardProblem p;
  FUSEKIT_RETURN_IF_ERROR(build_backward(c, &p));
  if (p.rows == 0) return Status();
  if (p.device.is_gpu()) return detail::run_act_backward_gpu(p, stream);
  return detail::run_act_backward_cpu(p);
}

}  // namespace

Status act_and_mul(Activation act, const TensorView& out, const TensorView& x, Stream stream) {
  return run_forward({"act_and_mul", act, &out, &x, nullptr, nullptr, false, nullptr,
                      Fp8Format::kE4M3FN, 0.0f},
                     stream);
}

Status act_and_mul(Activation act, const TensorView& out, const TensorView& gate,
                   const TensorView& up, Stream stream) {
  return run_forward({"act_and_mul", act, &out, nullptr, &gate, &up, false, nullptr,
                      Fp8Format::kE4M3FN, 0.0f},
                     stream);
}

Status act_and_mul_quant_fp8(Activation act, const TensorView& out, const TensorView& scale,
                             const TensorView& x, Fp8Format format, float scale_upper_bound,
                             Stream stream) {
  return run_forward({"act_and_mul_quant_fp8", act, &out, &x, nullptr, nullptr, true, &scale,
                      format, scale_upper_bound},
                     stream);
}

Status act_and_mul_quant_fp8(Activation act, const TensorView& out, const TensorView& scale,
                             const TensorView& gate, const TensorView& up, Fp8Format format,
                             float scale_upper_bound, Stream stream) {
  return run_forward({"act_and_mul_quant_fp8", act, &out, nullptr, &gate, &up, true, &scale,
                      format, scale_upper_bound},
                     stream);
}

Status act_and_mul_backward(Activation act, const TensorView& grad_x, const TensorView& grad_out,
                            const TensorView& x, Stream stream) {
  return run_backward({"act_and_mul_backward", act, &grad_x, nullptr, nullptr, &grad_out, &x,
                       nullptr, nullptr},
                      stream);
}

Status act_and_mul_backward(Activation act, const TensorView& grad_gate,
                            const TensorView& grad_up, const TensorView& grad_out,
                            const TensorView& gate, const TensorView& up, Stream stream) {
  return run_backward({"act_and_mul_backward", act, nullptr, &grad_gate, &grad_up, &grad_out,
                       nullptr, &gate, &up},
                      stream);
}

}  // namespace fusekit
