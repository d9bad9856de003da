/* test_sync_manifest.c -- the air-gap bundle manifest and state parser:
 * a good manifest round-trips; every field that names a path, a ref, a
 * sha or a size is validated; hostile entry names never parse; a signing
 * key's scope matches namespaces by name or glob, case-insensitively. */
#include "sync/sync.h"
#include "tap.h"

#include <stdlib.h>

#define SHA_A "1111111111111111111111111111111111111111"
#define SHA_B "2222222222222222222222222222222222222222"
#define OID "3333333333333333333333333333333333333333333333333333333333333333"
#define PACK_SHA "4444444444444444444444444444444444444444444444444444444444444444"
#define UUID "0f0e0d0c-0b0a-4908-8706-050403020100"
#define EXPORTER "a0a1a2a3-b0b1-4c0c-8d0d-e0e1e2e3e4e5"

static const char good[] =
	"{\"format\": 2, \"bundle\": \"" UUID "\", \"since_bundle\": null, \"hub\": \"hub.example\","
	" \"exporter\": \"" EXPORTER "\", \"sequence\": 7, \"deleted\": [{\"type\": \"kernel\", \"id\": \"acme/gone\"}],"
	" \"created\": \"2026-01-01T00:00:00.000Z\", \"selection\": {\"repos\": [\"acme/*\"]},"
	" \"repos\": [{\"type\": \"kernel\", \"id\": \"acme/relu\", \"private\": true, \"org_trusted\": true,"
	"   \"refs\": [{\"name\": \"refs/heads/v1\", \"old\": \"" SHA_A "\", \"new\": \"" SHA_B "\"},"
	"              {\"name\": \"refs/tags/gone\", \"old\": \"" SHA_A "\", \"new\": null}],"
	"   \"current\": {\"refs/heads/v1\": \"" SHA_B "\", \"refs/heads/main\": \"" SHA_A "\"},"
	"   \"base\": [\"" SHA_A "\"], \"pack\": \"git/0.pack\", \"lfs\": [{\"oid\": \"" OID "\", \"size\": 12}]}],"
	" \"entries\": [{\"name\": \"git/0.pack\", \"sha256\": \"" PACK_SHA "\", \"size\": 99},"
	"              {\"name\": \"lfs/" OID "\", \"sha256\": \"" OID "\", \"size\": 12}]}";

/* good with one substring replaced; parse result */
static int parse_with(const char *from, const char *to)
{
	char *p = strstr(good, from) ? xstrdup(good) : NULL;
	if (!p)
		return 99;
	char *at = strstr(p, from);
	char *text = xasprintf("%.*s%s%s", (int)(at - p), p, to, at + strlen(from));
	struct sync_manifest m;
	char err[256];
	int rc = sync_manifest_parse(text, strlen(text), 0, &m, err, sizeof(err));
	sync_manifest_release(&m);
	free(text);
	free(p);
	return rc;
}

int main(void)
{
	struct sync_manifest m, again;
	char err[256];
	ok(sync_manifest_parse(good, strlen(good), 0, &m, err, sizeof(err)) == 0, "a good manifest parses");
	is_str(m.bundle, UUID, "bundle id");
	ok(m.nrepos == 1 && strcmp(m.repos[0].ns, "acme") == 0 && strcmp(m.repos[0].name, "relu") == 0 &&
		   m.repos[0].type == REPO_KERNEL, "repo acme/relu of type kernel");
	ok(m.repos[0].private_ && m.repos[0].org_trusted, "private and org trust flags");
	ok(m.repos[0].nrefs == 2 && strcmp(m.repos[0].refs[0].old, SHA_A) == 0 &&
		   strcmp(m.repos[0].refs[0].new_, SHA_B) == 0 && m.repos[0].refs[1].new_[0] == '\0',
	   "refs old -> new, and a deletion");
	ok(m.repos[0].nbase == 1 && m.repos[0].nlfs == 1 && m.repos[0].lfs[0].size == 12, "base and LFS objects");
	ok(m.nentries == 2 && sync_manifest_entry(&m, "git/0.pack")->size == 99, "entries with sizes");
	ok(strcmp(m.exporter, EXPORTER) == 0 && m.sequence == 7, "exporter id and sequence");
	ok(m.repos[0].has_current && m.repos[0].ncurrent == 2 &&
		   strcmp(sync_repo_current(&m.repos[0], "refs/heads/main"), SHA_A) == 0,
	   "the source's current refs");
	ok(m.ndeleted == 1 && strcmp(m.deleted[0].name, "gone") == 0, "a repo deleted at the source");
	char *text = sync_manifest_format(&m, 0);
	ok(sync_manifest_parse(text, strlen(text), 0, &again, err, sizeof(err)) == 0 && again.nrepos == 1 &&
		   again.nentries == 2 && strcmp(again.repos[0].refs[0].new_, SHA_B) == 0 && again.sequence == 7 &&
		   again.ndeleted == 1 && again.repos[0].ncurrent == 2,
	   "format round-trips");
	free(text);
	sync_manifest_release(&again);
	sync_manifest_release(&m);

	ok(parse_with("\"format\": 2", "\"format\": 3") < 0, "unknown format refused");
	ok(parse_with("\"format\": 2", "\"format\": 1") < 0, "format 1 (no sequence: could be replayed) refused");
	ok(parse_with("\"sequence\": 7", "\"sequence\": 0") < 0, "a sequence below 1 refused");
	ok(parse_with("\"sequence\": 7", "\"sequence\": \"7\"") < 0, "a sequence that is not a number refused");
	ok(parse_with("\"exporter\": \"" EXPORTER "\"", "\"exporter\": \"x\"") < 0, "a bad exporter id refused");
	ok(parse_with("\"id\": \"acme/gone\"", "\"id\": \"../gone\"") < 0, "a deleted repo with .. refused");
	ok(parse_with("\"refs/heads/main\": \"" SHA_A "\"", "\"refs/heads/../x\": \"" SHA_A "\"") < 0,
	   "a current ref with .. refused");
	ok(parse_with(UUID "\", \"since", "not-a-uuid\", \"since") < 0, "bad bundle id refused");
	ok(parse_with("\"id\": \"acme/relu\"", "\"id\": \"../relu\"") < 0, "a repo id with .. refused");
	ok(parse_with("\"id\": \"acme/relu\"", "\"id\": \"acme\"") < 0, "a repo id without a namespace refused");
	ok(parse_with("\"type\": \"kernel\"", "\"type\": \"rocket\"") < 0, "unknown repo type refused");
	ok(parse_with("refs/heads/v1", "refs/heads/../../x") < 0, "a ref name with .. refused");
	ok(parse_with("refs/heads/v1", "refs/khub-upstream/heads/v1") < 0, "a ref outside heads, tags, khub-sync refused");
	ok(parse_with("\"new\": \"" SHA_B "\"", "\"new\": \"" SHA_B "0\"") < 0, "a 41-char sha refused");
	ok(parse_with("\"new\": \"" SHA_B "\"", "\"new\": \"ABCDEF1111111111111111111111111111111111\"") < 0,
	   "an uppercase sha refused");
	ok(parse_with("\"name\": \"git/0.pack\"", "\"name\": \"../../etc/passwd\"") < 0, "entry name outside git/, lfs/ refused");
	ok(parse_with("\"name\": \"git/0.pack\"", "\"name\": \"git/0.pack/../x\"") < 0, "git/ entry of another shape refused");
	ok(parse_with("\"size\": 99", "\"size\": -1") < 0, "a negative size refused");
	ok(parse_with("\"size\": 99", "\"size\": 1e30") < 0, "a float size refused");
	ok(parse_with("\"name\": \"lfs/" OID "\", \"sha256\": \"" OID "\"",
		      "\"name\": \"lfs/" OID "\", \"sha256\": \"" PACK_SHA "\"") < 0,
	   "an LFS entry named by another sha256 refused");
	ok(parse_with("\"pack\": \"git/0.pack\"", "\"pack\": \"git/7.pack\"") < 0, "a pack that is not an entry refused");
	ok(parse_with("\"size\": 12}]}]", "\"size\": 13}]}]") < 0, "an LFS object whose entry has another size refused");
	ok(parse_with("{\"name\": \"refs/tags/gone\", \"old\": \"" SHA_A "\", \"new\": null}",
		      "{\"name\": \"refs/heads/v1\", \"old\": null, \"new\": \"" SHA_A "\"}") < 0,
	   "the same ref twice refused");
	ok(parse_with("\"old\": \"" SHA_A "\", \"new\": null", "\"old\": null, \"new\": null") < 0,
	   "a ref with neither old nor new refused");
	ok(sync_manifest_parse("[]", 2, 0, &m, err, sizeof(err)) < 0, "not an object refused");
	sync_manifest_release(&m);
	ok(sync_manifest_parse("{\"format\":2,\"bundle\":\"" UUID "\",\"repos\":[]}", 50, 0, &m, err, sizeof(err)) < 0,
	   "a manifest cut short refused");
	sync_manifest_release(&m);

	static const char state[] = "{\"format\": 1, \"bundle\": null, \"hub\": \"h\", \"repos\": [{\"type\": \"kernel\","
				    " \"id\": \"acme/relu\", \"refs\": {\"refs/heads/main\": \"" SHA_A "\"}}]}";
	ok(sync_manifest_parse(state, strlen(state), 1, &m, err, sizeof(err)) == 0 && m.nrepos == 1 &&
		   strcmp(m.repos[0].refs[0].new_, SHA_A) == 0 && m.bundle[0] == '\0',
	   "a state from `khub sync state` parses (no bundle id)");
	sync_manifest_release(&m);
	ok(sync_manifest_parse(state, strlen(state), 0, &m, err, sizeof(err)) < 0, "a state is not a manifest");
	sync_manifest_release(&m);
	static const char state2[] = "{\"format\": 2, \"bundle\": null, \"hub\": \"h\", \"repos\": [{\"type\": \"kernel\","
				     " \"id\": \"acme/relu\", \"refs\": {}, \"lfs\": [\"" OID "\"]}]}";
	ok(sync_manifest_parse(state2, strlen(state2), 1, &m, err, sizeof(err)) == 0 && m.repos[0].has_have &&
		   m.repos[0].nhave == 1 && strcmp(m.repos[0].have[0], OID) == 0,
	   "a state lists the LFS objects the hub has");
	text = sync_manifest_format(&m, 1);
	sync_manifest_release(&m);
	ok(sync_manifest_parse(text, strlen(text), 1, &m, err, sizeof(err)) == 0 && m.repos[0].nhave == 1,
	   "  and round-trips");
	free(text);
	sync_manifest_release(&m);
	ok(sync_scope_allows("team", "team") && sync_scope_allows("team", "TEAM"), "scope: a name, any case");
	ok(!sync_scope_allows("team", "team2") && !sync_scope_allows("team", "tea"), "  only that name");
	ok(sync_scope_allows("acme-*,team", "ACME-labs") && sync_scope_allows("acme-*,team", "team") &&
		   !sync_scope_allows("acme-*,team", "acme"), "  globs in a comma-separated list");
	ok(!sync_scope_allows("", "team") && !sync_scope_allows("te?m", "tem"), "  an empty scope allows nothing");
	return done_testing();
}
