// relu on the CPU: max(x, 0).
#include <cmath>

#include "elementwise.h"

void relu(torch::Tensor &out, const torch::Tensor &input) {
  elementwise("relu", out, input, [](auto x) { return x > decltype(x)(0) ? x : decltype(x)(0); });
}
