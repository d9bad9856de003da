/* accounts.c -- account changes, one implementation each: validate, the
 * policy, the storage write and the audit entry (accounts/accounts.h). */
#include "accounts/accounts.h"
#include "farm/farm.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void accounts_audit(const struct accounts_actor *who, const char *action, const char *target, json_t *details)
{
	const struct principal *p = who->principal;
	char *text = details ? json_dumps(details, JSON_COMPACT) : NULL;
	const char *actor = !p ? "cli" : p->user_id ? p->name : "anonymous";
	if (db_audit(p ? p->user_id : 0, actor, action, target, text, who->remote_addr ? who->remote_addr : "local") < 0)
		log_error("audit: cannot record %s %s", action, target);
	free(text);
	json_decref(details);
}

/* The refusal rc with its sentence in *why. */
static int refuse(int rc, const char *sentence, const char **why)
{
	*why = sentence;
	return rc;
}

/* Site-wide changes (trust, workers): the CLI, or a site admin whose
 * token has admin scope. */
static int site_admin_may(const struct accounts_actor *who)
{
	const struct principal *p = who->principal;
	return !p || (p->user_id && p->is_site_admin && p->scope >= ROLE_ADMIN);
}

int accounts_create(const struct accounts_actor *who, enum account_kind kind, const char *name,
		    const char *fullname, int site_admin, int64_t *id, const char **why)
{
	*why = NULL;
	if (who->principal && (!who->principal->is_site_admin || (site_admin && kind == ACCOUNT_USER)))
		return refuse(KHUB_EPERM, "only a site admin creates accounts (site admins from the command line)", why);
	if (repo_name_validate(name, why) < 0)
		return KHUB_EINVAL;
	int64_t created = 0;
	int rc = db_account_create(kind, name, fullname ? fullname : name, kind == ACCOUNT_USER && site_admin,
				   &created);
	if (rc == KHUB_EEXIST)
		return refuse(rc, "the name is taken", why);
	if (rc < 0)
		return rc;
	accounts_audit(who, kind == ACCOUNT_ORG ? "org.create" : "user.create", name,
	      kind == ACCOUNT_USER ? json_pack("{s:b}", "siteAdmin", site_admin) : NULL);
	if (id)
		*id = created;
	return 0;
}

int accounts_mirror_org_ensure(const char *name)
{
	int rc = db_account_create(ACCOUNT_ORG, name, name, 0, NULL);
	return rc == KHUB_EEXIST ? 0 : rc;
}

/* May who change org's memberships? 0, KHUB_EPERM or KHUB_EDB. */
static int member_policy(const struct accounts_actor *who, const struct account *org)
{
	const struct principal *p = who->principal;
	enum role role = ROLE_NONE;
	if (!p)
		return 0;
	if (p->user_id && p->is_site_admin)
		role = ROLE_ADMIN;
	else if (p->user_id && db_membership_role(org->id, p->user_id, &role) < 0)
		return KHUB_EDB;
	/* as on the Hub, a read token only reads */
	return role == ROLE_ADMIN && p->scope > ROLE_READ ? 0 : KHUB_EPERM;
}

int accounts_member_set(const struct accounts_actor *who, const char *org, const char *user, enum role role,
			const char **why)
{
	struct account o, u;
	enum role before = ROLE_NONE;
	*why = NULL;
	int rc = db_account_get(org, &o);
	if (rc == KHUB_ENOTFOUND || (rc == 0 && o.kind != ACCOUNT_ORG))
		return refuse(KHUB_ENOTFOUND, "no such organization", why);
	if (rc < 0)
		return rc;
	if ((rc = member_policy(who, &o)) < 0)
		return rc == KHUB_EPERM ? refuse(rc, "only the organization's admins (with a write token) change roles",
						 why) : rc;
	rc = db_account_get(user, &u);
	if (rc == KHUB_ENOTFOUND || (rc == 0 && u.kind != ACCOUNT_USER))
		return refuse(KHUB_EINVAL, "no such user", why);
	if (rc < 0)
		return rc;
	rc = db_membership_set(o.name, u.name, role, &before);
	if (rc == KHUB_ECONFLICT)
		return refuse(rc, "that would leave the organization without an admin: make another member admin first",
			      why);
	if (rc < 0)
		return rc;
	accounts_audit(who, "org.member.set", o.name,
	      json_pack("{s:s, s:s, s:s}", "user", u.name, "role", role_name(role), "before", role_name(before)));
	return 0;
}

int accounts_member_role_parse(const char *text, enum role *role)
{
	*role = ROLE_NONE;
	if (!text)
		return -1;
	return strcmp(text, "none") == 0 ? 0 : role_parse(text, role);
}

int accounts_token_create(const struct accounts_actor *who, const char *user, const char *name, enum role scope,
			  time_t expires, char **token, int64_t *id, const char **why)
{
	const struct principal *p = who->principal;
	*why = NULL;
	*token = NULL;
	if (!name)
		name = "cli";
	if (!name[0] || strlen(name) > 60)
		return refuse(KHUB_EINVAL, "a token's name has 1 to 60 characters", why);
	if (p && (!p->user_id || strcasecmp(p->name, user) != 0))
		return refuse(KHUB_EPERM, "a signed-in user creates tokens for herself only", why);
	/* a session never mints more than the token it was opened with */
	if (p && scope > p->scope)
		return refuse(KHUB_EPERM, "a token cannot create a token with more scope than its own (you signed in "
					  "with a read token: it cannot create a write token)", why);
	int64_t token_id = 0;
	int rc = db_token_create(user, name, scope, expires, token, &token_id);
	if (rc == KHUB_ENOTFOUND || rc == KHUB_EINVAL)
		return refuse(KHUB_ENOTFOUND, "no such user", why);
	if (rc < 0)
		return rc;
	accounts_audit(who, "token.create", user, json_pack("{s:I, s:s}", "token_id", (json_int_t)token_id, "scope",
						    role_name(scope)));
	if (id)
		*id = token_id;
	return 0;
}

int accounts_token_revoke(const struct accounts_actor *who, int64_t id, char owner[REPO_NAME_MAX + 1],
			  const char **why)
{
	const struct principal *p = who->principal;
	char name[REPO_NAME_MAX + 1] = "";
	*why = NULL;
	if (p && !p->user_id)
		return refuse(KHUB_EPERM, "sign in to revoke a token", why);
	int rc = db_token_revoke(id, p ? p->name : NULL, name);
	if (rc == KHUB_ENOTFOUND)
		return refuse(rc, p ? "no such token of yours" : "no such token", why);
	if (rc == KHUB_EEXIST)
		return refuse(rc, "the token was revoked before", why);
	if (rc < 0)
		return rc;
	accounts_audit(who, "token.revoke", name, json_pack("{s:I}", "token_id", (json_int_t)id));
	if (owner)
		snprintf(owner, REPO_NAME_MAX + 1, "%s", name);
	return 0;
}

int accounts_trust_set(const struct accounts_actor *who, const char *name, int trusted, struct account *out,
		       int *changed, const char **why)
{
	struct account acct;
	int was_changed = 0;
	*why = NULL;
	if (!site_admin_may(who))
		return refuse(KHUB_EPERM, "changing trusted publishers needs a site admin's token with admin scope", why);
	int rc = db_trusted_publisher_set(name, trusted, who->principal ? who->principal->name : "cli", &acct,
					  &was_changed);
	if (rc == KHUB_ENOTFOUND)
		return refuse(rc, "no user or organization of that name", why);
	if (rc < 0)
		return rc;
	accounts_audit(who, trusted ? "trust.set" : "trust.unset", acct.name,
	      json_pack("{s:b, s:b}", "before", was_changed ? !trusted : trusted, "after", trusted));
	if (out)
		*out = acct;
	if (changed)
		*changed = was_changed;
	return 0;
}

/* A worker's scope as audit details. */
static json_t *scope_details(const struct worker_scope *scope)
{
	json_t *orgs = json_array(), *repos = json_array();
	for (size_t i = 0; i < scope->orgs.count; i++)
		json_array_append_new(orgs, json_string(scope->orgs.items[i]));
	for (size_t i = 0; i < scope->repos.count; i++)
		json_array_append_new(repos, json_string(scope->repos.items[i]));
	return json_pack("{s:o, s:o, s:b}", "orgs", orgs, "repos", repos, "private", scope->private_repos);
}

/* The end of a worker change: its refusal, or the audit entry (details
 * consumed either way). */
static int worker_changed(const struct accounts_actor *who, const char *verb, const char *name, int rc,
			  json_t *details, const char **why)
{
	if (rc < 0) {
		json_decref(details);
		if (rc == KHUB_EEXIST)
			return refuse(rc, "a worker of that name exists", why);
		return rc == KHUB_ENOTFOUND ? refuse(rc, "no such worker", why) : rc;
	}
	char *action = xasprintf("worker.%s", verb);
	accounts_audit(who, action, name, details);
	free(action);
	return 0;
}

/* Workers are the CLI's or a site admin's (with an admin-scoped token). */
static int worker_policy(const struct accounts_actor *who, const char **why)
{
	*why = NULL;
	return site_admin_may(who) ? 0 : refuse(KHUB_EPERM, "changing build workers needs a site admin's token with "
							   "admin scope", why);
}

int accounts_worker_add(const struct accounts_actor *who, const char *name, const struct worker_scope *scope,
			char **token, int64_t *id, const char **why)
{
	*token = NULL;
	int rc = worker_policy(who, why);
	if (rc < 0)
		return rc;
	rc = db_worker_create(name, who->principal ? who->principal->name : "cli", scope, token, id);
	return worker_changed(who, "add", name, rc, scope_details(scope), why);
}

/* Jobs a change left outside some worker's scope go back to the queue now
 * (the server would at its next lease check anyway). */
static void take_back_jobs(int *taken_back)
{
	int n = build_jobs_take_back();	/* the farm owns a job's state */
	if (taken_back)
		*taken_back = n > 0 ? n : 0;
}

int accounts_worker_scope(const struct accounts_actor *who, const char *name, const struct worker_scope *scope,
			  int *taken_back, const char **why)
{
	int rc = worker_policy(who, why);
	if (rc < 0)
		return rc;
	rc = worker_changed(who, "scope", name, db_worker_set_scope(name, scope), scope_details(scope), why);
	if (rc == 0)
		take_back_jobs(taken_back);
	return rc;
}

int accounts_worker_rotate(const struct accounts_actor *who, const char *name, char **token, const char **why)
{
	*token = NULL;
	int rc = worker_policy(who, why);
	return rc < 0 ? rc : worker_changed(who, "rotate", name, db_worker_rotate(name, token), NULL, why);
}

int accounts_worker_remove(const struct accounts_actor *who, const char *name, int *taken_back,
			   const char **why)
{
	int rc = worker_policy(who, why);
	if (rc < 0)
		return rc;
	rc = worker_changed(who, "remove", name, db_worker_remove(name), NULL, why);
	if (rc == 0)
		take_back_jobs(taken_back);
	return rc;
}
