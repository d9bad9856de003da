/* build_publish.c -- a build's output becomes commits (background job):
 * build/<variant>/ on branch v<version> (stale files of the variant
 * removed, other variants untouched; a new branch starts from main without
 * build/ and benchmarks/, as kernel-builder's upload does), then README.md
 * on main when it changed; the ABI policy decides first. */
#include "farm/farm.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__thread int build_publishing;

/* The background job of one output (owned by the work queue). */
struct build_publish_job {
	int64_t id, worker_id;
	char worker[REPO_NAME_MAX + 1];
	char *path;			/* the spooled tar; NULL for a request that joins */
};

static void build_publish_job_free(void *arg)
{
	struct build_publish_job *job = arg;
	if (job->path)
		unlink(job->path);
	free(job->path);
	free(job);
}

struct job_view {
	int64_t id;
	char ns[REPO_NAME_MAX + 1], name[REPO_NAME_MAX + 1];
	char commit[41], variant[256];
	const char *metadata;		/* the output's <variant>/metadata.json (borrowed) */
	size_t metadata_len;
	json_t *digest;			/* its "digest" (owned; NULL: none) */
	char earlier[41];		/* what an earlier build of this source commit and variant
					 * published, "" when none */
	char started[40];		/* when the job was claimed, "" unknown */
	char *source_url, *source_revision;	/* an external source (owned), or NULL */
	char toml_sha256[65];		/* of the source's build.toml, "" when none */
	long version;			/* the output's: the branch v<version> */
};

/* 1 when the variant's metadata.json at commit sha has the digest d: the
 * same files, byte for byte, as the output (metadata.json itself aside,
 * which names the build). */
static int same_digest(git_repository *git, const char *sha, const char *variant, const json_t *d)
{
	if (!json_is_object(json_object_get(d, "files")) || !sha[0])
		return 0;
	char *path = xasprintf("build/%s/" BUILD_METADATA_FILE, variant);
	char *text = repo_read_text_file(git, sha, path, METADATA_MAX_BYTES);
	json_t *md = text ? json_loads(text, 0, NULL) : NULL;
	int same = md && json_equal(json_object_get(md, "digest"), (json_t *)d);
	json_decref(md);
	free(text);
	free(path);
	return same;
}

static const struct publish_actor *farm_actor(const char *worker)
{
	static __thread char addr[REPO_NAME_MAX + 16];
	static __thread struct publish_actor who;
	snprintf(addr, sizeof(addr), "worker %s", worker);
	who = (struct publish_actor){ 0, "khub build farm", "builds@khub.local", addr };
	return &who;
}

/* The operations of one publication (paths and contents owned). */
struct op_list {
	struct publish_op *ops;
	size_t n, alloc;
};

static struct publish_op *op_add(struct op_list *l, enum publish_op_kind kind, char *path)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? l->alloc * 2 : 16;
		l->ops = xrealloc(l->ops, l->alloc * sizeof(*l->ops));
	}
	struct publish_op *op = &l->ops[l->n++];
	*op = (struct publish_op){ .kind = kind, .path = path };
	return op;
}

static void op_list_release(struct op_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->ops[i].path);
		free((void *)l->ops[i].data);
	}
	free(l->ops);
}

/* Every file of <variant>/ from the tar, put under build/<variant>/. */
static int stage_variant(struct op_list *l, const char *path, const char *variant)
{
	struct archive *ar;
	struct archive_entry *e;
	size_t vlen = strlen(variant);
	int rc = build_output_open(path, &ar), r;
	if (rc < 0)
		return rc;
	while (rc == 0 && (r = archive_read_next_header(ar, &e)) == ARCHIVE_OK) {
		char *name = build_output_clean_path(archive_entry_pathname(e));
		if (name && archive_entry_filetype(e) == AE_IFREG && strncmp(name, variant, vlen) == 0 &&
		    name[vlen] == '/') {
			size_t len = 0;
			char *data = build_output_read_member(ar, archive_entry_size(e),
							      (size_t)farm_settings.output_max_bytes, &len);
			struct publish_op *op = op_add(l, PUBLISH_PUT, xasprintf("build/%s", name));
			op->mode = (archive_entry_perm(e) & 0111) ? 0100755 : 0100644;
			op->data = data;
			op->len = len;
			rc = data ? 0 : KHUB_EIO;
		}
		free(name);
	}
	archive_read_free(ar);
	return rc;
}

/* Delete folder dir when the base has it (nothing to delete is no error
 * here: a variant published for the first time). */
static void delete_if_there(struct op_list *l, git_repository *git, const char *base, const char *dir)
{
	struct tree_entry e;
	if (base[0] && repo_stat_path(git, base, dir, &e) == 0) {
		if (e.is_dir)
			op_add(l, PUBLISH_DELETE_FOLDER, xstrdup(dir));
		tree_entry_release(&e);
	}
}

/* The change of a variant: its stale files removed (a new branch starts
 * from main without build/ and benchmarks/), the output's files, its
 * metadata.json last. */
static int variant_ops(struct op_list *l, git_repository *git, const struct job_view *v, const char *tar,
		       int exists, const char *base)
{
	char *dir = xasprintf("build/%s", v->variant);
	if (exists) {
		delete_if_there(l, git, base, dir);
	} else {
		delete_if_there(l, git, base, "build");
		delete_if_there(l, git, base, "benchmarks");
	}
	free(dir);
	int rc = stage_variant(l, tar, v->variant);
	struct publish_op *op = op_add(l, PUBLISH_PUT, xasprintf("build/%s/" BUILD_METADATA_FILE, v->variant));
	char *copy = xmalloc(v->metadata_len + 1);
	memcpy(copy, v->metadata, v->metadata_len);
	op->data = copy;
	op->len = v->metadata_len;
	return rc;
}

/* Sign and store the build's provenance (farm/build_provenance.c): its
 * subjects are the files l puts under build/<variant>/. *trailer (owned)
 * names it in the publishing commit. */
static int provenance_record(const struct job_view *v, const char *worker, const struct op_list *l, char **trailer)
{
	char *prefix = xasprintf("build/%s/", v->variant);
	size_t plen = strlen(prefix), n = 0;
	struct build_provenance_file *files = xcalloc(l->n + 1, sizeof(*files));
	for (size_t i = 0; i < l->n; i++)
		if (l->ops[i].kind == PUBLISH_PUT && strncmp(l->ops[i].path, prefix, plen) == 0)
			files[n++] = (struct build_provenance_file){ l->ops[i].path + plen, l->ops[i].data, l->ops[i].len };
	struct build_provenance_input in = {
		.id = v->id, .hub = farm_settings.hub_url ? farm_settings.hub_url : "khub", .ns = v->ns, .name = v->name,
		.commit = v->commit, .variant = v->variant, .source_url = v->source_url,
		.source_revision = v->source_revision, .build_toml_sha256 = v->toml_sha256, .worker = worker,
		.started = v->started[0] ? v->started : NULL, .metadata = v->metadata, .metadata_len = v->metadata_len,
		.files = files, .nfiles = n,
	};
	char *statement = build_provenance_statement(&in), *envelope = NULL, sha[65], id[ED25519_KEY_ID_LEN + 1];
	char err[512] = "no signing key (signing_key)";
	int rc = farm_settings.signing_key ? build_provenance_sign(farm_settings.signing_key, statement, &envelope, sha,
								   id, err, sizeof(err)) : KHUB_EINVAL;
	if (rc < 0) {
		log_error("build %" PRId64 ": cannot sign its provenance: %s", v->id, err);
		rc = KHUB_EIO;
	} else if ((rc = db_build_provenance_put(v->id, envelope, sha, id)) == 0) {
		*trailer = xasprintf("Provenance: /api/builds/%" PRId64 "/provenance sha256:%s", v->id, sha);
	}
	free(envelope);
	free(statement);
	free(files);
	free(prefix);
	return rc;
}

/* Where a publication goes: the branch v<N>, or for a campaign build a
 * pull request (its refs/pr/N once staged; else a new one from v<N>, or
 * from main when there is no v<N> yet). */
struct publish_target {
	char ref[REF_NAME_MAX + 16];
	char old[41];			/* the ref's head, "" when none */
	char parent[41];		/* main's head, for a new branch */
	int exists;			/* the files are replaced relative to old */
	unsigned flags;
	const struct db_campaign_kernel *pr;	/* NULL: v<N> itself */
};

static void pick_target(git_repository *git, const char *branch, const struct db_campaign_kernel *pr,
			struct publish_target *t)
{
	memset(t, 0, sizeof(*t));
	t->pr = pr;
	if (pr && pr->pr_ref && repo_ref_read(git, pr->pr_ref, t->old) == 0) {
		snprintf(t->ref, sizeof(t->ref), "%s", pr->pr_ref);	/* staged: another commit on it */
		t->exists = 1;
		return;
	}
	snprintf(t->ref, sizeof(t->ref), "refs/heads/%s", branch);
	t->exists = repo_ref_read(git, t->ref, t->old) == 0;
	if (!t->exists && repo_resolve_revision(git, "main", t->parent) < 0)
		t->parent[0] = '\0';
	t->flags = t->exists ? PUBLISH_SKIP_UNCHANGED : PUBLISH_NEW_REF;
	if (pr) {
		t->flags = PUBLISH_NEW_PULL_REQUEST;
		if (!t->exists)
			snprintf(t->ref, sizeof(t->ref), "refs/heads/main");
	}
}

/* The commit's description: for a pull request, the campaign, the variant
 * and its ABI report, kept as the pull request's description too. */
static char *publish_description(const struct job_view *v, const struct publish_target *t, const char *worker,
				 const char *abi, const char *trailer)
{
	if (!t->pr)
		return xasprintf("Built by khub's build farm from %s/%s at %s (build #%" PRId64 ", worker %s).\n"
				 "ABI check: %s.\n\n%s\n", v->ns, v->name, v->commit, v->id, worker, abi, trailer);
	return xasprintf("Fleet rebuild campaign #%" PRId64 " of %s/%s at %s.\n\nVariants: %s (build #%" PRId64
			 ", worker %s).\nABI reports: %s: %s (GET /api/builds/%" PRId64 ").\n"
			 "Merging this pull request moves v%ld to it.\n\n%s\n", t->pr->campaign_id, v->ns, v->name,
			 v->commit, v->variant, v->id, worker, v->variant, abi, v->id, v->version, trailer);
}

/* After a pull request was staged: the campaign knows it. */
static void record_pr(const struct job_view *v, const struct publish_target *t, const struct publish_result *res,
		      const char *description, char branch[32])
{
	if (!t->pr)
		return;
	snprintf(branch, 32, "%s", res->ref + strlen("refs/"));
	if (db_campaign_set_pr(t->pr->campaign_id, t->pr->repo_id, res->ref, t->exists && !t->pr->pr_ref ? t->old
			       : t->pr->pr_base ? t->pr->pr_base : "", v->version, description) < 0)
		log_error("build %" PRId64 ": %s staged but not recorded in campaign #%" PRId64, v->id, res->ref,
			  t->pr->campaign_id);
}

/* Commit build/<variant>/ on v<version> (or a campaign's pull request);
 * sha gets the new commit, or the
 * published one whose files are identical (*identical 1: nothing
 * committed, a rebuild of the same source and toolchain): its files but
 * metadata.json (which names the build) the same bytes as at the head of
 * the branch (compared as trees, whatever the worker claims), or its
 * digest the one an earlier build of the same source commit published. */
static int publish_variant(const struct repo_record *rec, const struct job_view *v, const char *worker,
			   const char *tar, const char *abi, const struct db_campaign_kernel *pr, char branch[32],
			   char sha[41], int *identical)
{
	struct publication *pub = NULL;
	git_repository *git = NULL;
	struct op_list l = { 0 };
	struct publish_result res = { .failed_op = 0 };
	struct publish_target t;
	const struct publish_actor *who = farm_actor(worker);
	char *published = NULL, *summary = NULL, *description = NULL, *trailer = NULL;
	char *path = xasprintf("build/%s/" BUILD_METADATA_FILE, v->variant);
	snprintf(branch, 32, "v%ld", v->version);
	int rc = publish_begin(farm_settings.repo_root, farm_settings.lfs, rec, &pub);
	if (rc < 0 || (rc = publish_lock(pub)) < 0 ||
	    (rc = repo_store_open(farm_settings.repo_root, rec->type, rec->ns, rec->name, &git)) < 0)
		goto cleanup;
	pick_target(git, branch, pr, &t);
	if ((rc = variant_ops(&l, git, v, tar, t.exists, t.exists ? t.old : t.parent)) < 0 ||
	    (rc = provenance_record(v, worker, &l, &trailer)) < 0)
		goto cleanup;
	published = t.exists && !pr ? repo_read_text_file(git, t.old, path, METADATA_MAX_BYTES) : NULL;
	int earlier = !pr && v->earlier[0] && strcmp(v->earlier, t.old) != 0 &&
		      same_digest(git, v->earlier, v->variant, v->digest);
	summary = pr ? xasprintf("Fleet rebuild #%" PRId64 ": build %s of %.7s (build #%" PRId64 ")", pr->campaign_id,
				 v->variant, v->commit, v->id)
		     : xasprintf("Build %s of %.7s (build #%" PRId64 ")", v->variant, v->commit, v->id);
	description = publish_description(v, &t, worker, abi, trailer);
	struct publish_changeset change = {
		.ops = l.ops, .nops = l.n, .ref = t.ref, .parent = t.exists && !(t.flags & PUBLISH_NEW_PULL_REQUEST)
		? t.old : NULL, .base = t.exists ? NULL : t.parent, .summary = summary, .description = description,
		.unchanged_except = published ? path : NULL, .flags = t.flags | (earlier ? PUBLISH_DRY_RUN : 0),
	};
	/* an earlier build's digest: nothing to commit, only which commit it is */
	if (!(earlier && !published) && (rc = publish_apply(pub, who, &change, &res)) < 0)
		goto cleanup;
	*identical = earlier || (res.unchanged && published);
	memcpy(sha, earlier && !(published && res.unchanged) ? v->earlier : res.sha, 41);
	record_pr(v, &t, &res, description, branch);
cleanup:;
	char *details = xasprintf("{\"build\":%" PRId64 ",\"variant\":\"%s\",\"branch\":\"%s\"}", v->id, v->variant,
				  branch);
	publish_end(pub, who, "build.publish", details);
	free(details);
	git_repository_free(git);
	op_list_release(&l);
	free(published);
	free(summary);
	free(description);
	free(trailer);
	free(path);
	return rc;
}

/* README.md on main, in a commit of its own, when it differs. */
static int publish_readme(const struct repo_record *rec, const struct job_view *v, const char *worker,
			  const char *text, size_t len)
{
	struct publication *pub = NULL;
	git_repository *git = NULL;
	const struct publish_actor *who = farm_actor(worker);
	char parent[41];
	char *summary = NULL;
	int rc = publish_begin(farm_settings.repo_root, farm_settings.lfs, rec, &pub);
	if (rc < 0 || (rc = publish_lock(pub)) < 0 ||
	    (rc = repo_store_open(farm_settings.repo_root, rec->type, rec->ns, rec->name, &git)) < 0 ||
	    repo_resolve_revision(git, "main", parent) < 0)
		goto cleanup;
	char *now = repo_read_text_file(git, parent, "README.md", len + 1);
	int same = now && strlen(now) == len && memcmp(now, text, len) == 0;
	free(now);
	if (same)
		goto cleanup;
	summary = xasprintf("Update README.md from build #%" PRId64 " of %.7s", v->id, v->commit);
	struct publish_op op = { .kind = PUBLISH_PUT, .path = "README.md", .data = text, .len = len };
	struct publish_changeset change = { .ops = &op, .nops = 1, .ref = "refs/heads/main", .parent = parent,
					    .summary = summary };
	struct publish_result res;
	rc = publish_apply(pub, who, &change, &res);
cleanup:
	publish_end(pub, who, "build.readme", NULL);
	git_repository_free(git);
	free(summary);
	return rc;
}

/* End the job refused, with the reason and the report kept. */
int farm_abi_target_valid(const char *target)
{
	char *end;
	return target && !strncmp(target, "2_", 2) && target[2] >= '0' && target[2] <= '9' &&
	       strtol(target + 2, &end, 10) < 1000 && !*end;
}

/* The N of "manylinux_2_N" or "2_N"; -1 for anything else. */
static long manylinux_minor(const char *name)
{
	if (name && !strncmp(name, "manylinux_", 10))
		name += 10;
	return farm_abi_target_valid(name) ? strtol(name + 2, NULL, 10) : -1;
}

/* The "symbol@GLIBC_2.N" of glibc.needs with N over max, comma-separated
 * into why (after its text). */
static void glibc_over(json_t *glibc, long max, char *why, size_t size)
{
	size_t i, used = strlen(why);
	json_t *v;
	json_array_foreach(json_object_get(glibc, "needs"), i, v) {
		const char *s = json_string_value(v), *at = s ? strstr(s, "@GLIBC_2.") : NULL;
		if (at && strtol(at + 9, NULL, 10) > max && used < size)
			used += (size_t)snprintf(why + used, size - used, "%s%s", used && why[used - 1] != ' ' ? ", " : "", s);
	}
}

int farm_abi_report_passes(json_t *report, const char *target, char *why, size_t size)
{
	long want = manylinux_minor(target), checked;
	json_t *glibc = json_object_get(report, "glibc");
	const char *newest = json_string_value(json_object_get(glibc, "newest"));
	if (!report) {
		snprintf(why, size, "no abi-report.json in the output");
		return 0;
	}
	/* a report without "manylinux" is an older worker's, which checked 2_28 */
	json_t *named = json_object_get(report, "manylinux");
	checked = named ? manylinux_minor(json_string_value(named)) : 28;
	if (checked < 0 || checked > want) {
		snprintf(why, size, "the ABI report checked %s, not manylinux_%s",
			 checked < 0 ? "no manylinux target" : named ? json_string_value(named) : "manylinux_2_28", target);
		return 0;
	}
	if (newest && !strncmp(newest, "2.", 2) && strtol(newest + 2, NULL, 10) > want) {
		snprintf(why, size, "the ABI check: symbols need glibc %s, newer than manylinux_%s allows (2.%ld): ", newest,
			 target, want);
		glibc_over(glibc, want, why, size);
		return 0;
	}
	if (!json_is_true(json_object_get(report, "ok"))) {
		snprintf(why, size, "the ABI check found violations of manylinux_%s", target);
		return 0;
	}
	return 1;
}

static int refuse(const struct build_publish_job *job, const char *why, const char *report)
{
	log_info("build %" PRId64 ": output refused: %s", job->id, why);
	int rc = build_job_refuse(job->id, job->worker_id, why, report);
	return rc == KHUB_ECONFLICT ? 0 : rc;
}

/* Whether the plan of build.toml at commit builds variant (the second line
 * behind the worker's own check: a noarch output of a compiled kernel, a
 * backend the kernel does not list, an arch output of a stable-ABI kernel
 * are refused): 1, 0 with the reason in why, or KHUB_EIO. */
static int plan_takes_variant(git_repository *git, const char *commit, const char *variant, char *why, size_t size)
{
	struct build_plan plan;
	char reason[400];
	int rc = build_plan_commit(git, commit, &plan);
	if (rc < 0)
		return rc;
	if (plan.refused)
		snprintf(why, size, "the source cannot be built from: %.400s", plan.refused);
	else if (!build_plan_judge(&plan, variant, reason, sizeof(reason)))
		snprintf(why, size, "build.toml does not build %.100s (%.300s): nothing published", variant, reason);
	else
		rc = 1;
	build_plan_release(&plan);
	return rc;
}

/* The output's metadata.json and its digest (owned), for identical_publication. */
static void job_view_take_output(struct job_view *v, const struct build_output *out)
{
	json_t *md = json_loadb(out->metadata, out->metadata_len, 0, NULL);
	v->digest = json_incref(json_object_get(md, "digest"));
	json_decref(md);
	v->metadata = out->metadata;
	v->metadata_len = out->metadata_len;
}

/* End the job succeeded: published at sha, or identical to it. */
static int finish_published(const struct build_publish_job *job, const struct job_view *v, const char *report,
			    const char *branch, const char *sha, int identical, int staged)
{
	char note[96];
	snprintf(note, sizeof(note), "identical to published commit %s", sha);
	log_info("build %" PRId64 ": %s %s on %s at %s", job->id, v->variant,
		 identical ? "identical to what is published" : staged ? "staged" : "published", branch, sha);
	if (staged)	/* on the campaign's pull request: v<N> gets it at the merge */
		return build_job_stage(job->id, job->worker_id, report, branch, sha, identical ? note : NULL);
	return build_job_publish(job->id, job->worker_id, report, branch, sha, identical ? note : NULL);
}

/* The view of the job's row (strings copied); job_view_release frees. */
static void job_view_fill(struct job_view *v, int64_t id, const struct build_row *b)
{
	memset(v, 0, sizeof(*v));
	v->id = id;
	snprintf(v->ns, sizeof(v->ns), "%s", b->ns);
	snprintf(v->name, sizeof(v->name), "%s", b->name);
	snprintf(v->commit, sizeof(v->commit), "%s", b->commit);
	snprintf(v->variant, sizeof(v->variant), "%s", b->variant);
	if (b->started)
		snprintf(v->started, sizeof(v->started), "%s", b->started);
	if (b->source_url)
		v->source_url = xstrdup(b->source_url);
	if (b->source_revision)
		v->source_revision = xstrdup(b->source_revision);
}

static void job_view_release(struct job_view *v)
{
	free(v->source_url);
	free(v->source_revision);
	v->source_url = v->source_revision = NULL;
}

/* The job's source judged by its plan, then the uploaded tar checked:
 * 1 (out filled), 0 with why (refuse it), or an error. */
static int check_job_output(const struct build_publish_job *job, const struct build_row *b, struct job_view *v,
			    struct build_output *out, char *why, size_t size)
{
	git_repository *git = NULL;
	memset(out, 0, sizeof(*out));
	if (b->benchmark) {	/* it measures, it never publishes */
		snprintf(why, size, "a benchmark job has no output to publish");
		return 0;
	}
	int rc = build_open_job_source(b, &git);
	if (rc < 0) {
		snprintf(why, size, "the job's source is gone");
		return rc == KHUB_ENOTFOUND ? 0 : rc;
	}
	char *toml = repo_read_text_file(git, v->commit, "build.toml", 1024 * 1024);
	if (toml)
		sha256_hex(toml, strlen(toml), v->toml_sha256);
	rc = plan_takes_variant(git, v->commit, v->variant, why, size);
	git_repository_free(git);
	if (rc > 0)
		rc = build_output_check(job->path, v->variant, toml, out, why, size) < 0 ? 0 : 1;
	free(toml);
	return rc;
}

/* Publish a checked output (the ABI policy decides first): ends the job
 * succeeded or failed; 0, or a negative error when it could not be ended.
 * Releases out. */
static int build_publish_checked(const struct build_publish_job *job, struct job_view *v, struct build_output *out)
{
	struct repo_record rec;
	char why[512], branch[32] = "", sha[41] = "";
	int rc;
	if ((rc = db_repo_get(REPO_KERNEL, v->ns, v->name, &rec)) < 0) {
		build_output_release(out);
		return rc == KHUB_EDB ? rc : refuse(job, "the repository is gone", NULL);
	}
	char abi_why[440];
	int abi_ok = farm_abi_report_passes(out->report, farm_settings.abi_manylinux, abi_why, sizeof(abi_why));
	const char *abi = abi_ok ? "passed" : out->report ? "violations (abi_policy warn)" : "no report (abi_policy warn)";
	if (!abi_ok && farm_settings.abi_enforce) {
		snprintf(why, sizeof(why), "%s (abi_policy enforce): nothing published", abi_why);
		rc = refuse(job, why, out->report_text);
		build_output_release(out);
		return rc;
	}
	build_publishing = 1;
	int identical = 0;
	job_view_take_output(v, out);
	struct db_campaign_kernel pr;
	int on_pr = build_campaign_target(job->id, &pr);
	v->version = out->version;
	rc = on_pr < 0 ? on_pr : publish_variant(&rec, v, job->worker, job->path, abi, on_pr ? &pr : NULL, branch, sha,
						 &identical);
	if (on_pr > 0)
		db_campaign_kernel_release(&pr);
	json_decref(v->digest);
	if (rc == 0 && !identical && !on_pr && out->readme &&
	    publish_readme(&rec, v, job->worker, out->readme, out->readme_len) < 0)
		log_warn("build %" PRId64 ": README.md not published on main", job->id);
	build_publishing = 0;
	if (rc < 0) {
		snprintf(why, sizeof(why), "publishing failed: %s", khub_strerror(rc));
		int end = refuse(job, why, out->report_text);
		build_output_release(out);
		return rc == KHUB_ENOSPC || end < 0 ? (end < 0 ? end : rc) : 0;
	}
	rc = finish_published(job, v, out->report_text, branch, sha, identical, on_pr > 0);
	build_output_release(out);
	if (rc == 0 && !on_pr)	/* the repo's benchmarkAfterPublish */
		benchmark_jobs_after_publish(&rec, v->commit, v->variant);
	return rc == KHUB_ECONFLICT ? 0 : rc;
}

/* Check and publish (the job's run): ends the job succeeded or failed in
 * the database; 0, or a negative error when the job could not be ended
 * (its state stays running). */
static int build_publish_run(void *arg)
{
	struct build_publish_job *job = arg;
	struct build_output out;
	struct build_row b;
	struct job_view v;
	char why[512], state[16];
	if (!job->path)
		return 0;	/* a request that joined: the job's own run answers */
	/* the uploaded tar is on disk before anything is made of it (here,
	 * not on the request thread: an fsync can take seconds) */
	if (fsync_file(job->path) < 0) {
		int saved = errno;
		log_error("build %" PRId64 ": cannot sync the uploaded output: %s", job->id, strerror(saved));
		return khub_err_from_errno(saved);
	}
	int rc = build_job_lease(job->id, job->worker_id, state);
	if (rc < 0)
		return rc == KHUB_EDB ? rc : 0;
	if ((rc = db_build_get(job->id, &b)) < 0)
		return rc;
	job_view_fill(&v, job->id, &b);
	if ((rc = db_build_earlier_publication(job->id, v.earlier)) < 0) {
		build_row_release(&b);
		job_view_release(&v);
		return rc;
	}
	rc = check_job_output(job, &b, &v, &out, why, sizeof(why));
	build_row_release(&b);
	if (rc <= 0) {
		build_output_release(&out);
		job_view_release(&v);
		return rc < 0 ? rc : refuse(job, why, NULL);
	}
	rc = build_publish_checked(job, &v, &out);
	job_view_release(&v);
	return rc;
}

void build_publish_job(int64_t id, int64_t worker_id, const char *worker, char *path, struct farm_job *job)
{
	struct build_publish_job *arg = xcalloc(1, sizeof(*arg));
	arg->id = id;
	arg->worker_id = worker_id;
	snprintf(arg->worker, sizeof(arg->worker), "%s", worker);
	arg->path = path;
	snprintf(job->key, sizeof(job->key), "build-output/%" PRId64, id);
	job->run = build_publish_run;
	job->free_arg = build_publish_job_free;
	job->arg = arg;
}
