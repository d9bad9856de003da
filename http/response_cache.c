/* response_cache.c -- bytes computed from an immutable commit sha (tree
 * pages, file descriptions, small file bodies), kept in memory up to a byte
 * budget and evicted oldest first. Keys always contain the repo id and sha. */
#include "http/http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cache_value {
	struct dlist_node order;	/* in cache_order */
	char *key;
	size_t len;
	char data[];
};

static struct hashmap cache_map;
static struct dlist cache_order;	/* oldest first */
static size_t cache_bytes, cache_budget;
static pthread_rwlock_t cache_lock = PTHREAD_RWLOCK_INITIALIZER;

void response_cache_init(size_t max_bytes)
{
	cache_budget = max_bytes;
	hashmap_init(&cache_map);
}

char *response_cache_get(const char *key, size_t *len)
{
	char *copy = NULL;
	if (!cache_budget)
		return NULL;
	pthread_rwlock_rdlock(&cache_lock);
	struct cache_value *v = hashmap_get(&cache_map, key);
	if (v) {
		copy = xmalloc(v->len + 1);
		memcpy(copy, v->data, v->len);
		copy[v->len] = '\0';
		*len = v->len;
	}
	pthread_rwlock_unlock(&cache_lock);
	return copy;
}

static void unlink_value(struct cache_value *v)
{
	dlist_unlink(&cache_order, &v->order);
	cache_bytes -= v->len + sizeof(*v);
}

void response_cache_put(const char *key, const char *value, size_t len)
{
	if (!cache_budget || len + sizeof(struct cache_value) > cache_budget / 8)
		return;
	struct cache_value *v = xmalloc(sizeof(*v) + len + 1);
	memcpy(v->data, value, len);
	v->data[len] = '\0';
	v->len = len;
	v->key = xstrdup(key);
	pthread_rwlock_wrlock(&cache_lock);
	struct cache_value *old = hashmap_put(&cache_map, key, v);
	if (old) {
		unlink_value(old);
		free(old->key);
		free(old);
	}
	dlist_append(&cache_order, &v->order);
	cache_bytes += len + sizeof(*v);
	while (cache_bytes > cache_budget && cache_order.first != &v->order) {
		struct cache_value *victim = dlist_item(cache_order.first, struct cache_value, order);
		unlink_value(victim);
		hashmap_remove(&cache_map, victim->key);
		free(victim->key);
		free(victim);
	}
	pthread_rwlock_unlock(&cache_lock);
}
