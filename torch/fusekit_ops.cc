// The PyTorch operators of fusekit (torch.ops.fusekit.*): the library's registration, and the
// conventions every operator follows. The operators themselves are in norm_ops.cc and act_ops.cc,
// over op_support.h; these are the only files that include PyTorch headers.
//
// Why PyTorch's stable ABI (torch/csrc/stable, STABLE_TORCH_LIBRARY): the library it builds talks
// to PyTorch only through a C shim, so one build loads into every PyTorch release from the one it
// was compiled against onwards (TORCH_TARGET_VERSION pins the API to 2.10), it links no Python, and
// these headers compile in seconds instead of the full ATen headers' minutes.
//
// Each operator turns its tensors into fusekit::TensorViews (pointer, dtype, device, sizes,
// strides), allocates outputs through PyTorch (new_empty: the caching allocator, so CUDA-graph
// capture works), and calls the C++ API on the tensors' current stream. Nothing here waits for the
// GPU. A failed fusekit::Status becomes an exception that PyTorch hands to Python:
// invalid-argument and unsupported statuses as std::invalid_argument (Python's ValueError), device
// runtime errors as std::runtime_error (RuntimeError); the message is Status::to_string(), which
// names the op, the argument, the expected and the actual value.
//
// Schemas follow the vLLM convention: mutated arguments are marked (Tensor(a!)), in-place ops end
// in '_', out variants take their outputs first and return nothing; functional ops return fresh
// tensors. Per-row statistics (rstd, mean) are float32 tensors of shape [M], M = x.numel() / N.
//
// The gated activations come once per activation (silu, gelu_tanh, gelu), as C++ templates on
// fusekit::Activation registered under each name: {act}_and_mul on the fused [..., 2N] input,
// {act}_and_mul_split on separate gate and up, their _quant_fp8 forms and their backward passes.
// The fp8 format is an explicit string argument ("e4m3fn" or "e4m3fnuz"), never inferred.
//
// RMSNorm with an fp8 output (rms_norm_quant_fp8, fused_add_rms_norm_quant_fp8, with a dynamic
// per-row scale or, in the _static forms, a one-element scale tensor the kernel reads) follows the
// same conventions; its fused-add forms update residual in place, as fused_add_rms_norm_ does.
#include "op_support.h"

STABLE_TORCH_LIBRARY(fusekit, m) {
  fusekit::torch_ops::define_norm_ops(m);
  fusekit::torch_ops::define_act_ops(m);
}

STABLE_TORCH_LIBRARY_IMPL(fusekit, CPU, m) {
  fusekit::torch_ops::register_norm_kernels(m);
  fusekit::torch_ops::register_act_kernels(m);
}

#if FUSEKIT_TORCH_GPU
STABLE_TORCH_LIBRARY_IMPL(fusekit, CUDA, m) {
  fusekit::torch_ops::register_norm_kernels(m);
  fusekit::torch_ops::register_act_kernels(m);
}
#endif
