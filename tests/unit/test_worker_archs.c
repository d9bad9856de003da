/* test_worker_archs.c -- khub-worker's CUDA arch selection: the defaults of
 * each nvcc version, and the contract's loose intersection of a kernel's
 * cuda-capabilities with them. */
#include "builder-worker/build_internal.h"
#include "tests/unit/tap.h"

#include <stdlib.h>

static char *select_joined(int major, int minor, const char *const *caps, size_t ncaps)
{
	struct strvec out = STRVEC_INIT;
	cuda_archs_select(major, minor, caps, ncaps, &out);
	struct strbuf sb = STRBUF_INIT;
	strbuf_adds(&sb, "");
	for (size_t i = 0; i < out.count; i++)
		strbuf_addf(&sb, "%s%s", i ? ";" : "", out.items[i]);
	strvec_release(&out);
	return strbuf_detach(&sb, NULL);
}

int main(void)
{
	char *s;
	s = select_joined(13, 0, NULL, 0);
	is_str(s, "7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0;12.1+PTX", "nvcc 13.0 defaults");
	free(s);
	s = select_joined(12, 8, NULL, 0);
	is_str(s, "7.0;7.2;7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;12.0+PTX", "nvcc 12.8 defaults");
	free(s);
	s = select_joined(12, 6, NULL, 0);
	is_str(s, "7.0;7.2;7.5;8.0;8.6;8.7;8.9;9.0+PTX", "nvcc 12.6 defaults");
	free(s);

	const char *sm80[] = { "8.0" };
	s = select_joined(13, 0, sm80, 1);
	is_str(s, "8.0", "8.0 serves every 8.x default, nothing else");
	free(s);
	const char *two[] = { "8.0", "9.0" };
	s = select_joined(13, 0, two, 2);
	is_str(s, "8.0;9.0", "8.0 and 9.0");
	free(s);
	const char *hopper[] = { "9.0a" };
	s = select_joined(13, 0, hopper, 1);
	is_str(s, "9.0a", "9.0a matches only 9.0");
	free(s);
	const char *ptx[] = { "8.0+PTX" };
	s = select_joined(13, 0, ptx, 1);
	is_str(s, "8.0+PTX", "a PTX arch crosses majors (serves 9.0 and later too)");
	free(s);
	const char *future[] = { "99999.0" };
	s = select_joined(13, 0, future, 1);
	is_str(s, "", "a capability above every default: nothing (the build refuses it)");
	free(s);
	return done_testing();
}
