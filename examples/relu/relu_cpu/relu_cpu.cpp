// ReLU on the CPU: any floating dtype, any shape (contiguous or not).
// ATen alone (torch::Tensor is at::Tensor): a third of the compile time of
// <torch/torch.h>, which brings the whole C++ frontend.
#include <ATen/ATen.h>

void relu_cpu(at::Tensor &out, const at::Tensor &input) {
  TORCH_CHECK(out.sizes() == input.sizes(), "relu: out and input differ in shape");
  TORCH_CHECK(out.scalar_type() == input.scalar_type(), "relu: out and input differ in dtype");
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(), "relu_cpu: tensors must be on the CPU");
  at::Tensor src = input.contiguous();
  at::Tensor dst = out.is_contiguous() ? out : at::empty_like(src);
  AT_DISPATCH_FLOATING_TYPES(src.scalar_type(), "relu_cpu", [&] {
    const scalar_t *in = src.data_ptr<scalar_t>();
    scalar_t *res = dst.data_ptr<scalar_t>();
    const int64_t n = src.numel();
    for (int64_t i = 0; i < n; ++i)
      res[i] = in[i] > scalar_t(0) ? in[i] : scalar_t(0);
  });
  if (!dst.is_same(out))
    out.copy_(dst);
}
