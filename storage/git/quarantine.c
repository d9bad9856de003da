/* quarantine.c -- the objects of a commit being built are kept in memory
 * (an object-database backend of our own, in front of the repo's) and only
 * reach the repo's store once the commit is accepted: a refused or aborted
 * commit leaves nothing behind, as git's receive-pack quarantine does. The
 * accepted objects are written in one go: loose for a few, one pack (one
 * fsync) for many. */
#include "storage/git/repo.h"

#include <git2/sys/odb_backend.h>
#include <stdlib.h>
#include <string.h>

/* Above this many objects a publication is one pack instead of loose files
 * (each loose object costs a file and an fsync). */
#define QUARANTINE_PACK_MIN 64

struct qobject {
	struct qobject *next;
	git_oid oid;
	git_object_t type;
	size_t len;
	char data[];
};

struct quarantine_backend {
	git_odb_backend parent;
	struct hashmap index;		/* hex oid → struct qobject */
	struct qobject *objects;	/* newest first */
	size_t count;
	uint64_t bytes, max_bytes;
	int over_limit;
};

struct git_quarantine {
	git_repository *repo;		/* reads see both stores; writes go to memory */
	struct quarantine_backend *backend;	/* owned by repo's odb */
	char *objects_dir;
};

static struct qobject *q_find(struct quarantine_backend *b, const git_oid *oid)
{
	char hex[GIT_OID_HEXSZ + 1];
	git_oid_tostr(hex, sizeof(hex), oid);
	return hashmap_get(&b->index, hex);
}

static int q_read(void **data, size_t *len, git_object_t *type, git_odb_backend *be, const git_oid *oid)
{
	struct quarantine_backend *b = (struct quarantine_backend *)be;
	struct qobject *o = q_find(b, oid);
	if (!o)
		return GIT_ENOTFOUND;
	*data = git_odb_backend_data_alloc(be, o->len);
	if (!*data)
		return -1;
	memcpy(*data, o->data, o->len);
	*len = o->len;
	*type = o->type;
	return 0;
}

static int q_read_header(size_t *len, git_object_t *type, git_odb_backend *be, const git_oid *oid)
{
	struct qobject *o = q_find((struct quarantine_backend *)be, oid);
	if (!o)
		return GIT_ENOTFOUND;
	*len = o->len;
	*type = o->type;
	return 0;
}

static int q_exists(git_odb_backend *be, const git_oid *oid)
{
	return q_find((struct quarantine_backend *)be, oid) != NULL;
}

static int q_freshen(git_odb_backend *be, const git_oid *oid)
{
	return q_exists(be, oid) ? 0 : GIT_ENOTFOUND;
}

static int q_write(git_odb_backend *be, const git_oid *oid, const void *data, size_t len, git_object_t type)
{
	struct quarantine_backend *b = (struct quarantine_backend *)be;
	if (q_find(b, oid))
		return 0;
	if (b->bytes + len > b->max_bytes) {
		b->over_limit = 1;
		git_error_set_str(GIT_ERROR_ODB, "the commit's git objects exceed the quarantine limit");
		return -1;
	}
	struct qobject *o = xmalloc(sizeof(*o) + len);
	git_oid_cpy(&o->oid, oid);
	o->type = type;
	o->len = len;
	memcpy(o->data, data, len);
	char hex[GIT_OID_HEXSZ + 1];
	git_oid_tostr(hex, sizeof(hex), oid);
	hashmap_put(&b->index, hex, o);
	o->next = b->objects;
	b->objects = o;
	b->count++;
	b->bytes += len;
	return 0;
}

static void q_free(git_odb_backend *be)
{
	struct quarantine_backend *b = (struct quarantine_backend *)be;
	hashmap_release(&b->index, NULL);
	while (b->objects) {
		struct qobject *o = b->objects;
		b->objects = o->next;
		free(o);
	}
	free(b);
}

int quarantine_open(const char *root, enum repo_type type, const char *ns, const char *name, uint64_t max_bytes,
		    struct git_quarantine **out, git_repository **repo)
{
	struct git_quarantine *q = xcalloc(1, sizeof(*q));
	git_odb *odb = NULL;
	char *git_dir = repo_store_git_dir(root, type, ns, name);
	q->objects_dir = xasprintf("%s/objects", git_dir);
	free(git_dir);
	if (repo_store_open(root, type, ns, name, &q->repo) < 0)
		goto fail;
	struct quarantine_backend *b = xcalloc(1, sizeof(*b));
	git_odb_init_backend(&b->parent, GIT_ODB_BACKEND_VERSION);
	b->parent.read = q_read;
	b->parent.read_header = q_read_header;
	b->parent.write = q_write;
	b->parent.exists = q_exists;
	b->parent.freshen = q_freshen;
	b->parent.free = q_free;
	b->max_bytes = max_bytes;
	hashmap_init(&b->index);
	if (git_repository_odb(&odb, q->repo) < 0 || git_odb_add_backend(odb, &b->parent, 1000) < 0) {
		q_free(&b->parent);
		goto fail;
	}
	q->backend = b;
	git_odb_free(odb);
	*out = q;
	*repo = q->repo;
	return 0;
fail:
	git_odb_free(odb);
	quarantine_free(q);
	return KHUB_EIO;
}

int quarantine_over_limit(const struct git_quarantine *q)
{
	return q && q->backend->over_limit;
}

static int publish_loose(struct git_quarantine *q)
{
	git_odb *odb = NULL;
	int rc = 0;
	if (git_odb_open(&odb, q->objects_dir) < 0)
		return KHUB_EIO;
	for (struct qobject *o = q->backend->objects; o && rc == 0; o = o->next) {
		git_oid written;
		if (git_odb_write(&written, odb, o->data, o->len, o->type) < 0 || !git_oid_equal(&written, &o->oid))
			rc = KHUB_EIO;
	}
	git_odb_free(odb);
	return rc;
}

static int publish_pack(struct git_quarantine *q)
{
	git_packbuilder *pb = NULL;
	int rc = KHUB_EIO;
	char *pack_dir = xasprintf("%s/pack", q->objects_dir);
	if (git_packbuilder_new(&pb, q->repo) < 0)
		goto cleanup;
	git_packbuilder_set_threads(pb, 1);
	for (struct qobject *o = q->backend->objects; o; o = o->next)
		if (git_packbuilder_insert(pb, &o->oid, NULL) < 0)
			goto cleanup;
	/* the indexer writes .pack and .idx under temporary names, fsyncs
	 * them (GIT_OPT_ENABLE_FSYNC_GITDIR) and renames them into place */
	if (git_packbuilder_write(pb, pack_dir, 0444, NULL, NULL) < 0)
		goto cleanup;
	rc = 0;
cleanup:
	if (rc < 0)
		log_git_error("quarantine: cannot write a pack into %s", pack_dir);
	git_packbuilder_free(pb);
	free(pack_dir);
	return rc;
}

int quarantine_publish(struct git_quarantine *q)
{
	if (q->backend->count == 0)
		return 0;
	return q->backend->count < QUARANTINE_PACK_MIN ? publish_loose(q) : publish_pack(q);
}

void quarantine_free(struct git_quarantine *q)
{
	if (!q)
		return;
	git_repository_free(q->repo);	/* frees its odb and our backend */
	free(q->objects_dir);
	free(q);
}
