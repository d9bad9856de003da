#!/bin/bash
# t0245-config-bind.sh -- a configuration key reaches the settings a module
# reads (api_ctx, http_ctx, farm_settings, web_settings) through its row's
# binding in server/config.c (TO, TO_SCALED, CALL; config_apply_all at
# start-up and on SIGHUP), never through a copy by hand elsewhere: a key is
# one row. tests/unit/test_config_bind checks that every binding delivers.
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
done_testing
