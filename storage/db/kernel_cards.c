/* kernel_cards.c -- the card of each kernel repo (main's README.md, read by
 * kernel/card.c) in kernel_cards, written when main moves, so that the
 * listing's description, tags, license and search read a row, never a
 * README. */
#include "storage/db/variant_index.h"
#include "storage/db/db_internal.h"
#include "kernel/kernel.h"

#include <stdlib.h>
#include <string.h>

/* A README larger than this gives no card (the page renders up to 1 MiB). */
#define CARD_README_LIMIT (1u << 20)

static json_t *tags_json(const struct kernel_card *c)
{
	json_t *tags = json_array();
	for (size_t i = 0; i < c->tags.count; i++)
		json_array_append_new(tags, json_string(c->tags.items[i]));
	return tags;
}

/* Tags, license and library name as words for search. */
static char *card_words(const struct kernel_card *c)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < c->tags.count; i++)
		strbuf_addf(&sb, "%s ", c->tags.items[i]);
	strbuf_addf(&sb, "%s %s", c->license ? c->license : "", c->library_name ? c->library_name : "");
	return strbuf_detach(&sb, NULL);
}

static int store_card(int64_t repo_id, const char *sha, const struct kernel_card *c)
{
	char id[24], version[24];
	json_t *tags = tags_json(c);
	char *tags_text = json_dumps(tags, JSON_COMPACT), *words = card_words(c);
	const char *params[9] = { db_param_int(id, repo_id), sha, db_param_int(version, KERNEL_CARD_INDEX_VERSION),
				  c->license, c->library_name, tags_text, c->description ? c->description : "", words,
				  c->body_text ? c->body_text : "" };
	int rc = db_run("INSERT INTO kernel_cards (repo_id, commit_sha, card_version, license, library_name, tags,"
			" description, words, body) VALUES ($1, $2, $3::int, $4, $5, $6::jsonb, $7, $8, $9)"
			" ON CONFLICT (repo_id) DO UPDATE SET commit_sha = EXCLUDED.commit_sha,"
			" card_version = EXCLUDED.card_version, license = EXCLUDED.license,"
			" library_name = EXCLUDED.library_name, tags = EXCLUDED.tags,"
			" description = EXCLUDED.description, words = EXCLUDED.words, body = EXCLUDED.body",
			9, params);
	free(words);
	free(tags_text);
	json_decref(tags);
	return rc;
}

/* 1 when the stored card is of sha at the current version, 0 when not. */
static int card_current(int64_t repo_id, const char *sha)
{
	char id[24], version[24];
	const char *params[3] = { db_param_int(id, repo_id), sha, db_param_int(version, KERNEL_CARD_INDEX_VERSION) };
	return db_query_exists("SELECT 1 FROM kernel_cards WHERE repo_id = $1 AND commit_sha = $2"
			       " AND card_version >= $3::int", 3, params);
}

int kernel_card_index(int64_t repo_id, git_repository *git)
{
	char sha[41] = "";
	struct kernel_card card;
	if (repo_resolve_revision(git, "refs/heads/main", sha) < 0)
		sha[0] = '\0';	/* no main: an empty card */
	int rc = card_current(repo_id, sha);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	char *text = sha[0] ? repo_read_text_file(git, sha, "README.md", CARD_README_LIMIT) : NULL;
	kernel_card_parse(text ? text : "", text ? strlen(text) : 0, &card);
	rc = store_card(repo_id, sha, &card);
	kernel_card_release(&card);
	free(text);
	return rc;
}
