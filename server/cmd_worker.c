/* cmd_worker.c -- khub admin worker add|remove|list: build farm workers
 * and their tokens (scope "worker"). */
#include "server/server.h"
#include "storage/db_builds.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The end of `worker VERB NAME`, whose change returned rc: -1 having said
 * why it failed (expected_why for the expected error), or 0 having written
 * it to the audit log as worker.VERB. */
static int worker_changed(const char *verb, const char *name, int rc, int expected, const char *expected_why)
{
	if (rc < 0) {
		fprintf(stderr, "khub admin: worker %s %s: %s\n", verb, name, rc == expected ? expected_why : khub_strerror(rc));
		return -1;
	}
	char *action = xasprintf("worker.%s", verb);
	db_audit(0, "cli", action, name, NULL, "local");
	free(action);
	return 0;
}

int admin_worker(int argc, char **argv)
{
	const char *verb = argc >= 3 ? argv[2] : "";
	if (strcmp(verb, "list") == 0) {
		struct db_rows rows;
		if (db_worker_list(&rows) < 0) {
			fprintf(stderr, "khub admin: worker list: %s\n", khub_strerror(KHUB_EDB));
			return 1;
		}
		for (size_t i = 0; i < rows.count; i++)
			printf("%s\t%s…\tversion %s\tconcurrency %s\tlast heartbeat %s\tvariants %s\tjobs %s\n",
			       db_rows_get(&rows, i, WORKER_COL_NAME), db_rows_get(&rows, i, WORKER_COL_TOKEN_PREFIX),
			       db_rows_get(&rows, i, WORKER_COL_VERSION)[0] ? db_rows_get(&rows, i, WORKER_COL_VERSION) : "-",
			       db_rows_get(&rows, i, WORKER_COL_CONCURRENCY),
			       db_rows_isnull(&rows, i, WORKER_COL_HEARTBEAT) ? "never" : db_rows_get(&rows, i, WORKER_COL_HEARTBEAT),
			       db_rows_get(&rows, i, WORKER_COL_VARIANTS), db_rows_get(&rows, i, WORKER_COL_JOBS));
		db_rows_release(&rows);
		return 0;
	}
	if (argc < 4 || (strcmp(verb, "add") != 0 && strcmp(verb, "remove") != 0)) {
		fprintf(stderr, "usage: khub admin worker add NAME | remove NAME | list\n");
		return 2;
	}
	const char *name = argv[3], *why;
	if (repo_name_validate(name, &why) < 0) {
		fprintf(stderr, "khub admin: invalid worker name '%s': %s\n", name, why);
		return 2;
	}
	if (strcmp(verb, "remove") == 0) {
		if (worker_changed(verb, name, db_worker_remove(name), KHUB_ENOTFOUND, "no such worker") < 0)
			return 1;
		printf("worker %s removed (its token no longer works)\n", name);
		return 0;
	}
	char *token = NULL;
	int64_t id;
	if (worker_changed(verb, name, db_worker_create(name, "cli", &token, &id), KHUB_EEXIST,
			   "a worker of that name exists") < 0)
		return 1;
	printf("%s\n", token);
	fprintf(stderr, "worker %s (id %" PRId64 "): keep the token above, it is shown once\n", name, id);
	free(token);
	return 0;
}
