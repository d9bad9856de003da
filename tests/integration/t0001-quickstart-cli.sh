#!/bin/bash
# t0001-quickstart-cli.sh -- the command line: config precedence and -n,
# db migrate, import (idempotent, LFS by rule, validation), admin commands,
# the embedded database shared by processes and stopped by the last one.
# A fresh data dir (initdb, migrations) and the production lifecycle: the
# last user stops the cluster, nothing lingers.
KHUB_TEST_FRESH_CLUSTER=1 KHUB_TEST_LINGER_S=0
. "$(dirname "$0")/../lib/khub-test.sh"
khub_setup

# ---- configuration ---------------------------------------------------------
OUT=$(khub serve -n)
like "$OUT" "listen = 127\.0\.0\.1:$KHUB_PORT" "KHUB_LISTEN is honoured"
printf 'tree_page_size = 7\nlisten = "127.0.0.1:1"\n' >"$TEST_DIR/khub.conf"
OUT=$(KHUB_LISTEN= khub serve -n --config "$TEST_DIR/khub.conf" 2>/dev/null)
like "$OUT" "tree_page_size = 7" "config file value"
OUT=$(khub serve -n --config "$TEST_DIR/khub.conf")
like "$OUT" "listen = 127\.0\.0\.1:$KHUB_PORT" "environment beats the config file"
OUT=$(khub serve -n --config "$TEST_DIR/khub.conf" --tree-page-size 9)
like "$OUT" "tree_page_size = 9" "an option beats the environment and the file"
khub serve -n --threads nine >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "a bad number is refused"
like "$(cat "$TEST_DIR/err")" "threads must be a number" "with a clear message"
printf 'no_such_key = 1\n' >"$TEST_DIR/bad.conf"
khub serve -n --config "$TEST_DIR/bad.conf" >/dev/null 2>"$TEST_DIR/err"
like "$(cat "$TEST_DIR/err")" "unknown key 'no_such_key'" "unknown config keys are refused"
OUT=$(KHUB_DATABASE_URL='postgresql://u:secret@h/db' khub serve -n)
ok $(echo "$OUT" | grep -q secret; [ $? -ne 0 ]; echo $?) "serve -n never prints a database password"
like "$(khub serve -n | tail -1)" "^configuration ok$" "serve -n accepts the test configuration"
khub serve -n --listen not-an-address >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -eq 1 ]; echo $?) "serve -n refuses a listen address that does not parse"
like "$(cat "$TEST_DIR/err")" "listen 'not-an-address' is not an address" "with a clear message"
for bad in '127.0.0.1:' '127.0.0.1:70000' '127.0.0.1:80x' '[::1:80' 'localhost:80' '999.1.1.1:80'; do
	khub serve -n --listen "$bad" >/dev/null 2>&1
	ok $([ $? -eq 1 ]; echo $?) "serve -n refuses listen '$bad'"
done
for good in '[::1]:8080' '*:8080' '0.0.0.0:0'; do
	check "serve -n accepts listen '$good'" -- khub serve -n --listen "$good"
done
printf 'x\n' >"$TEST_DIR/a-file"
khub serve -n --data-dir "$TEST_DIR/a-file" >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -eq 1 ]; echo $?) "serve -n refuses a data_dir that is a file"
like "$(cat "$TEST_DIR/err")" "data_dir .*/a-file is not a directory" "with a clear message"
khub serve -n --data-dir "$TEST_DIR/a-file/sub" >/dev/null 2>"$TEST_DIR/err"
like "$(cat "$TEST_DIR/err")" "data_dir .*/a-file/sub cannot be created" "serve -n refuses a data_dir that cannot be created"
check "serve -n accepts a data_dir that it can create" -- khub serve -n --data-dir "$TEST_DIR/not/yet/there"
ok $([ ! -e "$TEST_DIR/not" ]; echo $?) "and creates nothing"
khub serve -n --pg-bindir "$TEST_DIR" >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -eq 1 ]; echo $?) "serve -n refuses a pg_bindir without postgres and initdb"
like "$(cat "$TEST_DIR/err")" "pg_bindir .* has no postgres" "naming postgres"
like "$(cat "$TEST_DIR/err")" "pg_bindir .* has no initdb" "and initdb"
check "pg_bindir is not needed with an external database" -- \
	env KHUB_DATABASE_URL=postgresql:///x "$KHUB_BIN" serve -n --pg-bindir "$TEST_DIR"
khub serve -n --listen nowhere --data-dir "$TEST_DIR/a-file" --public-url ftp://x >/dev/null 2>"$TEST_DIR/err"
is "$(grep -c '^khub: ' "$TEST_DIR/err")" 4 "serve -n reports every problem, one line each, and a count"
like "$(tail -1 "$TEST_DIR/err")" "configuration has 3 problems" "the count"
khub serve -n --max-connections 1 >/dev/null 2>"$TEST_DIR/err"
like "$(cat "$TEST_DIR/err")" "max_connections must be a number from 16 to" "numeric bounds are checked"

# ---- db migrate ------------------------------------------------------------
check "db migrate (first run: initdb + schema)" -- khub db migrate
check "db migrate again is a no-op" -- khub db migrate
ok $([ ! -S "$KHUB_DATA_DIR/pg/run/.s.PGSQL.5432" ]; echo $?) "the embedded database is stopped when the last user exits"
is "$(stat -c %a "$KHUB_DATA_DIR/pg/data")" 700 "the cluster directory is private"

# ---- import ------------------------------------------------------------------
SRC=$TEST_DIR/src
make_kernel_tree "$SRC" relu
head -c 2000 /dev/urandom >"$SRC/build/torch-cpu/table.dat"	# binary, no .gitattributes rule
printf 'a,b\n1,2\n' >"$SRC/build/torch-cpu/notes.csv"
FIRST=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
like "$FIRST" '^[0-9a-f]{40}$' "import creates repo, org and branch"
AGAIN=$(khub import "$SRC" --repo acme/relu --branch v1 2>/dev/null)
is "$AGAIN" "$FIRST" "importing the same tree again makes no new commit"
GITDIR=$KHUB_DATA_DIR/repos/kernels/acme/relu.git
is "$(git --git-dir="$GITDIR" rev-parse refs/heads/v1)" "$FIRST" "branch v1 points at the import"
check "main holds the initial .gitattributes commit" -- git --git-dir="$GITDIR" cat-file -e main:.gitattributes
is "$(git --git-dir="$GITDIR" rev-parse "v1^")" "$(git --git-dir="$GITDIR" rev-parse main)" "a new branch starts from main"
POINTER=$(git --git-dir="$GITDIR" cat-file -p "v1:build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so")
like "$POINTER" "^version https://git-lfs.github.com/spec/v1" ".so (a .gitattributes rule) is stored as an LFS pointer"
SO_SHA=$(sha256sum "$SRC/build/torch211-cxx11-cu128-x86_64-linux/_relu_cuda.abi3.so" | cut -d' ' -f1)
like "$POINTER" "oid sha256:$SO_SHA" "pointer names the content's sha256"
check "the LFS object is in the store under its sha256" -- test -f "$KHUB_DATA_DIR/lfs/objects/${SO_SHA:0:2}/${SO_SHA:2:2}/$SO_SHA"
like "$(git --git-dir="$GITDIR" cat-file -p v1:build/torch-cpu/table.dat | head -c 40)" "^version https://git-lfs" "binary content becomes LFS"
is "$(git --git-dir="$GITDIR" cat-file -p v1:build/torch-cpu/notes.csv)" "$(cat "$SRC/build/torch-cpu/notes.csv")" "text stays a regular blob"
check "git fsck finds the repository clean" -- git --git-dir="$GITDIR" fsck --strict
rm "$SRC/build/torch-cpu/notes.csv"
SECOND=$(khub import "$SRC" --repo acme/relu --branch v1 --message "drop notes" 2>/dev/null)
ok $(git --git-dir="$GITDIR" cat-file -e v1:build/torch-cpu/notes.csv 2>/dev/null; [ $? -ne 0 ]; echo $?) "an import is a snapshot: removed files are gone"
is "$(git --git-dir="$GITDIR" log -1 --format=%s v1)" "drop notes" "--message is the commit summary"
is "$(git --git-dir="$GITDIR" rev-parse v1^)" "$FIRST" "the new commit's parent is the old tip"

khub import "$SRC" --repo 'acme/bad..name' >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "invalid repo names are refused"
khub import "$SRC" --repo acme/relu --branch 'bad branch' >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "invalid branch names are refused"
like "$(cat "$TEST_DIR/err")" "invalid branch" "with a clear message"

# ---- admin -------------------------------------------------------------------
check "user create" -- khub admin user create alice
khub admin user create alice >/dev/null 2>"$TEST_DIR/err"
like "$(cat "$TEST_DIR/err")" "taken" "a taken name is refused"
khub admin user create ACME >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "names are case-insensitive (ACME = acme)"
check "member set" -- khub admin member set acme alice write
TOKEN=$(khub admin token create alice --scope write 2>/dev/null)
like "$TOKEN" '^hf_[A-Za-z]{34}$' "token create prints an hf_ token"
check "token is stored hashed, never in clear" -- bash -c "! grep -r -a -q '$TOKEN' '$KHUB_DATA_DIR/pg/data' 2>/dev/null || ! khub admin token list alice | grep -q '$TOKEN'"
khub admin token create alice --expires-in-days abc >/dev/null 2>"$TEST_DIR/err"
ok $([ $? -ne 0 ]; echo $?) "a malformed expiry is refused"
khub admin token create alice --expires-in-days -3 >/dev/null 2>"$TEST_DIR/err"
like "$(cat "$TEST_DIR/err")" "positive number of days" "a negative expiry is refused with a clear message"
EXPIRING=$(khub admin token create alice --expires-in-days 0.00001 2>/dev/null)
sleep 1.5
like "$(khub admin token list alice 2>/dev/null)" "expired" "token list says which tokens expired"
LIST=$(khub admin token list alice 2>/dev/null)
like "$LIST" "write" "token list shows the scope"
ok $(echo "$LIST" | grep -q "$TOKEN"; [ $? -ne 0 ]; echo $?) "token list never shows the secret"
check "trust set" -- khub admin trust set acme
like "$(khub admin trust list 2>/dev/null)" "^acme" "trust list"

# ---- two processes share the embedded database --------------------------------
# token lookups are reused for token_cache_ttl_ms: 200 ms here, not the 2 s default
KHUB_TOKEN_CACHE_TTL_MS=200 khub_start
check "server is up" -- curl -sf "$KHUB_URL/api/health"
check "admin command while the server runs" -- khub admin org create second
check "the server still answers after the admin command exited" -- curl -sf "$KHUB_URL/api/organizations/second/overview"
TOKEN_ID=$(khub admin token list alice 2>/dev/null | head -1 | cut -f1)
check "token revoke" -- khub admin token revoke "$TOKEN_ID"
sleep 0.3	# the server reuses token lookups for up to token_cache_ttl_ms (200 ms)
STATUS=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$KHUB_URL/api/whoami-v2")
is "$STATUS" 401 "a revoked token stops working"
khub_stop
sleep 0.5
ok $([ ! -S "$KHUB_DATA_DIR/pg/run/.s.PGSQL.5432" ]; echo $?) "the server stops the embedded database on exit"

done_testing
