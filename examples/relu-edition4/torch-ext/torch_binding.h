// The ops this kernel registers, one declaration per backend implementation.
#pragma once

#include <torch/torch.h>

// out = max(input, 0), elementwise; out and input have the same shape and dtype.
void relu_cpu(torch::Tensor &out, const torch::Tensor &input);
#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
void relu_gpu(torch::Tensor &out, const torch::Tensor &input);
#endif
