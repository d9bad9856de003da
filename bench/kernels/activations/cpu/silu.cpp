// silu on the CPU: x * sigmoid(x).
#include <cmath>

#include "elementwise.h"

void silu(torch::Tensor &out, const torch::Tensor &input) {
  elementwise("silu", out, input, [](auto x) { return x / (decltype(x)(1) + std::exp(-x)); });
}
