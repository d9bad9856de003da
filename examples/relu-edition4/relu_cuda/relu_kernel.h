// The GPU ReLU launcher, free of torch headers so nvcc and hipcc compile the
// kernel alone; torch_binding's GPU half calls it with raw pointers.
#pragma once

#include <cstdint>

// Launches on stream (a cudaStream_t or hipStream_t); returns 0 or the
// runtime's error code.
int relu_launch_f32(float *out, const float *in, int64_t n, void *stream);
