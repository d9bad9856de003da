/* migrations.h -- the schema migrations compiled into khub (internal to
 * storage/; generated into storage/db/migrations.c by embed_sql.sh). */
#ifndef KHUB_MIGRATIONS_H
#define KHUB_MIGRATIONS_H
#include <stddef.h>

struct migration {
	int version;
	const char *name;
	const char *sql;
};

extern const struct migration migrations[];
extern const size_t migration_count;

#endif
