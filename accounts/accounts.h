/* accounts.h -- the one accounts layer: users, orgs, memberships (with the
 * last-admin rule), tokens, trusted publishers and build workers. The API,
 * the web UI and `khub admin` all call these; each validates, applies the
 * policy, writes through storage/ and writes one audit entry in the
 * vocabulary of docs/operations.md ("Audit log"). Nothing else writes those
 * tables (t0236). No HTTP here: results are values and khub_err. */
#ifndef KHUB_ACCOUNTS_H
#define KHUB_ACCOUNTS_H

#include "common/common.h"
#include "storage/db/db.h"
#include "storage/db/db_builds.h"

#include <jansson.h>

/* Who asks for a change. principal NULL: the command line (`khub admin`),
 * which may do everything and is audited as "cli" from "local". Borrowed. */
struct accounts_actor {
	const struct principal *principal;
	const char *remote_addr;
};
#define ACCOUNTS_CLI { NULL, "local" }

/* Every operation returns 0 or a negative khub_err, and on a refusal sets
 * *why to a static sentence for the user (NULL for KHUB_EDB and KHUB_EIO):
 *   KHUB_EINVAL    bad input (400, exit 2 where the CLI says usage)
 *   KHUB_EPERM     the actor may not (403)
 *   KHUB_ENOTFOUND no such account, org, token or worker (404)
 *   KHUB_EEXIST    the name is taken, the token already revoked
 *   KHUB_ECONFLICT the change would leave an org without an admin (409)
 *   KHUB_EDB       the database failed (503)
 * A refused call writes nothing; an accepted one is audited once. */

/* A user or an org (fullname NULL: the name); *id when not NULL. A site
 * admin user only from the command line. Audited user.create/org.create. */
int accounts_create(const struct accounts_actor *who, enum account_kind kind, const char *name,
		    const char *fullname, int site_admin, int64_t *id, const char **why);

/* The namespace of a mirrored repo as an org, created when missing (the
 * mirror's own repo.create entry records it; no audit entry here). */
int accounts_mirror_org_ensure(const char *name);

/* Set user's role in org (ROLE_NONE takes the user out). An org's admin
 * (through a token above read), a site admin or the CLI may. Refused with
 * KHUB_ECONFLICT when it would take away the org's only admin. Audited
 * org.member.set with {"user", "role", "before"}. */
int accounts_member_set(const struct accounts_actor *who, const char *org, const char *user, enum role role,
			const char **why);
/* A member's role as the API, the web UI and the CLI take it: "read",
 * "write", "admin" or "none" (ROLE_NONE: take the user out). 0 or -1. */
int accounts_member_role_parse(const char *text, enum role *role);

/* A token for user (a signed-in actor: for herself, at most the scope of
 * the token she signed in with). name NULL: "cli". expires 0: never. The
 * caller frees *token. Audited token.create with {"token_id", "scope"}. */
int accounts_token_create(const struct accounts_actor *who, const char *user, const char *name, enum role scope,
			  time_t expires, char **token, int64_t *id, const char **why);
/* Revoke token id (a signed-in actor: one of her own), its owner's name in
 * owner (may be NULL). Audited token.revoke with {"token_id"}. */
int accounts_token_revoke(const struct accounts_actor *who, int64_t id, char owner[REPO_NAME_MAX + 1],
			  const char **why);

/* Set or clear name's trusted-kernel-publisher flag: a site admin through
 * an admin-scoped token, or the CLI. The account after it in *out (may be
 * NULL), *changed (may be NULL) 0 when it already was so. Audited
 * trust.set/trust.unset, changed or not, with {"before", "after"}. */
int accounts_trust_set(const struct accounts_actor *who, const char *name, int trusted, struct account *out,
		       int *changed, const char **why);

/* Build workers (the CLI only today). add fills *token (the caller frees
 * it) and *id; rotate fills *token. scope and remove take back the running
 * jobs the change leaves out of scope, their number in *taken_back (may be
 * NULL). Audited worker.add/worker.scope with the scope as {"orgs",
 * "repos", "private"}, worker.rotate and worker.remove without details. */
int accounts_worker_add(const struct accounts_actor *who, const char *name, const struct worker_scope *scope,
			char **token, int64_t *id, const char **why);
int accounts_worker_scope(const struct accounts_actor *who, const char *name, const struct worker_scope *scope,
			  int *taken_back, const char **why);
int accounts_worker_rotate(const struct accounts_actor *who, const char *name, char **token, const char **why);
int accounts_worker_remove(const struct accounts_actor *who, const char *name, int *taken_back,
			   const char **why);

/* One audit entry of an accepted change by who: action on target, details
 * (consumed; may be NULL) as compact JSON. A failure to record is logged. */
void accounts_audit(const struct accounts_actor *who, const char *action, const char *target, json_t *details);

/* ---- a repo's settings (accounts/repo_settings.c) ---------------------------
 * The one owner of the rule: storage's table (storage/db/db.h,
 * repo_settings_table) says what each setting is, who may change it and
 * its audit action; the API, the web UI's form and the CLI call these. */

/* The settings a request gives: the values in want of the rows whose
 * REPO_SETTING_BIT is in set. */
struct repo_settings_change {
	unsigned set;
	struct repo_settings want;
};
/* doc's settings, by the table's JSON keys (absent or null: left as they
 * are; other keys ignored), checked against their rows in table order: 0,
 * or KHUB_EINVAL with the first bad row's sentence in *why (static). */
int accounts_repo_settings_from_json(json_t *doc, struct repo_settings_change *change, const char **why);
/* Apply change to repo, all or nothing. role: who's role on the repo with
 * the token's scope applied (ignored for the CLI); every changed row's
 * `who` must allow it (KHUB_EPERM). One audit entry per setting whose
 * value changed ({key: new value}, the row's action: docs/operations.md).
 * *after: every setting after it. 0, KHUB_EPERM, KHUB_EINVAL,
 * KHUB_ENOTFOUND or KHUB_EDB, with a sentence in *why (static; NULL for
 * KHUB_EDB). */
int accounts_repo_settings_set(const struct accounts_actor *who, const struct repo_record *repo, enum role role,
			       const struct repo_settings_change *change, struct repo_settings *after,
			       const char **why);
/* A form's text as setting id's JSON value (new reference): a BOOL's
 * "true"/"false", an INT's digits; any other text stays a string, which
 * accounts_repo_settings_from_json refuses where the row wants no string. */
json_t *accounts_repo_setting_from_text(enum repo_setting_id id, const char *text);
/* Setting id's value in s as JSON (new reference). */
json_t *accounts_repo_setting_value(enum repo_setting_id id, const struct repo_settings *s);
/* The settings of s as a JSON object in table order (new reference):
 * answered_only: the rows PUT …/settings answers, a kernels-only boolean
 * false for a repo that is not a kernel. */
json_t *accounts_repo_settings_json(const struct repo_settings *s, int answered_only);

#endif
