/* fuzz_sync_manifest.c -- fuzz the air-gap bundle manifest and state
 * parsers; whatever parses must format back to text that parses again to
 * the same repos, refs and entries. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sync/sync.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void round_trip(const unsigned char *data, size_t size, int is_state)
{
	struct sync_manifest m, again;
	char err[256];
	if (sync_manifest_parse((const char *)data, size, is_state, &m, err, sizeof(err)) != 0) {
		sync_manifest_release(&m);
		return;
	}
	char *text = sync_manifest_format(&m, is_state);
	assert(text);
	assert(sync_manifest_parse(text, strlen(text), is_state, &again, err, sizeof(err)) == 0);
	assert(again.nrepos == m.nrepos && again.nentries == m.nentries);
	for (size_t i = 0; i < m.nrepos; i++) {
		assert(strcmp(m.repos[i].ns, again.repos[i].ns) == 0 && m.repos[i].nrefs == again.repos[i].nrefs);
		assert(m.repos[i].nlfs == again.repos[i].nlfs && m.repos[i].nbase == again.repos[i].nbase);
	}
	for (size_t i = 0; i < m.nentries; i++)
		assert(strcmp(m.entries[i].name, again.entries[i].name) == 0 && m.entries[i].size == again.entries[i].size);
	free(text);
	sync_manifest_release(&again);
	sync_manifest_release(&m);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	round_trip(data, size, 0);
	round_trip(data, size, 1);
	return 0;
}
