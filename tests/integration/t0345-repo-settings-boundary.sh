#!/bin/bash
# t0345-repo-settings-boundary.sh -- a repo's settings have one owner: one
# table (storage/db/db_repo_settings.c: JSON key, column, type, who may,
# audit action, default), the only code that writes their columns (UPDATE
# repos SET private / build_on_push / campaign_publish /
# benchmark_after_publish), its setter called only by the owner of the rule
# (accounts/repo_settings.c) and the air-gap importer, and the front ends
# (api/repo_settings.c, web/pages_repo_settings.c, server/cmd_admin.c's
# `khub admin repo settings`) calling that owner rather
# than checking, storing and auditing each setting themselves. A per-setting
# writer added beside the table fails here. (The live half, the API and the
# web UI writing the same entry: t0346.)
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
cd "$KHUB_SRC" || bail "no source tree"

OWNER=storage/db/db_repo_settings.c
COLS='private\|build_on_push\|campaign_publish\|benchmark_after_publish'
check "the table of repo settings is $OWNER" -- grep -q '^const struct repo_setting repo_settings_table\[' "$OWNER"
# one string per C file, joined across its lines: a query split over
# several literals is still one query
hits=$(for f in $(grep -rl --include='*.c' 'UPDATE repos' accounts api http server farm mirror sync web common kernel \
	storage 2>/dev/null); do
	tr '\n' ' ' <"$f" | grep -o 'UPDATE repos[^;]*' | grep -o "SET[^;]*\b\($COLS\) *= *\\$" | sed "s|^|$f: |"
done | grep -v "^$OWNER:")
is "$hits" "" "no UPDATE repos SET private/build_on_push/campaign_publish/benchmark_after_publish outside $OWNER"
hits=$(grep -rn --include='*.[ch]' '\bdb_repo_set_\(private\|build_on_push\|campaign_publish\|benchmark_after_publish\)\b' \
	--exclude-dir=build-deb --exclude-dir=tests . 2>/dev/null)
is "$hits" "" "no per-setting storage writer (db_repo_set_private, _build_on_push, _campaign_publish, _benchmark_after_publish)"
hits=$(grep -rln --include='*.c' '\bdb_repo_settings_set(' accounts api http server farm mirror sync web common kernel 2>/dev/null |
	sort | tr '\n' ' ')
is "$hits" "accounts/repo_settings.c sync/import_commit.c " \
	"db_repo_settings_set() is called by the owner of the rule and the air-gap importer only"
# every setting the API names is a row of the table, with its column
for key in private:private buildOnPush:build_on_push campaignPublish:campaign_publish \
	benchmarkAfterPublish:benchmark_after_publish; do
	n=$(tr '\n' ' ' <"$OWNER" | grep -o "\.key = \"${key%%:*}\", \.column = \"${key#*:}\"" | wc -l)
	is "$n" 1 "one row for ${key%%:*} (column ${key#*:})"
done
# the owner and the front ends take each setting from the table, never by
# its own key (api/repo_settings.c still reads the Hub's "visibility", the
# other name of "private", shared with repo creation)
for key in buildOnPush campaignPublish benchmarkAfterPublish; do
	hits=$(grep -rn --include='*.c' "\"$key\"" api web accounts 2>/dev/null)
	is "$hits" "" "no code in api/, web/ or accounts/ names \"$key\" itself (the table does)"
done
hits=$(grep -n '"private"' accounts/repo_settings.c web/pages_repo_settings.c 2>/dev/null)
is "$hits" "" "nor does the owner or the web form name \"private\""
# the front ends call the owner; nothing above storage writes repo.settings
for f in api/repo_settings.c web/pages_repo_settings.c server/cmd_admin.c; do
	check "$f calls accounts_repo_settings_set" -- grep -q '\baccounts_repo_settings_set(' "$f"
done
hits=$(grep -rn --include='*.c' '"repo\.settings"' accounts api http server farm mirror sync web common kernel 2>/dev/null)
is "$hits" "" "no \"repo.settings\" audit entry written outside the table's rows"
check "docs/operations.md lists repo.settings in the audit table" -- grep -q '^| `repo.settings` ' docs/operations.md
done_testing
