// gelu on the CPU: the tanh approximation of GELU.
#include <cmath>

#include "elementwise.h"

void gelu(torch::Tensor &out, const torch::Tensor &input) {
  elementwise("gelu", out, input, [](auto x) { return decltype(x)(0.5) * x * (decltype(x)(1) + std::tanh(decltype(x)(0.7978845608028654) * (x + decltype(x)(0.044715) * x * x * x))); });
}
