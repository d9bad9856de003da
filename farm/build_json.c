/* build_json.c -- a build job as JSON: BUILD, what users and the web UI
 * see, and JOB, what a claim hands a worker (docs/build-farm.md). */
#include "farm/farm.h"

#include <stdio.h>
#include <stdlib.h>

static json_t *text_or_null(const char *v)
{
	return v ? json_string(v) : json_null();
}

/* A source URL as shown: never its userinfo (rows queued before such
 * URLs were refused may hold some). */
static json_t *url_or_null(const char *url)
{
	if (!url)
		return json_null();
	char *shown = build_source_url_public(url);
	json_t *v = json_string(shown);
	free(shown);
	return v;
}

json_t *build_json(const struct build_row *b)
{
	char repo[2 * REPO_NAME_MAX + 2];
	snprintf(repo, sizeof(repo), "%s/%s", b->ns, b->name);
	json_t *report = b->abi_report ? json_loads(b->abi_report, 0, NULL) : NULL;
	json_t *source = json_null();
	if (b->source_url)
		source = json_pack("{s:o, s:o}", "url", url_or_null(b->source_url), "revision",
				   text_or_null(b->source_revision));
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			      "id", (json_int_t)b->id, "repo", repo, "commit", b->commit, "variant", b->variant,
			      "state", b->state, "attempt", (json_int_t)b->attempt, "max_attempts",
			      (json_int_t)b->max_attempts, "worker", text_or_null(b->worker), "created_at",
			      text_or_null(b->created), "started_at", text_or_null(b->started), "finished_at",
			      text_or_null(b->finished), "not_before", text_or_null(b->not_before), "lease_expires_at",
			      text_or_null(b->lease_expires), "error", text_or_null(b->error), "source", source);
	json_object_set_new(o, "published", !b->branch ? json_null()
				: json_pack("{s:o, s:o}", "branch", text_or_null(b->branch), "commit",
					    text_or_null(b->published)));
	json_object_set_new(o, "abi_report", report ? report : json_null());
	json_object_set_new(o, "force", json_boolean(b->force));
	json_object_set_new(o, "requested_by", text_or_null(b->requested_by));
	json_object_set_new(o, "log_length", json_integer((json_int_t)b->log_length));
	json_object_set_new(o, "note", text_or_null(b->note));
	json_object_set_new(o, "kind", json_string(b->benchmark ? "benchmark" : "build"));
	json_object_set_new(o, "superseded_by", b->superseded_by ? json_integer(b->superseded_by) : json_null());
	if (b->benchmark) {	/* sql/0040_benchmark_jobs.sql */
		json_object_set_new(o, "device", text_or_null(b->device));
		json_object_set_new(o, "variant_commit", text_or_null(b->variant_commit));
	}
	return o;
}

json_t *build_job_json(const struct build_row *b)
{
	char repo[2 * REPO_NAME_MAX + 2];
	const struct farm_settings *s = &farm_settings;
	snprintf(repo, sizeof(repo), "%s/%s", b->ns, b->name);
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}, s:s?}", "id",
			 (json_int_t)b->id, "repo", repo, "repo_type", "kernel", "commit", b->commit, "variant",
			 b->variant, "attempt", (json_int_t)b->attempt, "max_attempts", (json_int_t)b->max_attempts,
			 "lease_seconds", (json_int_t)s->lease_seconds, "heartbeat_seconds",
			 (json_int_t)s->heartbeat_seconds, "limits", "wall_seconds", (json_int_t)s->wall_seconds,
			 "cpu_seconds", (json_int_t)s->cpu_seconds, "memory_mb", (json_int_t)s->memory_mb, "disk_mb",
			 (json_int_t)s->disk_mb, "abi_manylinux", s->abi_manylinux);
	if (o && b->benchmark)	/* the worker measures it on device, from variant_commit's build/<variant>/ */
		json_object_update_new(o, json_pack("{s:s, s:s?, s:s?}", "kind", "benchmark", "device", b->device,
						    "variant_commit", b->variant_commit));
	return o;
}

/* WORKER of GET /api/admin/workers. */
json_t *build_worker_json(const struct worker_row *wr)
{
	json_t *caps = json_loads(wr->capabilities, 0, NULL);
	json_t *variants = json_loads(wr->variants, 0, NULL);
	json_t *jobs = json_loads(wr->jobs, 0, NULL);
	json_t *orgs = json_loads(wr->scope_orgs, 0, NULL);
	json_t *repos = json_loads(wr->scope_repos, 0, NULL);
	json_t *w = json_pack("{s:s, s:s, s:I, s:o, s:o, s:o, s:s}", "name", wr->name, "version", wr->version,
			      "concurrency", (json_int_t)wr->concurrency, "toolchains", caps ? caps : json_array(),
			      "variants", variants ? variants : json_array(), "jobs", jobs ? jobs : json_array(),
			      "token_prefix", wr->token_prefix);
	json_object_set_new(w, "scope", json_pack("{s:o, s:o, s:b}", "orgs", orgs ? orgs : json_array(), "repos",
						  repos ? repos : json_array(), "private", wr->scope_private));
	json_object_set_new(w, "created_at", text_or_null(wr->created));
	json_object_set_new(w, "registered_at", text_or_null(wr->registered));
	json_object_set_new(w, "last_heartbeat", text_or_null(wr->heartbeat));
	return w;
}
