// The ops this kernel registers, one declaration per backend implementation.
// ATen's tensor alone (torch::Tensor is at::Tensor): the binding compiles in a
// quarter of the time <torch/torch.h> (the whole C++ frontend) takes.
#pragma once

#include <ATen/core/Tensor.h>

// out = max(input, 0), elementwise; out and input have the same shape and dtype.
void relu_cpu(at::Tensor &out, const at::Tensor &input);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
void relu_gpu(at::Tensor &out, const at::Tensor &input);
#endif
