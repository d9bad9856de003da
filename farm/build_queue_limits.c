/* build_queue_limits.c -- how much may wait in the build queue: variants
 * per request (build_variants_per_request), queued jobs per repo
 * (build_queue_per_repo) and per requesting user (build_queue_per_user).
 * Enqueues take turns under one lock in one transaction and a request
 * that would pass a limit queues nothing at all; the claim's fair order
 * (storage/db/db_builds.c) keeps what is queued from starving other repos. */
#include "farm/farm.h"

#include <stdio.h>
#include <string.h>

static __thread char refusal[300];	/* why the last enqueue of this thread was refused */

int build_queue_begin(size_t n)
{
	refusal[0] = '\0';
	long cap = farm_settings.variants_per_request;
	if (cap > 0 && n > (size_t)cap) {
		snprintf(refusal, sizeof(refusal), "%zu variants in one request; at most %ld may be queued at once "
			 "(build_variants_per_request)", n, cap);
		return KHUB_EINVAL;
	}
	return db_build_queue_begin();
}

/* KHUB_ETOOBIG (refusal said) when the jobs queued now pass a limit. */
static int check_limits(const struct repo_record *rec, const char *requested_by)
{
	long repo_n = 0, user_n = 0, per_repo = farm_settings.queue_per_repo;
	long per_user = farm_settings.queue_per_user;
	/* builds on push are counted per repo only: "push" is no one user */
	int by_user = requested_by && requested_by[0] && strcmp(requested_by, "push") != 0;
	int rc = db_build_queued_counts(rec->id, by_user ? requested_by : NULL, &repo_n, &user_n);
	if (rc < 0)
		return rc;
	if (per_repo > 0 && repo_n > per_repo)
		snprintf(refusal, sizeof(refusal), "this repository would have %ld build jobs queued; at most %ld may wait "
			 "at once (build_queue_per_repo): nothing was queued, retry when some have run", repo_n, per_repo);
	else if (by_user && per_user > 0 && user_n > per_user)
		snprintf(refusal, sizeof(refusal), "%s would have %ld build jobs queued; at most %ld may wait at once "
			 "(build_queue_per_user): nothing was queued, retry when some have run", requested_by, user_n,
			 per_user);
	else
		return 0;
	return KHUB_ETOOBIG;
}

int build_queue_end(const struct repo_record *rec, const char *requested_by, int rc)
{
	if (rc == 0)
		rc = check_limits(rec, requested_by);
	if (rc < 0) {
		db_tx_rollback();
		return rc;
	}
	return db_tx_commit();
}

const char *build_queue_refusal(void)
{
	return refusal[0] ? refusal : NULL;
}
