// softplus on the CPU: log(1 + exp(x)).
#include <cmath>

#include "elementwise.h"

void softplus(torch::Tensor &out, const torch::Tensor &input) {
  elementwise("softplus", out, input, [](auto x) { return std::log1p(std::exp(x)); });
}
