// ReLU on the GPU. Written once for CUDA (nvcc) and HIP (hipcc -x hip): the
// few runtime names that differ are mapped below.
#include "relu_kernel.h"

#if defined(__HIP__) || defined(USE_ROCM)
#include <hip/hip_runtime.h>
typedef hipStream_t gpu_stream_t;
#define gpu_get_last_error hipGetLastError
#define gpu_success hipSuccess
#else
#include <cuda_runtime.h>
typedef cudaStream_t gpu_stream_t;
#define gpu_get_last_error cudaGetLastError
#define gpu_success cudaSuccess
#endif

__global__ void relu_kernel_f32(float *__restrict__ out, const float *__restrict__ in, int64_t n) {
  int64_t stride = (int64_t)blockDim.x * gridDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = in[i];
    out[i] = v > 0.0f ? v : 0.0f;
  }
}

int relu_launch_f32(float *out, const float *in, int64_t n, void *stream) {
  if (n == 0)
    return 0;
  const int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535)
    blocks = 65535;
  relu_kernel_f32<<<(unsigned)blocks, threads, 0, (gpu_stream_t)stream>>>(out, in, n);
  return (int)gpu_get_last_error() == (int)gpu_success ? 0 : (int)gpu_get_last_error();
}
