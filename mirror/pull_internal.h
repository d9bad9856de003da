/* pull_internal.h -- shared by the parts of a pull from an upstream
 * (internal to mirror/): mirror/pull.c (selections, one repo, status, lazy
 * fetches), mirror/pull_refs.c (refs and libgit2's network steps under a
 * deadline), mirror/pull_lfs.c (the wanted LFS objects, fetched in
 * parallel). */
#ifndef KHUB_PULL_INTERNAL_H
#define KHUB_PULL_INTERNAL_H

#include "mirror/mirror.h"

#define STAGING_PREFIX "refs/khub-upstream/"

struct wanted {
	char oid[65];
	uint64_t size;
	char *path;
};

struct repo_pull {
	struct mirror_run *run;
	const struct mirror_selection *sel;
	const struct mirror_upstream *up;
	struct upstream_client *client;
	git_repository *git;
	struct repo_record rec;
	char upstream_repo[2 * REPO_NAME_MAX + 2];
	struct strbuf warnings;
	struct strbuf errors;
	uint64_t bytes, objects;
	int refs_behind;
};

struct upstream_ref {
	char *name;	/* refs/heads/v1 */
	char sha[41];
};

enum net_step { STEP_LIST, STEP_FETCH };

/* progress on stderr when the run asked for it */
void pull_progress(struct repo_pull *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Is this upstream ref (full name) in the selection? */
int pull_ref_selected(const struct mirror_selection *sel, const char *full);
/* Is an LFS file at path wanted eagerly (not in a variant outside the globs)? */
int pull_eager_path(const struct mirror_selection *sel, const char *path);

/* A ref's sha, 0 or -1 when absent. */
int pull_local_ref(git_repository *git, const char *name, char sha[41]);
/* STEP_LIST fills refs and nrefs with the selected upstream refs; STEP_FETCH
 * brings their objects into the staging refs. Runs in a child process
 * under the selection's git_timeout; errors go to rp->errors. */
int pull_run_git_step(struct repo_pull *rp, git_remote *remote, enum net_step step, struct upstream_ref **refs,
		      size_t *nrefs);
/* Move a visible ref to the upstream sha (policy keep: not on a force-push). */
int pull_move_visible_ref(struct repo_pull *rp, const char *name, const char *sha);
/* Visible refs upstream no longer has: deleted or kept, per policy. */
void pull_apply_deletions(struct repo_pull *rp, struct upstream_ref *refs, size_t n);
/* Fetch and verify every LFS object the selection wants at sha. */
int pull_fetch_wanted_objects(struct repo_pull *rp, const char *sha);

#endif
