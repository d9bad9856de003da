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
/* Append every figure, Prometheus text: 0, or KHUB_EDB when the database
 * did not answer (sb may hold part of it). */
int metrics_write(struct strbuf *sb);

#endif
