/* options.c -- khub-worker's command lines as tables: one row per option
 * (name, argument, where it goes, bounds, help) drives getopt_long, the
 * checks of each value and the --help text of every subcommand. */
#include "builder-worker/worker.h"
#include "common/common.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int worker_parse_number(const char *s, const char *flag, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "khub-worker: %s wants a number from %ld to %ld\n", flag, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* A decimal id of --build-user at *p (digits only, 1 to 0x7fffffff): 0
 * with *p past it, or -1. */
static int parse_id(const char **p, long *out)
{
	char *end;
	if (!isdigit((unsigned char)**p))
		return -1;
	errno = 0;
	long v = strtol(*p, &end, 10);
	if (errno || v <= 0 || v > 0x7fffffffL)
		return -1;
	*out = v;
	*p = end;
	return 0;
}

int worker_parse_build_users(const char *s, struct build_users *u)
{
	const char *p = s;
	struct build_users v = { 0 };
	int bad = parse_id(&p, &v.uid) < 0;
	v.last = v.uid;
	if (!bad && *p == '-') {
		p++;
		bad = parse_id(&p, &v.last) < 0 || v.last < v.uid;
	}
	if (!bad && *p == ':') {
		p++;
		bad = parse_id(&p, &v.gid) < 0;
	}
	if (bad || *p) {
		fprintf(stderr, "khub-worker: --build-user wants UID[-LAST][:GID]: numbers, LAST not below UID, "
			"none 0 (root)\n");
		return -1;
	}
	*u = v;
	return 0;
}

int worker_option_build_users(const char *arg, void *field)
{
	return worker_parse_build_users(arg, field);
}

void build_users_slot(const struct build_users *u, int slot, long *uid, long *gid)
{
	assert(slot >= 0 && u->uid + slot <= u->last);
	*uid = u->uid + slot;
	*gid = u->gid ? u->gid : u->uid;	/* one group: their builds share a repo's cache */
}

int worker_parse_build_user(const char *s, long *uid, long *gid)
{
	struct build_users u;
	if (worker_parse_build_users(s, &u) < 0)
		return -1;
	if (u.last != u.uid) {
		fprintf(stderr, "khub-worker: --build-user of one build wants UID or UID:GID, not a range (the "
			"daemon takes UID-LAST: a uid per build at once)\n");
		return -1;
	}
	build_users_slot(&u, 0, uid, gid);
	return 0;
}

int worker_option_build_user(const char *arg, void *field)
{
	long *ids = field;	/* uid, then gid */
	return worker_parse_build_user(arg, &ids[0], &ids[1]);
}

/* One value into its field: 0, or -1 after saying why on stderr. */
static int option_set(const struct worker_option *o, const char *arg, void *opts)
{
	void *field = (char *)opts + o->offset;
	char flag[80];
	long v;
	snprintf(flag, sizeof(flag), "--%s", o->name);
	switch (o->kind) {
	case WOPT_STRING:
		*(const char **)field = arg;
		return 0;
	case WOPT_LIST:
		strvec_pushf(field, "%s", arg);
		return 0;
	case WOPT_FLAG:
		*(int *)field = 1;
		return 0;
	case WOPT_LONG:
		return worker_parse_number(arg, flag, o->min, o->max, (long *)field);
	case WOPT_INT:
		if (worker_parse_number(arg, flag, o->min, o->max, &v) < 0)
			return -1;
		*(int *)field = (int)v;
		return 0;
	case WOPT_CALL:
		return o->parse(arg, field);
	case WOPT_HELP:
		break;
	}
	return 0;
}

static size_t option_count(const struct worker_command *cmd)
{
	size_t n = 0;
	while (cmd->options[n].name)
		n++;
	return n;
}

/* The options named required that argv left out: 1 when one is. */
static int missing_required(const struct worker_command *cmd, const unsigned char *seen)
{
	for (size_t i = 0; cmd->options[i].name; i++)
		if (cmd->options[i].required && !seen[i])
			return 1;
	return 0;
}

int worker_options_parse(const struct worker_command *cmd, int argc, char **argv, void *opts)
{
	size_t n = option_count(cmd);
	struct option *longopts = xcalloc(n + 1, sizeof(*longopts));
	unsigned char *seen = xcalloc(n + 1, 1);
	for (size_t i = 0; i < n; i++) {
		longopts[i].name = cmd->options[i].name;
		longopts[i].has_arg = cmd->options[i].arg ? required_argument : no_argument;
		longopts[i].val = 256 + (int)i;
	}
	int c, rc = 0;
	optind = 1;
	while (rc == 0 && (c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c < 256 || c >= 256 + (int)n) {
			rc = WORKER_OPTIONS_USAGE;	/* getopt said what */
			break;
		}
		const struct worker_option *o = &cmd->options[c - 256];
		seen[c - 256] = 1;
		if (o->kind == WOPT_HELP)
			rc = WORKER_OPTIONS_HELP;
		else if (option_set(o, optarg, opts) < 0)
			rc = WORKER_OPTIONS_BAD_VALUE;
	}
	if (rc == 0 && optind < argc) {
		fprintf(stderr, "khub-worker: unexpected argument '%s'\n", argv[optind]);
		rc = WORKER_OPTIONS_USAGE;
	}
	if (rc == 0 && missing_required(cmd, seen))
		rc = WORKER_OPTIONS_USAGE;
	free(longopts);
	free(seen);
	return rc;
}

void worker_options_usage(const struct worker_command *cmd, FILE *fp)
{
	fprintf(fp, "%s\n", cmd->synopsis);
	for (size_t i = 0; cmd->options[i].name; i++) {
		const struct worker_option *o = &cmd->options[i];
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(fp, "  %-22s %s", left, o->help);
		if ((o->kind == WOPT_LONG || o->kind == WOPT_INT) && o->max != LONG_MAX)
			fprintf(fp, " (%ld to %ld)", o->min, o->max);
		fprintf(fp, "%s\n", o->required ? " (required)" : "");
	}
	if (cmd->epilogue)
		fprintf(fp, "%s", cmd->epilogue);
}
