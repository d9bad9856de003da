/* metrics.h -- the server's own figures for /metrics (api/metrics.c):
 * requests by route, the database pool, work queues, the LFS store's size,
 * the build queue, mirror lag, air-gap imports. */
#ifndef KHUB_API_METRICS_H
#define KHUB_API_METRICS_H

#include "api/api.h"

/* Before the first request: count requests under the patterns of every
 * row of the route tables (groups: ngroups NULL-terminated lists of
 * tables), and add up the LFS store under lfs_root (NULL: not) in a
 * background thread now and every scan_s seconds. */
void metrics_start(const struct route *const *const *groups, size_t ngroups, const char *lfs_root, long scan_s);
/* Stop the background thread (after the last request). */
void metrics_stop(void);
/* Count a request that ended after usec, under its route's pattern
 * ("unmatched" without one). Takes no lock. */
void metrics_request_done(const struct request *req, uint64_t usec);
/* Append every figure, Prometheus text; while the database is down, those
 * it holds are left out and khub_database_up says 0. */
void metrics_write(struct strbuf *sb);
/* Append the database's state: khub_database_up, khub_database_down_seconds,
 * khub_database_outages_total, khub_outage_cache_hits_total. */
void metrics_write_database_state(struct strbuf *sb);

#endif
