/* test_card.c -- README cards (kernel/card.c): the front matter subset the
 * Hub's cards use (scalars, inline and block lists), what is not front
 * matter, nested maps left alone, and the description. */
#include "kernel/kernel.h"
#include "tests/unit/tap.h"

#include <string.h>

static void parse(const char *text, struct kernel_card *c)
{
	kernel_card_parse(text, strlen(text), c);
}

static void test_front_matter(void)
{
	struct kernel_card c;
	const char *t = "---\nlibrary_name: kernels\nlicense: apache-2.0\ntags: [kernel, \"layer-norm\", kernel]\n---\n"
			"# LayerNorm\n\n[![ci](b)](c)\n\nA fused **layer norm** for [vLLM](https://x)\nand `sglang`.\n\nMore.\n";
	parse(t, &c);
	ok(c.has_front_matter, "front matter found");
	is_str(c.license, "apache-2.0", "license");
	is_str(c.library_name, "kernels", "library_name");
	ok(c.tags.count == 2, "two tags, the repeat dropped (%zu)", c.tags.count);
	is_str(c.tags.count > 1 ? c.tags.items[1] : "", "layer-norm", "quoted inline item");
	is_str(t + c.body_offset, "# LayerNorm\n\n[![ci](b)](c)\n\nA fused **layer norm** for [vLLM](https://x)\n"
				  "and `sglang`.\n\nMore.\n", "the body starts after the closing ---");
	is_str(c.description, "A fused layer norm for vLLM and sglang.", "description: the first paragraph as text");
	kernel_card_release(&c);

	parse("---\r\nlicense: \"mit\" # why\r\ntags:\r\n  - optimizer\r\n  - adam\r\nmodel-index:\r\n  - name: x\r\n"
	      "    license: nested\r\n...\r\nFused Adam.\r\n", &c);
	is_str(c.license, "mit", "quoted scalar, comment dropped, CRLF");
	ok(c.tags.count == 2 && strcmp(c.tags.items[1], "adam") == 0, "block list");
	is_str(c.description, "Fused Adam.", "closed by ...");
	kernel_card_release(&c);
}

static void test_not_front_matter(void)
{
	struct kernel_card c;
	parse("---\nlicense: mit\nnever closed\n", &c);
	ok(!c.has_front_matter && c.body_offset == 0 && !c.license, "an unclosed block is body text");
	kernel_card_release(&c);
	parse("# t\n---\nlicense: mit\n---\n", &c);
	ok(!c.has_front_matter && !c.license, "--- not on the first line is no front matter");
	kernel_card_release(&c);
	parse("", &c);
	ok(!c.has_front_matter && !c.description && !c.body_text, "empty README");
	kernel_card_release(&c);
	parse("---\ntags: \xff\x01\n---\n\x01\xc3\x28ok\n", &c);
	ok(c.tags.count == 0 && c.description && strcmp(c.description, "(ok") == 0, "bad bytes dropped (%s)",
	   c.description ? c.description : "-");
	kernel_card_release(&c);
}

int main(void)
{
	test_front_matter();
	test_not_front_matter();
	return done_testing();
}
