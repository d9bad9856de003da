/* tap.h -- a tiny TAP producer for the C unit tests. */
#ifndef KHUB_TAP_H
#define KHUB_TAP_H
#include <stdio.h>
#include <string.h>

static int tap_count, tap_failed;

#define ok(cond, ...) do { \
	int c_ = (cond) ? 1 : 0; \
	tap_count++; \
	if (c_) { printf("ok %d - ", tap_count); } \
	else { tap_failed++; printf("not ok %d - ", tap_count); } \
	printf(__VA_ARGS__); printf("\n"); \
	if (!c_) printf("#   failed at %s:%d\n", __FILE__, __LINE__); \
} while (0)

#define is_str(got, want, ...) do { \
	const char *g_ = (got), *w_ = (want); \
	int same_ = (g_ && w_) ? strcmp(g_, w_) == 0 : g_ == w_; \
	ok(same_, __VA_ARGS__); \
	if (!same_) printf("#   got '%s', want '%s'\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
} while (0)

static inline int done_testing(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}
#endif
