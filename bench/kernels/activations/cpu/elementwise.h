// One elementwise loop for every activation: out = f(input), any floating
// dtype, any shape (contiguous or not).
#pragma once

#include <torch/torch.h>

template <typename F>
void elementwise(const char *name, torch::Tensor &out, const torch::Tensor &input, F f) {
  TORCH_CHECK(out.sizes() == input.sizes(), name, ": out and input differ in shape");
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), name, ": out and input differ in dtype");
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(), name, ": tensors must be on the CPU");
  torch::Tensor src = input.contiguous();
  torch::Tensor dst = out.is_contiguous() ? out : torch::empty_like(src);
  AT_DISPATCH_FLOATING_TYPES(src.scalar_type(), "elementwise", [&] {
    const scalar_t *in = src.data_ptr<scalar_t>();
    scalar_t *res = dst.data_ptr<scalar_t>();
    const int64_t n = src.numel();
    for (int64_t i = 0; i < n; ++i)
      res[i] = f(in[i]);
  });
  if (!dst.is_same(out))
    out.copy_(dst);
}
