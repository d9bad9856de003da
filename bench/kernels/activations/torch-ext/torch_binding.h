// The ops this kernel registers: out = f(input), elementwise, same shape and dtype.
#pragma once

#include <torch/torch.h>

void relu(torch::Tensor &out, const torch::Tensor &input);
void silu(torch::Tensor &out, const torch::Tensor &input);
void gelu(torch::Tensor &out, const torch::Tensor &input);
void sigmoid(torch::Tensor &out, const torch::Tensor &input);
void softplus(torch::Tensor &out, const torch::Tensor &input);
