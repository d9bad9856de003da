#!/bin/bash
# t0245-config-bind.sh -- a configuration key reaches the settings a module
# reads (api_ctx, http_ctx, farm_settings, web_settings) through its row's
# binding in server/config.c (TO, TO_SCALED, CALL; config_apply_all at
# start-up and on SIGHUP), never through a copy by hand elsewhere: a key is
# one row. tests/unit/test_config_bind checks that every binding delivers;
# here a running serve's SIGHUP moves a [reload] key into api_ctx.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

dirs="accounts api common farm http kernel mirror server storage sync web"
hits=$(grep -rnE '\b(api_ctx|http_ctx|farm_settings|web_settings)\.[a-z_]+ *=[^=][^;]*\bconfig\.' --include='*.c' $dirs)
is "$hits" "" "no 'api_ctx/http_ctx/farm_settings/web_settings.FIELD = ... config.KEY' outside the table"
hits=$(grep -rnE '(\.|->)[a-z_]+ *= *(\([a-z ]+\))?config\.[a-z_]+ *(\*|<<|;)' --include='*.c' $dirs)
is "$hits" "" "no 'x->field = config.KEY' copy (through a pointer to a module's settings either)"
hits=$(grep -rnE '\b(web_configure|runtime_farm_settings|serve_apply_live_settings)\b' --include='*.[ch]' $dirs)
is "$hits" "" "the hand-copy functions are gone"
check "the table binds keys to the modules' settings" -- \
	grep -qE 'TO\((api_ctx|http_ctx|farm_settings|web_settings)\.' server/config.c

khub_setup
printf 'metrics_public = 0\n' >"$TEST_DIR/live.conf"
khub_start --config "$TEST_DIR/live.conf"
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/metrics")" 401 "metrics_public = 0: anonymous /metrics refused"
printf 'metrics_public = 1\n' >"$TEST_DIR/live.conf"
kill -HUP "$KHUB_PID"
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/metrics")" = 200 ] && break
	sleep 0.1
done
is "$(curl -s -o /dev/null -w '%{http_code}' "$KHUB_URL/metrics")" 200 \
	"SIGHUP with metrics_public = 1: api_ctx has it, anonymous /metrics answers"
like "$(cat "$TEST_DIR/server.log")" "reload: metrics_public = 1" "the reload is logged"
khub_stop
done_testing
