/* hashmap.c -- a chained hash table from strings to pointers (FNV-1a). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

uint64_t hash_string(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

void hashmap_init(struct hashmap *map)
{
	map->nbuckets = 64;
	map->buckets = xcalloc(map->nbuckets, sizeof(*map->buckets));
	map->count = 0;
}

void *hashmap_get(const struct hashmap *map, const char *key)
{
	uint64_t h = hash_string(key);
	for (struct hashmap_entry *e = map->buckets[h % map->nbuckets]; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e->value;
	return NULL;
}

static void grow(struct hashmap *map)
{
	size_t n = map->nbuckets * 2;
	struct hashmap_entry **b = xcalloc(n, sizeof(*b));
	for (size_t i = 0; i < map->nbuckets; i++) {
		struct hashmap_entry *e = map->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash % n];
			b[e->hash % n] = e;
		}
	}
	free(map->buckets);
	map->buckets = b;
	map->nbuckets = n;
}

void *hashmap_put(struct hashmap *map, const char *key, void *value)
{
	uint64_t h = hash_string(key);
	struct hashmap_entry **slot = &map->buckets[h % map->nbuckets];
	for (struct hashmap_entry *e = *slot; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0) {
			void *old = e->value;
			e->value = value;
			return old;
		}
	struct hashmap_entry *e = xmalloc(sizeof(*e));
	e->key = xstrdup(key);
	e->value = value;
	e->hash = h;
	e->next = *slot;
	*slot = e;
	if (++map->count > map->nbuckets)
		grow(map);
	return NULL;
}

void *hashmap_remove(struct hashmap *map, const char *key)
{
	uint64_t h = hash_string(key);
	for (struct hashmap_entry **p = &map->buckets[h % map->nbuckets]; *p; p = &(*p)->next) {
		struct hashmap_entry *e = *p;
		if (e->hash == h && strcmp(e->key, key) == 0) {
			void *value = e->value;
			*p = e->next;
			free(e->key);
			free(e);
			map->count--;
			return value;
		}
	}
	return NULL;
}

void hashmap_release(struct hashmap *map, void (*free_value)(void *))
{
	for (size_t i = 0; i < map->nbuckets; i++) {
		struct hashmap_entry *e = map->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			if (free_value)
				free_value(e->value);
			free(e->key);
			free(e);
		}
	}
	free(map->buckets);
	map->buckets = NULL;
	map->nbuckets = map->count = 0;
}
