/* build_enqueue.c -- queueing the variants of a commit: one job per
 * variant unless one is queued, running or (without force) built already,
 * under the queue's limits (farm/build_queue_limits.c). */
#include "farm/farm.h"

int build_enqueue_all(const struct repo_record *rec, const char *commit, char *const *variants, size_t n, int force,
		      const char *requested_by, const char *source_url, const char *source_revision, json_t *builds,
		      json_t *skipped)
{
	struct build_request r = { rec->id, commit, force, (int)farm_settings.max_attempts, requested_by, source_url,
				   source_revision };
	int queued = 0, rc = build_queue_begin(n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		enum build_enqueue_outcome outcome;
		int64_t id = 0;
		if ((rc = build_job_enqueue(&r, variants[i], &outcome, &id)) < 0)
			break;
		if (outcome == BUILD_ENQUEUED) {
			queued++;
			struct build_row b;
			if (builds && db_build_get(id, &b) == 0) {
				json_array_append_new(builds, build_json(&b));
				build_row_release(&b);
			}
		} else if (skipped) {
			json_array_append_new(skipped, json_pack("{s:s, s:s, s:I}", "variant", variants[i], "reason",
								 outcome == BUILD_SKIP_ACTIVE ? "already queued or running"
								 : "already built (force to rebuild)", "build", (json_int_t)id));
		}
	}
	if ((rc = build_queue_end(rec, requested_by, rc)) == 0 && queued)
		farm_queue_changed();
	return rc;
}
