// The op of this kernel, declared against the torch stable ABI only.
#pragma once

#include <torch/csrc/stable/tensor.h>

// out = max(input, 0) elementwise; both contiguous, same dtype (float32 or
// float64) and the same number of elements.
void relu_stable(torch::stable::Tensor &out, const torch::stable::Tensor &input);
