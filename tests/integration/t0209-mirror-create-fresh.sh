#!/bin/bash
# t0209-mirror-create-fresh.sh -- the mirror never adopts a directory it did
# not make (issue 31 item 6, the mirror path): a leftover git directory at
# the place of a repo the mirror registers new (a branch and a tag outside
# the selection's refs, a secret in them) is moved to the trash before the
# mirror creates the repo's store, so the mirrored repo serves upstream's
# refs only: the secret answers 404 to an anonymous GET, the directory is in
# repos/.trash, and the create is audited with where it went.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/mirror_hubs.sh"

for tool in curl git jq; do
	command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done

hubs_setup
hub_init up
hub_init mirror
hub_spawn up
hub_spawn mirror
hub_wait up
hub_wait mirror
UP=$(hub_url up)
MI=$(hub_url mirror)
W=$TEST_DIR/work
REPOS=$(hub_data mirror)/repos
mkdir -p "$W"

make_kernel_tree "$W/src/fresh" fresh
printf 'the fresh kernel' >"$W/src/fresh/NOTE.txt"
hub up import "$W/src/fresh" --repo acme/fresh --branch main >/dev/null 2>"$W/import.log"
ok $? "upstream: acme/fresh (main)"

# the leftover: a git directory no row owns, at acme/fresh's place
leftover_git_dir "$REPOS/kernels/acme/fresh.git"
ok $? "mirror: a leftover directory at acme/fresh's place (branch leak, tag leaked)"

CFG=$TEST_DIR/mirror.json
cat >"$CFG" <<JSON
{"upstreams": [{"name": "up", "url": "$UP", "concurrency": 1, "max_retries": 1}],
 "selections": [{"name": "acme", "upstream": "up", "type": "kernel", "repos": ["acme/fresh"], "refs": ["main"],
   "eager_variants": ["*"], "lazy": false, "interval": 3600, "policy": "mirror"}]}
JSON
hub mirror mirror sync acme --mirror-config "$CFG" >"$W/sync.out" 2>"$W/sync.err"
rc=$?
ok $rc "khub mirror sync acme exits 0"
[ $rc -eq 0 ] || tail -5 "$W/sync.err" | sed 's/^/# /'
body=$(curl -s -w '/%{http_code}' "$MI/kernels/acme/fresh/resolve/main/NOTE.txt")
is "$body" "the fresh kernel/200" "the mirrored repo serves upstream's main"
is "$(curl -s -o /dev/null -w '%{http_code}' "$MI/kernels/acme/fresh/resolve/leak/secret.txt")" 404 \
	"anonymous GET of the leftover branch's file: 404"
is "$(curl -s -o /dev/null -w '%{http_code}' "$MI/kernels/acme/fresh/resolve/leaked/secret.txt")" 404 \
	"  nor through its tag"
is "$(curl -s "$MI/api/kernels/acme/fresh/refs" | jq -r '[.branches[].name, .tags[].name] | join(",")')" "main" \
	"the repo has upstream's refs only"
check "the leftover directory is in repos/.trash" -- \
	git --git-dir="$(ls -d "$REPOS"/.trash/kernels/acme/fresh.git.* 2>/dev/null | head -1)" rev-parse -q --verify refs/heads/leak
is "$(psql "host=$(hub_data mirror)/pg/run dbname=khub user=khub" -tAc "SELECT details->>'quarantined' LIKE
	'$REPOS/.trash/kernels/acme/fresh.git.%' FROM audit_log WHERE action = 'repo.create' AND target LIKE '%acme/fresh'" 2>&1)" \
	t "the create audited with where the leftover went"
hub mirror mirror sync acme --mirror-config "$CFG" >"$W/sync2.out" 2>"$W/sync2.err"
ok $? "a second sync of the registered repo opens its own store"
is "$(psql "host=$(hub_data mirror)/pg/run dbname=khub user=khub" -tAc "SELECT count(*) FROM audit_log
	WHERE action = 'repo.create'" 2>&1)" 1 "  and creates nothing"
is "$(curl -s -w '/%{http_code}' "$MI/kernels/acme/fresh/resolve/main/NOTE.txt")" "the fresh kernel/200" \
	"  the repo still serves main"

done_testing
