/* fuzz_card.c -- fuzz the README card parser (kernel/card.c): whatever the
 * README holds, the body starts inside it, every string is well-formed
 * UTF-8 without control characters and within its bound, and tags are at
 * most CARD_TAGS_MAX with no repeats. */
#include <assert.h>
#include <string.h>

#include "kernel/kernel.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void check_text(const char *s, size_t max)
{
	if (!s)
		return;
	size_t n = strlen(s);
	assert(n > 0 && n <= max + 3);	/* + an ellipsis at most */
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
		assert(k > 0 && cp >= 0x20 && cp != 0x7f);
		i += (size_t)k;
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct kernel_card c;
	kernel_card_parse((const char *)data, size, &c);
	assert(c.body_offset <= size);
	assert(c.has_front_matter || c.body_offset <= 3);
	check_text(c.license, CARD_VALUE_MAX);
	check_text(c.library_name, CARD_VALUE_MAX);
	check_text(c.description, CARD_DESCRIPTION_MAX);
	check_text(c.body_text, CARD_SEARCH_TEXT_MAX);
	assert(c.tags.count <= CARD_TAGS_MAX);
	for (size_t i = 0; i < c.tags.count; i++) {
		check_text(c.tags.items[i], CARD_TAG_MAX);
		for (size_t j = 0; j < i; j++)
			assert(strcmp(c.tags.items[i], c.tags.items[j]) != 0);
	}
	kernel_card_release(&c);
	return 0;
}
