/* test_build_states.c -- the build job's state table (farm/build_states.c)
 * is a state machine one can rely on: every row's states and events are
 * known, no row is there twice, every state but none is reached and every
 * event has a row, the end states leave only through retry, each row says
 * who may trigger it and why, and the JSON khub builds states prints holds
 * every row. */
#include "farm/farm.h"
#include "tap.h"

static const struct build_transition *rows(void)
{
	return build_job_transitions;
}

static size_t row_count(void)
{
	size_t n = 0;
	while (rows()[n].from != BUILD_STATE_COUNT)
		n++;
	return n;
}

static void test_rows_sane(void)
{
	size_t n = row_count(), bad = 0, dup = 0, unguarded = 0;
	for (size_t i = 0; i < n; i++) {
		const struct build_transition *t = &rows()[i];
		bad += (unsigned)t->from >= BUILD_STATE_COUNT || (unsigned)t->to >= BUILD_STATE_COUNT ||
		       t->to == BUILD_NONE || (unsigned)t->event >= BUILD_EVENT_COUNT;
		unguarded += !t->guard || !t->guard[0] || !t->actors || !t->routes;
		for (size_t k = i + 1; k < n; k++)
			dup += rows()[k].from == t->from && rows()[k].event == t->event && rows()[k].to == t->to;
	}
	ok(n > 0, "the table has %zu rows", n);
	ok(bad == 0, "every row's states and event are known, none ends in none");
	ok(dup == 0, "no row is there twice");
	ok(unguarded == 0, "every row says who may trigger it and when");
}

static void test_reachable(void)
{
	int reached[BUILD_STATE_COUNT] = { 0 }, used[BUILD_EVENT_COUNT] = { 0 };
	for (const struct build_transition *t = rows(); t->from != BUILD_STATE_COUNT; t++) {
		reached[t->to] = 1;
		used[t->event] = 1;
	}
	for (int s = BUILD_QUEUED; s < BUILD_STATE_COUNT; s++)
		ok(reached[s], "%s is reached", build_state_name((enum build_state)s));
	for (int e = 0; e < BUILD_EVENT_COUNT; e++)
		ok(used[e], "event %s has a row", build_event_name((enum build_event)e));
	/* succeeded, failed and canceled are ends: only a retry (or a
	 * canceled job's worker finishing its heartbeats and log) leaves them */
	int leaves = 0;
	for (const struct build_transition *t = rows(); t->from != BUILD_STATE_COUNT; t++)
		if ((t->from == BUILD_SUCCEEDED || t->from == BUILD_FAILED || t->from == BUILD_CANCELED) &&
		    t->to != t->from && t->event != BUILD_EV_RETRY)
			leaves++;
	ok(leaves == 0, "an ended job changes state only by a retry");
	ok(!build_transition_allowed(BUILD_SUCCEEDED, BUILD_EV_RETRY, BUILD_QUEUED), "a succeeded job is not retried");
	ok(build_transition_allowed(BUILD_RUNNING, BUILD_EV_FAIL, BUILD_QUEUED) &&
	   build_transition_allowed(BUILD_RUNNING, BUILD_EV_FAIL, BUILD_FAILED), "fail: queued again or failed");
	/* a fleet rebuild's pull request: staged, then merged or superseded;
	 * superseded is an end no event leaves, and nothing but a merge
	 * makes a staged job succeeded */
	int from_superseded = 0, into_succeeded_from_staged = 0;
	for (const struct build_transition *t = rows(); t->from != BUILD_STATE_COUNT; t++) {
		from_superseded += t->from == BUILD_SUPERSEDED;
		into_succeeded_from_staged += t->from == BUILD_STAGED && t->to == BUILD_SUCCEEDED && t->event != BUILD_EV_MERGE;
	}
	ok(build_transition_allowed(BUILD_RUNNING, BUILD_EV_STAGE, BUILD_STAGED), "stage: running -> staged");
	ok(build_transition_allowed(BUILD_STAGED, BUILD_EV_MERGE, BUILD_SUCCEEDED) &&
	   into_succeeded_from_staged == 0, "only a merge makes a staged job succeeded");
	ok(build_transition_allowed(BUILD_STAGED, BUILD_EV_SUPERSEDE, BUILD_SUPERSEDED) &&
	   !build_transition_allowed(BUILD_SUCCEEDED, BUILD_EV_SUPERSEDE, BUILD_SUPERSEDED),
	   "supersede: a staged job only (what is published stays)");
	ok(from_superseded == 0, "a superseded job changes state no more (not even retried)");
}

static void test_names_and_json(void)
{
	for (int s = 0; s < BUILD_STATE_COUNT; s++)
		ok(build_state_named(build_state_name((enum build_state)s)) == (enum build_state)s, "state %s by name",
		   build_state_name((enum build_state)s));
	ok(build_state_named("merged") == BUILD_STATE_COUNT, "an unknown state name is none of them");
	json_t *doc = build_states_json();
	json_t *list = json_object_get(doc, "transitions");
	ok(json_array_size(list) == row_count(), "the JSON has every row");
	json_t *last = json_array_get(list, row_count() - 1);
	is_str(json_string_value(json_object_get(last, "event")), "take_back", "the last row is take_back");
	ok(json_array_size(json_object_get(last, "routes")) == 9, "its routes are split into nine");
	json_decref(doc);
}

int main(void)
{
	test_rows_sane();
	test_reachable();
	test_names_and_json();
	return done_testing();
}
