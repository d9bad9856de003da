/* build_output.h -- a build's output tar between its check
 * (api/build_output.c) and its publication (api/build_publish.c). */
#ifndef KHUB_API_BUILD_OUTPUT_H
#define KHUB_API_BUILD_OUTPUT_H

#include <archive.h>
#include <archive_entry.h>

#include "api/builds.h"

/* What the check read from a tar; strings owned. */
struct build_output {
	size_t entries, files;		/* files under <variant>/ */
	char *metadata;			/* <variant>/metadata.json */
	size_t metadata_len;
	long version;			/* its version: the branch v<version> */
	char *report_text;		/* abi-report.json, NULL when absent */
	json_t *report;
	char *readme;			/* README.md, NULL when absent */
	size_t readme_len;
};
void build_output_release(struct build_output *out);	/* accepts NULL */

/* Check the tar at path for the job's variant: every member a regular file
 * or directory under <variant>/, or abi-report.json or README.md; paths
 * clean; sizes bounded; <variant>/metadata.json valid with an integer
 * version (equal to build.toml's [general] version when build_toml says
 * one). 0, or KHUB_EINVAL with the reason in why. */
int build_output_check(const char *path, const char *variant, const char *build_toml, struct build_output *out,
		       char *why, size_t why_size);
/* Helpers shared with the publication: open the tar, clean a member's
 * name (NULL when refused), read a member whole (NULL when over limit). */
int build_output_open(const char *path, struct archive **out);
char *build_output_clean_path(const char *raw);
char *build_output_read_member(struct archive *ar, int64_t size, size_t limit, size_t *len);

/* The background job of one output (owned by the work queue). */
struct build_publish_job {
	int64_t id, worker_id;
	char worker[REPO_NAME_MAX + 1];
	char *path;			/* the spooled tar; NULL for a request that joins */
};
/* Check and publish (work_fn): ends the job succeeded or failed in the
 * database; returns 0, or a negative error when the job could not be
 * ended (its state stays running). */
int build_publish_run(void *arg);

#endif
