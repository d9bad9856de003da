/* db_accounts.c -- users, orgs, memberships, tokens and the audit log. */
#include "storage/db/db_internal.h"
#include "storage/db/db_builds.h"

#include <stdlib.h>
#include <string.h>

static const char *const role_names[] = { "none", "read", "write", "admin" };

const char *role_name(enum role role)
{
	return role_names[role];
}

int role_parse(const char *s, enum role *out)
{
	for (int r = ROLE_READ; r <= ROLE_ADMIN; r++)
		if (strcmp(s, role_names[r]) == 0) {
			*out = (enum role)r;
			return 0;
		}
	return KHUB_EINVAL;
}

static int64_t parse_i64(const char *s)
{
	return strtoll(s, NULL, 10);
}

int db_account_get(const char *name, struct account *out)
{
	const char *params[1] = { name };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT id, kind, name, fullname, is_site_admin, trusted_kernel_publisher,"
			      " extract(epoch FROM created_at)::bigint FROM accounts WHERE lower(name) = lower($1)",
			      1, params);
	if (rc < 0)
		return rc;
	out->kind = strcmp(db_rows_get(&rows, 0, 1), "org") == 0 ? ACCOUNT_ORG : ACCOUNT_USER;
	db_rows_read(&rows, 0, DB_FIELDS(DB_I64(0, &out->id), DB_TEXT(2, out->name, sizeof(out->name)),
					 DB_TEXT(3, out->fullname, sizeof(out->fullname)), DB_BOOL(4, &out->is_site_admin),
					 DB_BOOL(5, &out->trusted_kernel_publisher), DB_TIME(6, &out->created_at)));
	db_rows_release(&rows);
	return 0;
}

int db_account_create(enum account_kind kind, const char *name, const char *fullname,
		      int is_site_admin, int64_t *id)
{
	const char *why;
	if (repo_name_validate(name, &why) < 0)
		return KHUB_EINVAL;
	const char *params[4] = { kind == ACCOUNT_ORG ? "org" : "user", name, fullname ? fullname : "",
				  is_site_admin ? "true" : "false" };
	const char *state = NULL;
	PGresult *res = db_exec("INSERT INTO accounts (kind, name, fullname, is_site_admin)"
				" VALUES ($1, $2, $3, $4) RETURNING id", 4, params, &state);
	if (!res)
		return state && strcmp(state, "23505") == 0 ? KHUB_EEXIST : KHUB_EDB;
	if (id)
		*id = parse_i64(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/* Would taking user_id out of org_id's admins leave it with none? Under
 * the org row's lock (held by the caller's transaction): 1, 0 or KHUB_EDB. */
static int last_admin(const char *oid, const char *uid)
{
	const char *params[2] = { oid, uid };
	PGresult *res = db_exec("SELECT EXISTS (SELECT 1 FROM memberships WHERE org_id = $1 AND user_id = $2"
				"  AND role = 'admin') AND NOT EXISTS (SELECT 1 FROM memberships WHERE org_id = $1"
				"  AND user_id <> $2 AND role = 'admin')", 2, params, NULL);
	if (!res)
		return KHUB_EDB;
	int last = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return last;
}

/* The write of db_membership_set, in its transaction. */
static int membership_write(const char *oid, const char *uid, enum role role)
{
	const char *params[3] = { oid, uid, role_name(role) };
	int rc = db_run("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE", 1, params);
	if (rc < 0)
		return rc;
	if (role != ROLE_ADMIN && (rc = last_admin(oid, uid)) != 0)
		return rc < 0 ? rc : KHUB_ECONFLICT;
	if (role == ROLE_NONE)
		return db_run("DELETE FROM memberships WHERE org_id = $1 AND user_id = $2", 2, params);
	return db_run("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)"
		      " ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role", 3, params);
}

int db_membership_set(const char *org, const char *user, enum role role, enum role *before)
{
	struct account o, u;
	int rc;
	if ((rc = db_account_get(org, &o)) < 0 || (rc = db_account_get(user, &u)) < 0)
		return rc;
	if (o.kind != ACCOUNT_ORG || u.kind != ACCOUNT_USER)
		return KHUB_EINVAL;
	char oid[24], uid[24];
	db_param_int(oid, o.id);
	db_param_int(uid, u.id);
	if ((rc = db_tx_begin()) < 0)
		return rc;
	if ((rc = db_membership_role(o.id, u.id, before)) == 0)
		rc = membership_write(oid, uid, role);
	if (rc == 0)
		return db_tx_commit();
	db_tx_rollback();
	return rc;
}

int db_membership_role(int64_t org_id, int64_t user_id, enum role *out)
{
	char oid[24], uid[24];
	const char *params[2] = { db_param_int(oid, org_id), db_param_int(uid, user_id) };
	PGresult *res = db_exec("SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2",
				2, params, NULL);
	*out = ROLE_NONE;
	if (!res)
		return KHUB_EDB;
	if (PQntuples(res) == 1)
		role_parse(PQgetvalue(res, 0, 0), out);
	PQclear(res);
	return 0;
}

int db_token_create(const char *user, const char *name, enum role scope, time_t expires_at,
		    char **token, int64_t *token_id)
{
	struct account acct;
	char secret[3 + 34 + 1], hash[65], uid[24], expires[32];
	int rc;

	if ((rc = db_account_get(user, &acct)) < 0)
		return rc;
	if (acct.kind != ACCOUNT_USER)
		return KHUB_EINVAL;
	if (db_token_secret("hf_", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 34, secret, hash) < 0)
		return KHUB_EIO;
	char prefix[8];
	snprintf(prefix, sizeof(prefix), "%.7s", secret);
	const char *params[6] = { db_param_int(uid, acct.id), name ? name : "", hash, prefix, role_name(scope),
				  expires_at ? db_param_int(expires, expires_at) : NULL };
	PGresult *res = db_exec("INSERT INTO tokens (user_id, name, token_sha256, token_prefix, scope, expires_at)"
				" VALUES ($1, $2, $3, $4, $5, to_timestamp($6::bigint)) RETURNING id",
				6, params, NULL);
	if (!res)
		return KHUB_EDB;
	if (token_id)
		*token_id = parse_i64(PQgetvalue(res, 0, 0));
	PQclear(res);
	*token = xstrdup(secret);
	return 0;
}

void db_principal_from_row(const struct db_rows *rows, struct principal *out)
{
	memset(out, 0, sizeof(*out));
	db_rows_read(rows, 0, DB_FIELDS(DB_I64(0, &out->token_id), DB_I64(1, &out->user_id),
					DB_TEXT(2, out->name, sizeof(out->name)), DB_BOOL(3, &out->is_site_admin),
					DB_TEXT(5, out->token_name, sizeof(out->token_name)),
					DB_TIME(6, &out->token_created_at), DB_TIME(7, &out->token_expires_at)));
	role_parse(db_rows_get(rows, 0, 4), &out->scope);
}

int db_token_lookup(const char *token, struct principal *out)
{
	char hash[65];
	sha256_hex(token, strlen(token), hash);
	const char *params[1] = { hash };
	struct db_rows rows;
	int rc = db_query_one(&rows, "SELECT " PRINCIPAL_COLUMNS " FROM tokens t JOIN accounts a ON a.id = t.user_id"
			      " WHERE t.token_sha256 = $1 AND " TOKEN_USABLE, 1, params);
	if (rc == 0) {
		db_principal_from_row(&rows, out);
		db_token_touch(out->token_id);
	}
	db_rows_release(&rows);
	if (rc == KHUB_ENOTFOUND && strncmp(token, "khw_", 4) == 0)
		rc = db_worker_token_lookup(token, out);	/* a build worker's */
	return rc;
}

void db_token_touch(int64_t token_id)
{
	char id[24];
	const char *params[1] = { db_param_int(id, token_id) };
	/* lookups are cached (auth.c) and this is throttled: a write a minute
	 * per token at most, never one per request */
	if (db_run("UPDATE tokens SET last_used_at = now() WHERE id = $1"
		   " AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')", 1, params) < 0)
		log_warn("cannot record the use of token %s", id);
}

int db_token_revoke(int64_t token_id, const char *owner, char owner_out[REPO_NAME_MAX + 1])
{
	char id[24];
	const char *params[2] = { db_param_int(id, token_id), owner };
	struct db_rows rows;
	/* the row is locked, so of two revocations one finds it revoked */
	int rc = db_query_one(&rows, "WITH t AS (SELECT t.id, a.name, t.revoked_at IS NULL AS live FROM tokens t"
			      "  JOIN accounts a ON a.id = t.user_id WHERE t.id = $1"
			      "  AND ($2::text IS NULL OR lower(a.name) = lower($2)) FOR UPDATE OF t),"
			      " u AS (UPDATE tokens SET revoked_at = now() WHERE id IN (SELECT id FROM t WHERE live)"
			      "  RETURNING id)"
			      " SELECT name, (SELECT count(*) FROM u) FROM t", 2, params);
	if (rc < 0)
		return rc;
	db_rows_read(&rows, 0, DB_FIELDS(DB_TEXT(0, owner_out, REPO_NAME_MAX + 1)));
	rc = strcmp(db_rows_get(&rows, 0, 1), "0") == 0 ? KHUB_EEXIST : 0;
	db_rows_release(&rows);
	return rc;
}

int db_audit_count_recent(int64_t actor_id, const char *action, long seconds, long *count)
{
	char id[24], secs[24];
	const char *params[3] = { db_param_int(id, actor_id), action, db_param_int(secs, seconds) };
	return db_query_row("SELECT count(*) FROM audit_log WHERE actor_id = $1 AND action = $2"
			    " AND at > now() - make_interval(secs => $3::int)", 3, params, DB_FIELDS(DB_LONG(0, count)));
}

int db_audit(int64_t actor_id, const char *actor_name, const char *action, const char *target,
	     const char *details, const char *remote_addr)
{
	char id[24];
	const char *params[6] = { actor_id ? db_param_int(id, actor_id) : NULL, actor_name ? actor_name : "anonymous", action,
				  target, details, remote_addr };
	return db_run("INSERT INTO audit_log (actor_id, actor_name, action, target, details, remote_addr)"
		      " VALUES ($1, $2, $3, $4, $5::jsonb, $6)", 6, params);
}

int db_trusted_publisher_set(const char *name, int trusted, const char *changed_by, struct account *out,
			     int *changed)
{
	const char *params[3] = { name, trusted ? "true" : "false", changed_by };
	/* The WHERE on the row itself is re-checked after a concurrent
	 * change, so two identical calls record one change. */
	PGresult *res = db_exec("WITH u AS (UPDATE accounts SET trusted_kernel_publisher = $2"
				"  WHERE lower(name) = lower($1) AND trusted_kernel_publisher <> $2 RETURNING id),"
				" c AS (INSERT INTO trusted_publisher_changes (account_id, trusted, changed_by)"
				"  SELECT id, $2, $3 FROM u RETURNING 1)"
				" SELECT (SELECT count(*) FROM c)", 3, params, NULL);
	if (!res)
		return KHUB_EDB;
	*changed = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	PQclear(res);
	/* an admin's word: mirrors and air-gap imports no longer copy the
	 * source's flag onto this account (db_account_copy_upstream_trust) */
	int rc = db_run("UPDATE accounts SET trust_override = $2::boolean WHERE lower(name) = lower($1)"
			" AND trust_override IS DISTINCT FROM $2::boolean", 2, params);
	if (rc < 0)
		return rc;
	return db_account_get(name, out);
}

static void fill_trusted_publisher(void *item, const struct db_rows *rows, size_t i)
{
	struct trusted_publisher *t = item;
	t->kind = strcmp(db_rows_get(rows, i, 1), "org") == 0 ? ACCOUNT_ORG : ACCOUNT_USER;
	db_rows_read(rows, i, DB_FIELDS(DB_TEXT(0, t->name, sizeof(t->name)), DB_TIME(2, &t->since),
					DB_STR_OR_NULL(3, &t->changed_by)));
}

int db_trusted_publisher_list(struct trusted_publisher_list *out)
{
	int rc;
	out->items = db_query_items(sizeof(*out->items), fill_trusted_publisher, &out->count, &rc,
				    "SELECT a.name, a.kind, extract(epoch FROM c.changed_at)::bigint, c.changed_by"
				    " FROM accounts a LEFT JOIN LATERAL (SELECT changed_at, changed_by, trusted"
				    "  FROM trusted_publisher_changes WHERE account_id = a.id ORDER BY id DESC LIMIT 1) c"
				    "  ON c.trusted WHERE a.trusted_kernel_publisher ORDER BY lower(a.name)", 0, NULL);
	return rc;
}

void trusted_publisher_list_release(struct trusted_publisher_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		free(list->items[i].changed_by);
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

int db_account_copy_upstream_trust(const char *name, int trusted)
{
	const char *params[2] = { name, trusted ? "true" : "false" };
	return db_run("UPDATE accounts SET trusted_kernel_publisher = $2"
		      " WHERE lower(name) = lower($1) AND trust_override IS NULL"
		      " AND trusted_kernel_publisher <> $2::boolean", 2, params);
}

int db_org_member_count(int64_t org_id, int64_t *count)
{
	char id[24];
	const char *params[1] = { db_param_int(id, org_id) };
	*count = 0;
	int rc = db_query_row("SELECT count(*) FROM memberships WHERE org_id = $1", 1, params,
			      DB_FIELDS(DB_I64(0, count)));
	return rc == KHUB_ENOTFOUND ? 0 : rc;
}

static void fill_org_membership(void *item, const struct db_rows *rows, size_t i)
{
	struct org_membership *m = item;
	db_rows_read(rows, i, DB_FIELDS(DB_I64(0, &m->org_id), DB_TEXT(1, m->name, sizeof(m->name)),
					DB_TEXT(2, m->fullname, sizeof(m->fullname))));
	m->role = ROLE_NONE;
	role_parse(db_rows_get(rows, i, 3), &m->role);
}

int db_user_orgs(int64_t user_id, struct org_membership_list *out)
{
	char id[24];
	const char *params[1] = { db_param_int(id, user_id) };
	int rc;
	out->items = db_query_items(sizeof(*out->items), fill_org_membership, &out->count, &rc,
				    "SELECT a.id, a.name, a.fullname, m.role FROM memberships m"
				    " JOIN accounts a ON a.id = m.org_id WHERE m.user_id = $1 ORDER BY a.name", 1, params);
	return rc;
}

void org_membership_list_release(struct org_membership_list *list)
{
	if (!list)
		return;
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

static void fill_token_info(void *item, const struct db_rows *rows, size_t i)
{
	struct token_info *t = item;
	db_rows_read(rows, i, DB_FIELDS(DB_I64(0, &t->id), DB_TEXT(1, t->prefix, sizeof(t->prefix)),
					DB_TEXT(2, t->name, sizeof(t->name)), DB_TIME(4, &t->created_at),
					DB_TIME(5, &t->expires_at), DB_BOOL(6, &t->revoked), DB_BOOL(7, &t->expired),
					DB_TIME(8, &t->last_used_at)));
	t->scope = ROLE_NONE;
	role_parse(db_rows_get(rows, i, 3), &t->scope);
}

int db_token_list(const char *user, struct token_list *out)
{
	const char *params[1] = { user };
	int rc;
	out->items = db_query_items(sizeof(*out->items), fill_token_info, &out->count, &rc,
				    "SELECT t.id, t.token_prefix, t.name, t.scope, extract(epoch FROM t.created_at)::bigint,"
				    " extract(epoch FROM t.expires_at)::bigint, t.revoked_at IS NOT NULL,"
				    " coalesce(t.expires_at <= now(), false), extract(epoch FROM t.last_used_at)::bigint"
				    " FROM tokens t JOIN accounts a ON a.id = t.user_id WHERE lower(a.name) = lower($1)"
				    " ORDER BY t.id", 1, params);
	return rc;
}

void token_list_release(struct token_list *list)
{
	if (!list)
		return;
	free(list->items);
	list->items = NULL;
	list->count = 0;
}
