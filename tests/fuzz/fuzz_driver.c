/* fuzz_driver.c -- run a fuzz target without libFuzzer (as part of make
 * check, under ASan/UBSan): seeds from tests/fuzz/corpus/<target>/ plus
 * random mutations of them, a fixed count, deterministic. TAP output. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define MAX_SEEDS 256
#define DRIVER_MAX_INPUT 8192

static unsigned char *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS], nseeds;
static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static unsigned next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng >> 32);
}

static void load_seeds(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)) && nseeds < MAX_SEEDS) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		FILE *fp = fopen(path, "rb");
		if (!fp)
			continue;
		seeds[nseeds] = malloc(DRIVER_MAX_INPUT);
		seed_len[nseeds] = fread(seeds[nseeds], 1, DRIVER_MAX_INPUT, fp);
		fclose(fp);
		nseeds++;
	}
	if (d)
		closedir(d);
}

int main(int argc, char **argv)
{
	const char *corpus = argc > 1 ? argv[1] : ".";
	long iterations = argc > 2 ? atol(argv[2]) : 20000;
	load_seeds(corpus);
	unsigned char buf[DRIVER_MAX_INPUT];
	for (size_t i = 0; i < nseeds; i++)
		LLVMFuzzerTestOneInput(seeds[i], seed_len[i]);
	static const char dictionary[][8] = { "/", "..", "%2F", "%00", "refs", "pr", ".git", "\n", "sha256:", "size ", "%" };
	for (long it = 0; it < iterations; it++) {
		size_t len = 0;
		if (nseeds) {
			size_t s = next_random() % nseeds;
			len = seed_len[s];
			memcpy(buf, seeds[s], len);
		}
		int edits = 1 + (int)(next_random() % 8);
		for (int e = 0; e < edits; e++) {
			unsigned op = next_random() % 4;
			if (op == 0 && len < DRIVER_MAX_INPUT) {	/* insert a byte */
				size_t at = len ? next_random() % (len + 1) : 0;
				memmove(buf + at + 1, buf + at, len - at);
				buf[at] = (unsigned char)next_random();
				len++;
			} else if (op == 1 && len) {	/* delete a byte */
				size_t at = next_random() % len;
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
			} else if (op == 2 && len) {	/* flip a byte */
				buf[next_random() % len] ^= (unsigned char)(1u << (next_random() % 8));
			} else {	/* splice a token */
				const char *tok = dictionary[next_random() % (sizeof(dictionary) / sizeof(dictionary[0]))];
				size_t tl = strlen(tok);
				if (len + tl < DRIVER_MAX_INPUT) {
					size_t at = len ? next_random() % (len + 1) : 0;
					memmove(buf + at + tl, buf + at, len - at);
					memcpy(buf + at, tok, tl);
					len += tl;
				}
			}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("ok 1 - %s: %zu seeds and %ld mutated inputs without a crash\n1..1\n", corpus, nseeds, iterations);
	return 0;
}
