/* test_publish.c -- publish_begin/apply/end (storage/publish/publish.c) whole, on
 * a temporary bare repo and a local LFS store, with an in-memory table in
 * place of the database calls (publish_set_db): the operations (put, put
 * LFS, delete, copy), where a change starts (right, stale and no parent),
 * the LFS rules (size and binary content, .gitattributes coverage, re-LFS
 * by a commit's own .gitattributes), the pointer format, the links an
 * accepted commit makes, the lock and the audit line. PostgreSQL's side of
 * the same calls is covered by t0060/t0110. */
#include "storage/publish/publish.h"
#include "storage/publish/publish_stage.h"
#include "storage/db/db.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];
static struct lfs_store *lfs;

static const struct publish_actor tester = { 0, "tester", "tester@khub.local", "local" };

/* ---- the database, in memory ----------------------------------------------- */

#define MEM_LINKS 64
static struct {
	int locked, lock_calls, inflight_open, touched, indexed, audited;
	char links[MEM_LINKS][65];	/* repo 1's linked oids */
	size_t nlinks;
	char last_action[64];
} mem;

static int mem_lock_try(int64_t repo_id)
{
	(void)repo_id;
	mem.lock_calls++;
	if (mem.locked)
		return 1;
	mem.locked = 1;
	return 0;
}

static void mem_unlock(int64_t repo_id)
{
	(void)repo_id;
	mem.locked = 0;
}

static int mem_inflight_begin(const char *const *oids, size_t n, int64_t *ids)
{
	(void)oids;
	for (size_t i = 0; i < n; i++)
		ids[i] = ++mem.inflight_open;
	return 0;
}

static void mem_inflight_end(const int64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i])
			mem.inflight_open--;
}

static int mem_linked(int64_t repo_id, const char *oid)
{
	for (size_t i = 0; repo_id == 1 && i < mem.nlinks; i++)
		if (strcmp(mem.links[i], oid) == 0)
			return 1;
	return 0;
}

static int mem_link(int64_t repo_id, const char *const *oids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (repo_id != 1 || mem_linked(repo_id, oids[i]))
			continue;
		if (mem.nlinks == MEM_LINKS)
			return KHUB_EDB;
		snprintf(mem.links[mem.nlinks++], 65, "%s", oids[i]);
	}
	return 0;
}

static int mem_touch(int64_t repo_id)
{
	(void)repo_id;
	mem.touched++;
	return 0;
}

static int mem_index(int64_t repo_id, git_repository *git, const char *sha)
{
	(void)repo_id, (void)git, (void)sha;
	mem.indexed++;
	return 0;
}

static int mem_audit(int64_t actor_id, const char *actor_name, const char *action, const char *target,
		     const char *details, const char *remote_addr)
{
	(void)actor_id, (void)actor_name, (void)target, (void)details, (void)remote_addr;
	mem.audited++;
	snprintf(mem.last_action, sizeof(mem.last_action), "%s", action);
	return 0;
}

static const struct publish_db memory_db = {
	.lock_try = mem_lock_try,
	.lock_wait = mem_lock_try,
	.unlock = mem_unlock,
	.lfs_inflight_begin = mem_inflight_begin,
	.lfs_inflight_end = mem_inflight_end,
	.lfs_link = mem_link,
	.lfs_linked = mem_linked,
	.repo_touch = mem_touch,
	.variant_index_update = mem_index,
	.audit = mem_audit,
};

/* ---- one publication --------------------------------------------------------- */

/* The repo a test publishes to: repo 1 at root/kernels/ns/NAME. */
static struct repo_record record(enum repo_type type, const char *name)
{
	struct repo_record rec = { .id = 1, .type = type };
	snprintf(rec.ns, sizeof(rec.ns), "ns");
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	return rec;
}

static struct repo_record current = { 0 };

/* The server's way: begin, lock, apply, end. git is the test's own handle
 * on the repo (it sees the ref once the publication moved it). */
static int apply(git_repository *git, const struct publish_changeset *ch, struct publish_result *res)
{
	struct publication *pub = NULL;
	(void)git;
	int rc = publish_begin(root, lfs, &current, &pub);
	if (rc == 0)
		rc = publish_lock(pub);
	if (rc == 0)
		rc = publish_apply(pub, &tester, ch, res);
	publish_end(pub, &tester, rc == 0 ? "repo.commit" : NULL, NULL);
	if (mem.locked || mem.inflight_open)
		printf("# the lock or an in-flight name outlived the publication\n");
	return rc;
}

/* A change of ops on refs/heads/main as it is. */
static int apply_ops(git_repository *git, const struct publish_op *ops, size_t n, unsigned flags,
		     struct publish_result *res)
{
	struct publish_changeset ch = { .ops = ops, .nops = n, .ref = "refs/heads/main", .summary = "test",
				       .flags = flags };
	return apply(git, &ch, res);
}

static struct tree_entry stat_path(git_repository *git, const char *sha, const char *path, int *found)
{
	struct tree_entry e;
	*found = repo_stat_path(git, sha, path, &e) == 0;
	return e;
}

static void test_puts(git_repository *git)
{
	char bin[64] = "ELF\0\1\2binary";
	struct publish_op ops[] = {
		{ .kind = PUBLISH_PUT, .path = "README.md", .data = "hello\n", .len = 6 },
		{ .kind = PUBLISH_PUT, .path = "kernel/_ops.so", .data = bin, .len = sizeof(bin) },
		{ .kind = PUBLISH_PUT, .path = "data/blob.dat", .data = bin, .len = sizeof(bin), .mode = 0100755 },
		{ .kind = PUBLISH_PUT, .path = "empty.dat", .data = "", .len = 0 },
	};
	struct publish_result res;
	int found;
	int audited = mem.audited, touched = mem.touched, indexed = mem.indexed;
	ok(apply_ops(git, ops, 4, PUBLISH_HUB_LFS_RULES, &res) == 0, "put: a text, two binaries, an empty file");
	ok(mem.audited == audited + 1 && strcmp(mem.last_action, "repo.commit") == 0, "one audit line, its action");
	ok(mem.touched == touched + 1 && mem.indexed == indexed + 1, "lastModified and the variant index updated");
	ok(!mem.locked && !mem.inflight_open, "the lock and the in-flight names released");
	char *text = repo_read_text_file(git, res.sha, "README.md", 100);
	is_str(text, "hello\n", "text stays a regular blob");
	free(text);
	struct tree_entry e = stat_path(git, res.sha, "kernel/_ops.so", &found);
	ok(found && e.is_lfs && e.size == sizeof(bin), "binary content becomes LFS (real size %llu)",
	   (unsigned long long)e.size);
	uint64_t stored = 0;
	ok(found && lfs_store_stat(lfs, e.lfs_oid, &stored) == 0 && stored == sizeof(bin), "its object is stored");
	ok(found && mem_linked(1, e.lfs_oid) == 1, "and linked to the repo");
	tree_entry_release(&e);
	e = stat_path(git, res.sha, "data/blob.dat", &found);
	ok(found && e.is_lfs && e.mode == 0100755, "an executable binary keeps its mode");
	tree_entry_release(&e);
	e = stat_path(git, res.sha, "empty.dat", &found);
	ok(found && !e.is_lfs, "an empty file is never LFS");
	tree_entry_release(&e);
	ok(res.lfs_files == 2, "two files stored as LFS");

	/* .gitattributes coverage: *.so is covered by the default rules,
	 * data/blob.dat is not and gets a rule of its own */
	char *attrs = repo_read_text_file(git, res.sha, ".gitattributes", 1 << 20);
	ok(attrs && strstr(attrs, "\ndata/blob.dat filter=lfs diff=lfs merge=lfs -text\n"),
	   "an LFS file no rule covers gets one");
	ok(attrs && !strstr(attrs, "kernel/_ops.so"), "a covered one does not");
	ok(attrs && strncmp(attrs, repo_default_gitattributes, strlen(repo_default_gitattributes)) == 0,
	   "the existing rules are kept first");
	free(attrs);
}

static void test_pointer_format(git_repository *git)
{
	char bin[20] = "\0pointer-format";
	struct publish_op op = { .kind = PUBLISH_PUT, .path = "p.bin", .data = bin, .len = sizeof(bin) };
	struct publish_result res;
	ok(apply_ops(git, &op, 1, 0, &res) == 0, "put p.bin");
	struct tree_entry e;
	ok(repo_stat_path(git, res.sha, "p.bin", &e) == 0, "p.bin is there");
	char *text = NULL;
	size_t len = 0;
	repo_read_blob(git, e.oid, 1024, &text, &len);
	char *want = xasprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %zu\n", e.lfs_oid,
			       sizeof(bin));
	is_str(text, want, "the pointer blob is the canonical v1 text");
	ok(e.pointer_size == strlen(want), "pointer size %llu", (unsigned long long)e.pointer_size);
	free(want);
	free(text);

	/* a pointer text as content: to an object stored with that size only */
	struct lfs_pointer ptr;
	memcpy(ptr.oid, e.lfs_oid, 65);
	ptr.size = sizeof(bin);
	char ptext[LFS_POINTER_MAX];
	size_t n = lfs_pointer_format(&ptr, ptext);
	struct publish_op again = { .kind = PUBLISH_PUT, .path = "again.bin", .data = ptext, .len = n };
	struct publish_stage st;
	struct publish_changeset ch = { .ops = &again, .nops = 1, .ref = "refs/heads/main" };
	publish_stage_init(&st, git, lfs, res.sha);
	ok(publish_stage_build(&st, &ch) == 0 && st.nnamed == 1 && st.as_lfs[0], "a stored pointer text is a pointer");
	ok(st.nnamed == 1 && strcmp(st.named[0].oid, ptr.oid) == 0, "named for the caller's link check");
	publish_stage_release(&st);
	ptr.size++;
	n = lfs_pointer_format(&ptr, ptext);
	again.len = n;
	publish_stage_init(&st, git, lfs, res.sha);
	ok(publish_stage_build(&st, &ch) == KHUB_EPERM && st.failed_op == 0, "a pointer with the wrong size: EPERM");
	publish_stage_release(&st);
	tree_entry_release(&e);
}

static void test_put_lfs(git_repository *git)
{
	struct lfs_writer *w = lfs_writer_begin(lfs);
	struct lfs_pointer ptr;
	lfs_writer_write(w, "uploaded before", 15);
	ok(lfs_writer_commit(w, NULL, ptr.oid, &ptr.size) == 0, "an object uploaded through the batch API");
	struct publish_op op = { .kind = PUBLISH_PUT_LFS, .path = "weights/model.safetensors", .lfs = ptr };
	struct publish_result res;
	ok(apply_ops(git, &op, 1, PUBLISH_HUB_LFS_RULES, &res) == KHUB_EPERM && res.failed_op == 0,
	   "put LFS of an object stored but not linked to this repo: EPERM (its sha256 gives no right)");
	mem_link(1, (const char *[]){ ptr.oid }, 1);	/* as the batch API's upload does */
	ok(apply_ops(git, &op, 1, PUBLISH_HUB_LFS_RULES, &res) == 0, "put LFS once linked");
	struct tree_entry e;
	ok(repo_stat_path(git, res.sha, op.path, &e) == 0 && e.is_lfs && strcmp(e.lfs_oid, ptr.oid) == 0 &&
	   e.size == 15, "its pointer is in the tree");
	tree_entry_release(&e);
	op.lfs.size = 14;
	ok(apply_ops(git, &op, 1, 0, &res) == KHUB_EPERM && res.failed_op == 0, "wrong size: EPERM");
	memset(op.lfs.oid, 'a', 64);
	op.lfs.size = 15;
	ok(apply_ops(git, &op, 1, 0, &res) == KHUB_EPERM, "an object not stored: EPERM");
}

static void test_sizes_and_spools(git_repository *git)
{
	/* over LFS_SIZE_THRESHOLD from a file on disk; text in a spool */
	char *big = xasprintf("%s/big.txt", root);
	int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char line[4096];
	memset(line, 'a', sizeof(line));
	size_t done = 0;
	while (done <= LFS_SIZE_THRESHOLD && write(fd, line, sizeof(line)) == (ssize_t)sizeof(line))
		done += sizeof(line);
	close(fd);
	ok(done > LFS_SIZE_THRESHOLD, "a file of %zu bytes", done);
	struct lfs_writer *spool = lfs_writer_begin(lfs);
	lfs_writer_write(spool, "spooled text\n", 13);
	struct lfs_writer *spool_bin = lfs_writer_begin(lfs);
	lfs_writer_write(spool_bin, "\0spooled binary", 15);
	/* a range of an open file */
	char *range = xasprintf("%s/range", root);
	fd = open(range, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ok(write(fd, "xxxxRANGE!yyyy", 14) == 14, "a content file");
	struct publish_op ops[] = {
		{ .kind = PUBLISH_PUT, .path = "big.txt", .fs_path = big },
		{ .kind = PUBLISH_PUT, .path = "spooled.txt", .spool = spool },
		{ .kind = PUBLISH_PUT, .path = "spooled.dat", .spool = spool_bin },
		{ .kind = PUBLISH_PUT, .path = "range.txt", .fd = fd, .offset = 4, .len = 6 },
	};
	struct publish_result res;
	ok(apply_ops(git, ops, 4, 0, &res) == 0, "put from a file, spools and a range");
	struct tree_entry e;
	ok(repo_stat_path(git, res.sha, "big.txt", &e) == 0 && e.is_lfs && e.size > LFS_SIZE_THRESHOLD,
	   "text over 10 MiB becomes LFS");
	tree_entry_release(&e);
	char *text = repo_read_text_file(git, res.sha, "spooled.txt", 100);
	is_str(text, "spooled text\n", "a spooled text is a blob");
	free(text);
	ok(repo_stat_path(git, res.sha, "spooled.dat", &e) == 0 && e.is_lfs && e.size == 15, "a spooled binary is LFS");
	tree_entry_release(&e);
	text = repo_read_text_file(git, res.sha, "range.txt", 100);
	is_str(text, "RANGE!", "a range of a file");
	free(text);
	close(fd);
	unlink(range);
	unlink(big);
	free(range);
	free(big);
}

static void test_relfs(git_repository *git)
{
	const char *rules = "*.txt filter=lfs diff=lfs merge=lfs -text\n";
	struct publish_op ops[] = {
		{ .kind = PUBLISH_PUT, .path = "notes.txt", .data = "plain words\n", .len = 12 },
		{ .kind = PUBLISH_PUT, .path = ".gitattributes", .data = rules, .len = strlen(rules) },
		{ .kind = PUBLISH_PUT, .path = "my file.dat", .data = "\0bin", .len = 4 },
	};
	struct publish_result res;
	struct tree_entry e;
	ok(apply_ops(git, ops, 1, 0, &res) == 0, "notes.txt before the rule");
	ok(repo_stat_path(git, res.sha, "notes.txt", &e) == 0 && !e.is_lfs, "a regular blob");
	tree_entry_release(&e);
	ok(apply_ops(git, ops, 2, 0, &res) == 0, "with a new .gitattributes, without the Hub's rules");
	ok(repo_stat_path(git, res.sha, "notes.txt", &e) == 0 && !e.is_lfs, "the base's rules decide alone");
	tree_entry_release(&e);
	ok(apply_ops(git, ops, 3, PUBLISH_HUB_LFS_RULES, &res) == 0, "with the Hub's rules");
	ok(repo_stat_path(git, res.sha, "notes.txt", &e) == 0 && e.is_lfs, "the commit's own rules make it LFS");
	tree_entry_release(&e);
	char *attrs = repo_read_text_file(git, res.sha, ".gitattributes", 1 << 20);
	is_str(attrs, "*.txt filter=lfs diff=lfs merge=lfs -text\nmy[[:space:]]file.dat filter=lfs diff=lfs merge=lfs "
	       "-text\n", "the commit's own .gitattributes, plus an escaped rule for the uncovered file");
	free(attrs);
}

static void test_delete_copy(git_repository *git)
{
	struct publish_op ops[] = {
		{ .kind = PUBLISH_COPY, .path = "copy/README.md", .src_path = "README.md" },
		{ .kind = PUBLISH_DELETE_FILE, .path = "README.md" },
		{ .kind = PUBLISH_DELETE_FOLDER, .path = "data" },
		{ .kind = PUBLISH_COPY, .path = "copy/ops.so", .src_path = "kernel/_ops.so" },
	};
	struct publish_result res;
	ok(apply_ops(git, ops, 4, PUBLISH_HUB_LFS_RULES, &res) == 0, "copy, delete a file and a folder");
	char *text = repo_read_text_file(git, res.sha, "copy/README.md", 100);
	is_str(text, "hello\n", "the copy has the content");
	free(text);
	struct tree_entry e;
	ok(repo_stat_path(git, res.sha, "README.md", &e) == KHUB_ENOTFOUND, "the file is deleted");
	ok(repo_stat_path(git, res.sha, "data/blob.dat", &e) == KHUB_ENOTFOUND, "the folder is deleted");
	ok(repo_stat_path(git, res.sha, "copy/ops.so", &e) == 0 && e.is_lfs, "a copied LFS file stays LFS");
	tree_entry_release(&e);
	struct publish_op missing[] = {
		{ .kind = PUBLISH_PUT, .path = "x", .data = "x", .len = 1 },
		{ .kind = PUBLISH_DELETE_FILE, .path = "no-such-file" },
	};
	ok(apply_ops(git, missing, 2, 0, &res) == KHUB_ENOTFOUND && res.failed_op == 1,
	   "deleting a missing file: ENOTFOUND, the operation named");
	missing[1] = (struct publish_op){ .kind = PUBLISH_DELETE_FOLDER, .path = "no-such-folder" };
	ok(apply_ops(git, missing, 2, 0, &res) == KHUB_ENOTFOUND && res.failed_op == 1, "a missing folder too");
	missing[1] = (struct publish_op){ .kind = PUBLISH_COPY, .path = "y", .src_path = "no-such-file" };
	ok(apply_ops(git, missing, 2, 0, &res) == KHUB_ENOTFOUND && res.failed_op == 1, "copying a missing file too");
	/* a spool after a failed operation is dropped (the leak check sees it) */
	struct lfs_writer *w = lfs_writer_begin(lfs);
	lfs_writer_write(w, "dropped", 7);
	struct publish_op refused[] = {
		{ .kind = PUBLISH_DELETE_FILE, .path = "no-such-file" },
		{ .kind = PUBLISH_PUT, .path = "z", .spool = w },
	};
	ok(apply_ops(git, refused, 2, 0, &res) == KHUB_ENOTFOUND, "a refused change takes its spools");
}

static void test_parents(git_repository *git)
{
	char head[41], abbrev[8];
	repo_resolve_revision(git, "refs/heads/main", head);
	snprintf(abbrev, sizeof(abbrev), "%.7s", head);
	struct publish_op op = { .kind = PUBLISH_PUT, .path = "p.txt", .data = "1", .len = 1 };
	struct publish_changeset ch = { .ops = &op, .nops = 1, .ref = "refs/heads/main", .parent = abbrev };
	struct publish_result res;
	ok(apply(git, &ch, &res) == 0, "the right parent (abbreviated)");
	ok(strcmp(res.head, head) == 0, "head reported");
	char git_parent[41];
	git_commit *c = NULL;
	git_oid oid;
	git_oid_fromstr(&oid, res.sha);
	ok(git_commit_lookup(&c, git, &oid) == 0 && git_commit_parentcount(c) == 1, "one parent");
	git_oid_tostr(git_parent, sizeof(git_parent), git_commit_parent_id(c, 0));
	is_str(git_parent, head, "the parent is the old head");
	git_commit_free(c);
	op.data = "2";
	ok(apply(git, &ch, &res) == KHUB_ECONFLICT && res.stale_parent, "a stale parent: ECONFLICT");
	ok(strcmp(res.head, head) != 0 && res.head[0], "the head it is at now is reported");
	ch.parent = NULL;
	ch.ref = "refs/heads/nowhere";
	ok(apply(git, &ch, &res) == KHUB_ENOTFOUND && !res.missing_base, "a ref that does not exist: ENOTFOUND");
	/* a pull request from an older commit */
	ch.ref = "refs/heads/main";
	ch.base = head;
	ch.flags = PUBLISH_NEW_PULL_REQUEST;
	ok(apply(git, &ch, &res) == 0 && strcmp(res.ref, "refs/pr/1") == 0 && res.pr_number == 1, "a new pull request");
	ok(apply(git, &ch, &res) == 0 && strcmp(res.ref, "refs/pr/2") == 0, "the next one is refs/pr/2");
	ch.base = "0123456789";
	ok(apply(git, &ch, &res) == KHUB_ENOTFOUND && res.missing_base, "from a commit that is not there");
	/* unchanged */
	op.data = "1";
	ch = (struct publish_changeset){ .ops = &op, .nops = 1, .ref = "refs/heads/main", .flags = PUBLISH_SKIP_UNCHANGED };
	ok(apply(git, &ch, &res) == 0 && res.unchanged && strcmp(res.sha, res.head) == 0, "the same bytes: unchanged");
	op.data = "3";
	ch.unchanged_except = "p.txt";
	ok(apply(git, &ch, &res) == 0 && res.unchanged, "a change at the excepted path only: unchanged");
	ch.unchanged_except = NULL;
	ok(apply(git, &ch, &res) == 0 && !res.unchanged, "else committed");
	/* the ref moved between the start and the compare-and-swap */
	ok(repo_update_ref(git, "refs/heads/main", res.sha, head, "test") == 0 &&
	   repo_update_ref(git, "refs/heads/main", res.sha, head, "test") == KHUB_ECONFLICT,
	   "a ref that moved meanwhile: ECONFLICT");
}

static void test_empty_repo(void)
{
	git_repository *git = NULL;
	ok(repo_store_init_empty(root, REPO_MODEL, "ns", "empty") == 0 &&
	   repo_store_open(root, REPO_MODEL, "ns", "empty", &git) == 0, "an empty repo");
	struct repo_record was = current;
	current = record(REPO_MODEL, "empty");
	struct publish_op op = { .kind = PUBLISH_PUT, .path = "a.txt", .data = "a", .len = 1 };
	struct publish_changeset ch = { .ops = &op, .nops = 1, .ref = "refs/heads/main", .summary = "first" };
	struct publish_result res;
	ok(apply(git, &ch, &res) == KHUB_ENOTFOUND, "no ref yet: not on a ref as it is");
	ch.flags = PUBLISH_NEW_REF;
	ok(apply(git, &ch, &res) == 0 && !res.head[0], "no parent on an empty repo: a new ref");
	git_commit *c = NULL;
	git_oid oid;
	git_oid_fromstr(&oid, res.sha);
	ok(git_commit_lookup(&c, git, &oid) == 0 && git_commit_parentcount(c) == 0, "a root commit");
	is_str(c ? git_commit_summary(c) : NULL, "first", "its summary");
	git_commit_free(c);
	ok(apply(git, &ch, &res) == KHUB_ECONFLICT, "a new ref that exists meanwhile: ECONFLICT");
	git_repository_free(git);
	current = was;
}

/* The lock is the database's: busy when another node holds it, and a
 * publication that never had it does not release it. */
static void test_lock(void)
{
	struct publication *pub = NULL;
	mem.locked = 1;
	ok(publish_begin(root, lfs, &current, &pub) == 0 && publish_trylock(pub) == 1, "a repo locked elsewhere: busy");
	struct publish_changeset ch = { .ref = "refs/heads/main", .summary = "x" };
	struct publish_result res;
	ok(publish_apply(pub, &tester, &ch, &res) == KHUB_EINVAL, "no publish_apply without the lock");
	publish_end(pub, &tester, "repo.commit", NULL);
	ok(mem.locked == 1, "publish_end leaves the other holder's lock alone");
	mem.locked = 0;
}

int main(void)
{
	repo_store_global_init();
	snprintf(root, sizeof(root), "/tmp/khub-test-publish-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	char *lfs_root = xasprintf("%s/lfs", root);
	lfs = lfs_store_open(lfs_root);
	git_repository *git = NULL;
	publish_set_db(&memory_db);
	current = record(REPO_KERNEL, "k");
	ok(lfs && repo_store_create(root, REPO_KERNEL, "ns", "k") == 0 &&
	   repo_store_open(root, REPO_KERNEL, "ns", "k", &git) == 0, "a bare repo with the Hub's initial commit");
	test_puts(git);
	test_pointer_format(git);
	test_put_lfs(git);
	test_sizes_and_spools(git);
	test_relfs(git);
	test_delete_copy(git);
	test_parents(git);
	test_empty_repo();
	test_lock();
	git_repository_free(git);
	lfs_store_close(lfs);
	free(lfs_root);
	char *rm = xasprintf("rm -rf '%s'", root);
	if (system(rm) != 0)
		printf("# cannot remove %s\n", root);
	free(rm);
	git_libgit2_shutdown();
	return done_testing();
}
