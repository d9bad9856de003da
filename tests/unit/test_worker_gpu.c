/* test_worker_gpu.c -- a GPU benchmark's sandbox: the NVIDIA device nodes
 * (nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidiaN, nvidia-caps) of a
 * /dev are bound into bubblewrap's command line with device access and
 * nothing else of it is; a sandbox that was not given the GPU (a build's)
 * has none; which toolchains' devices count as NVIDIA GPUs. The machine
 * needs no GPU: the /dev is a folder of the test's own. */
#include "builder-worker/build_internal.h"
#include "tests/unit/tap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The --dev-bind triples of sb's command line, "SRC>AT" joined by ";". */
static char *dev_binds(const struct sandbox *sb, size_t *dev_at)
{
	char *argv[] = { "python3", "-c", "pass", NULL };
	struct strvec args = STRVEC_INIT;
	struct strbuf sb_out = STRBUF_INIT;
	sandbox_command_line(sb, argv, "/tmp", &args);
	strbuf_adds(&sb_out, "");
	*dev_at = 0;
	for (size_t i = 0; i < args.count; i++) {
		if (!strcmp(args.items[i], "--dev") && i + 1 < args.count && !strcmp(args.items[i + 1], "/dev"))
			*dev_at = i;
		if (!strcmp(args.items[i], "--dev-bind") && i + 2 < args.count) {
			strbuf_addf(&sb_out, "%s%s>%s", sb_out.len ? ";" : "", args.items[i + 1], args.items[i + 2]);
			ok(i > *dev_at && *dev_at, "%s is bound after bwrap's own /dev", args.items[i + 2]);
		}
	}
	strvec_release(&args);
	return strbuf_detach(&sb_out, NULL);
}

static void make_dev(const char *dir)
{
	const char *files[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidia-modeset",
				"nvidiafoo", "null", "sda", "kfd", "fuse" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *p = xasprintf("%s/%s", dir, files[i]);
		FILE *f = fopen(p, "w");
		if (f)
			fclose(f);
		free(p);
	}
	char *caps = xasprintf("%s/nvidia-caps", dir);
	mkdir(caps, 0755);
	free(caps);
}

static void test_gpu_nodes(void)
{
	char dir[] = "/tmp/khub-test-gpu-XXXXXX";
	ok(mkdtemp(dir) != NULL, "a /dev of the test's own");
	make_dev(dir);
	struct sandbox sb;
	memset(&sb, 0, sizeof(sb));
	sb.mode = SANDBOX_BWRAP;
	sb.tool = xstrdup("bwrap");
	size_t dev_at = 0;
	char *none = dev_binds(&sb, &dev_at);
	is_str(none, "", "a sandbox without the GPU (a build's) binds no device node");
	ok(dev_at > 0, "… and has bwrap's minimal /dev");
	ok(sandbox_pass_nvidia_gpu(&sb, dir) == 6, "six NVIDIA nodes found (modeset, nvidiafoo and the rest left out)");
	char *binds = dev_binds(&sb, &dev_at);
	char *want = xasprintf("%s/nvidia-caps>/dev/nvidia-caps;%s/nvidia-uvm>/dev/nvidia-uvm;"
			       "%s/nvidia-uvm-tools>/dev/nvidia-uvm-tools;%s/nvidia0>/dev/nvidia0;"
			       "%s/nvidia1>/dev/nvidia1;%s/nvidiactl>/dev/nvidiactl", dir, dir, dir, dir, dir, dir);
	is_str(binds, want, "the GPU's nodes, each at /dev/NAME with device access, in name order, nothing else");
	ok(!strstr(binds, "null") && !strstr(binds, "sda") && !strstr(binds, "kfd") && !strstr(binds, "modeset"),
	   "no other node of that /dev is bound");
	sandbox_release(&sb);
	free(none);
	free(binds);
	free(want);
	char *rm = xasprintf("rm -rf '%s'", dir);
	ok(system(rm) == 0, "the test's /dev removed");
	free(rm);
}

static void test_empty_dev(void)
{
	struct sandbox sb;
	memset(&sb, 0, sizeof(sb));
	ok(sandbox_pass_nvidia_gpu(&sb, "/nonexistent-dev") == 0 && sb.ndevices == 0,
	   "a /dev that is not there: no node, no failure");
	sandbox_release(&sb);
}

static void test_nvidia_toolchains(void)
{
	struct toolchain tc;
	memset(&tc, 0, sizeof(tc));
	tc.benchmarks = 1;
	tc.device = "NVIDIA H100 80GB HBM3";
	tc.cuda_version = "12.8";
	ok(toolchain_device_is_nvidia_gpu(&tc), "a CUDA torch that found an H100: an NVIDIA GPU");
	tc.device = "cpu";
	ok(!toolchain_device_is_nvidia_gpu(&tc), "a CUDA torch without a GPU (device cpu): none");
	tc.device = "AMD Instinct MI300X";
	tc.cuda_version = NULL;
	tc.rocm_version = "6.3";
	ok(!toolchain_device_is_nvidia_gpu(&tc), "a ROCm torch's GPU: not NVIDIA's");
	tc.device = "NVIDIA L4";
	tc.cuda_version = "12.8";
	tc.rocm_version = NULL;
	tc.benchmarks = 0;
	ok(!toolchain_device_is_nvidia_gpu(&tc), "a toolchain that runs no benchmarks: never");
}

int main(void)
{
	test_gpu_nodes();
	test_empty_dev();
	test_nvidia_toolchains();
	return done_testing();
}
