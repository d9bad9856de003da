/* repo_settings.c -- a repo's settings changed one way for every front end
 * (PUT …/settings, the web UI's settings form, the command line): read
 * against storage's table, the policy, one write, the audit entries
 * (accounts/accounts.h). */
#include "accounts/accounts.h"

#include <stdlib.h>
#include <string.h>

/* v as row's type, into change (KHUB_EINVAL when it is not one). */
static int setting_from_json(enum repo_setting_id id, json_t *v, struct repo_settings_change *change)
{
	const struct repo_setting *row = &repo_settings_table[id];
	const char *s = json_string_value(v);
	switch (row->type) {
	case REPO_SETTING_BOOL:
		if (!json_is_boolean(v))
			return KHUB_EINVAL;
		change->want.value[id] = json_is_true(v);
		break;
	case REPO_SETTING_INT:
		if (!json_is_integer(v))
			return KHUB_EINVAL;
		change->want.value[id] = (long)json_integer_value(v);
		break;
	case REPO_SETTING_ENUM:
		change->want.value[id] = s ? repo_setting_enum_index(row, s) : -1;
		break;
	case REPO_SETTING_TEXT:
		if (!s || strlen(s) > (size_t)row->max)
			return KHUB_EINVAL;
		snprintf(change->want.text[id], sizeof(change->want.text[id]), "%s", s);
		break;
	}
	if (repo_setting_check(id, &change->want) < 0)
		return KHUB_EINVAL;
	change->set |= REPO_SETTING_BIT(id);
	return 0;
}

int accounts_repo_settings_from_json(json_t *doc, struct repo_settings_change *change, const char **why)
{
	memset(change, 0, sizeof(*change));
	*why = NULL;
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		json_t *v = json_object_get(doc, repo_settings_table[i].key);
		if (!v || json_is_null(v))	/* absent or null: left as it is */
			continue;
		if (setting_from_json(i, v, change) < 0) {
			*why = repo_settings_table[i].why;
			return KHUB_EINVAL;
		}
	}
	return 0;
}

json_t *accounts_repo_setting_from_text(enum repo_setting_id id, const char *text)
{
	enum repo_setting_type type = repo_settings_table[id].type;
	char *end;
	if (type == REPO_SETTING_BOOL && (strcmp(text, "true") == 0 || strcmp(text, "false") == 0))
		return json_boolean(strcmp(text, "true") == 0);
	if (type == REPO_SETTING_INT && text[0]) {
		long long n = strtoll(text, &end, 10);
		if (!*end)
			return json_integer(n);
	}
	return json_string(text);
}

json_t *accounts_repo_setting_value(enum repo_setting_id id, const struct repo_settings *s)
{
	const struct repo_setting *row = &repo_settings_table[id];
	switch (row->type) {
	case REPO_SETTING_BOOL:
		return json_boolean(s->value[id]);
	case REPO_SETTING_INT:
		return json_integer(s->value[id]);
	case REPO_SETTING_ENUM:
		return s->value[id] >= 0 ? json_string(row->values[s->value[id]]) : json_null();
	default:
		return json_string(s->text[id]);
	}
}

json_t *accounts_repo_settings_json(const struct repo_settings *s, int answered_only)
{
	json_t *o = json_object();
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		const struct repo_setting *row = &repo_settings_table[i];
		if (answered_only && !row->answered)
			continue;
		json_object_set_new(o, row->key, row->kernels_only && !s->is_kernel && row->type == REPO_SETTING_BOOL
							 ? json_false() : accounts_repo_setting_value(i, s));
	}
	return o;
}

/* May who (role: her role on the repo, the token's scope included) change
 * every setting of change? */
static int settings_policy(const struct accounts_actor *who, enum role role, unsigned set)
{
	if (!who->principal)
		return 0;
	for (int i = 0; i < REPO_SETTING_COUNT; i++)
		if ((set & REPO_SETTING_BIT(i)) && role < repo_settings_table[i].who)
			return KHUB_EPERM;
	return 0;
}

/* One entry per setting the change gave a new value, {key: value}. */
static void settings_audit(const struct accounts_actor *who, const struct repo_record *repo, unsigned set,
			   const struct repo_settings *before, const struct repo_settings *after)
{
	char *target = xasprintf("%s/%s/%s", repo_type_plural(repo->type), repo->ns, repo->name);
	for (int i = 0; i < REPO_SETTING_COUNT; i++) {
		const struct repo_setting *row = &repo_settings_table[i];
		if (!(set & REPO_SETTING_BIT(i)) ||
		    (before->value[i] == after->value[i] && strcmp(before->text[i], after->text[i]) == 0))
			continue;
		accounts_audit(who, row->audit_action, target, json_pack("{s:o}", row->key,
									accounts_repo_setting_value(i, after)));
	}
	free(target);
}

int accounts_repo_settings_set(const struct accounts_actor *who, const struct repo_record *repo, enum role role,
			       const struct repo_settings_change *change, struct repo_settings *after,
			       const char **why)
{
	struct repo_settings before;
	*why = NULL;
	if (settings_policy(who, role, change->set) < 0) {
		*why = "only the repo's writers (with a write token) change its settings";
		return KHUB_EPERM;
	}
	int rc = db_repo_settings_set(repo->id, change->set, &change->want, &before, after);
	if (rc == KHUB_EINVAL)
		*why = "a setting's value is not one its row allows";
	if (rc == KHUB_ENOTFOUND)
		*why = "no such repo";
	if (rc < 0)
		return rc;
	settings_audit(who, repo, change->set, &before, after);
	return 0;
}
