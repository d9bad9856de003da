// sigmoid on the CPU: 1 / (1 + exp(-x)).
#include <cmath>

#include "elementwise.h"

void sigmoid(torch::Tensor &out, const torch::Tensor &input) {
  elementwise("sigmoid", out, input, [](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); });
}
