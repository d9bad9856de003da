#pragma once

#include <torch/torch.h>

void silu(torch::Tensor &out, torch::Tensor const &input);
