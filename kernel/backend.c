/* backend.c -- the backend table: how each compute backend the kernels
 * loader knows (backends.py) is named in variant names, metadata.json,
 * client environments and benchmark machine descriptions. */
#include "kernel/kernel.h"

#include <stdio.h>
#include <string.h>

const struct kernel_backend kernel_backends[] = {
	/* name     title     prefix  noarch    machine words          keyed archs minor macos hipify */
	{ "cuda",   "CUDA",   "cu",   "cuda",   { "cuda" },            1,    1,    1,    0,     0 },
	{ "rocm",   "ROCm",   "rocm", "rocm",   { "rocm" },            1,    1,    0,    0,     1 },
	{ "xpu",    "XPU",    "xpu",  "xpu",    { "xpu" },             0,    0,    0,    0,     0 },
	{ "cann",   "CANN",   "cann", "npu",    { "cann", "npu" },     0,    0,    0,    0,     0 },
	{ "cpu",    "CPU",    NULL,   "cpu",    { "cpu" },             0,    0,    0,    0,     0 },
	{ "metal",  "Metal",  NULL,   "metal",  { "metal", "mps" },    0,    0,    0,    26,    0 },
	{ "neuron", "Neuron", NULL,   "neuron", { "neuron" },          0,    0,    0,    0,     0 },
	{ "tpu",    "TPU",    NULL,   "tpu",    { "tpu" },             0,    0,    0,    0,     0 },
	{ NULL, NULL, NULL, NULL, { NULL }, 0, 0, 0, 0, 0 },
};

const struct kernel_backend *kernel_backend_find(const char *name)
{
	for (const struct kernel_backend *b = kernel_backends; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}

const struct kernel_backend *kernel_backend_by_noarch(const char *noarch)
{
	for (const struct kernel_backend *b = kernel_backends; b->name; b++)
		if (strcmp(b->noarch, noarch) == 0)
			return b;
	return NULL;
}

const struct kernel_backend *kernel_backend_by_machine_word(const char *word)
{
	for (const struct kernel_backend *b = kernel_backends; b->name; b++)
		for (size_t i = 0; i < sizeof(b->machine_words) / sizeof(b->machine_words[0]) && b->machine_words[i]; i++)
			if (strcmp(b->machine_words[i], word) == 0)
				return b;
	return NULL;
}

void kernel_backend_tag(const struct kernel_backend *b, long major, long minor, char *out, size_t size)
{
	if (major >= 0 && b->variant_prefix)
		snprintf(out, size, "%s%ld%ld", b->variant_prefix, major, minor);
	else
		snprintf(out, size, "%s", b->name);
}
