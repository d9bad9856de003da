#!/bin/bash
# t0135-build-source-fetch.sh -- external git sources of builds
# (docs/build-farm.md) against hostile upstreams: loopback, private,
# link-local and IPv4-mapped addresses refused, a redirect to loopback
# refused, nothing left on disk after a failed fetch, an allow-listed host
# fetched; a tarpit holds only the fetch pool's thread (a commit to another
# repo goes through meanwhile); a silent, a trickling and an endless
# upstream fail with their reason (low-speed limit, deadline).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
khub_setup

V=torch211-cxx11-cpu-x86_64-linux
log=$TEST_DIR/setup.log
khub_accounts	# alice, acme (her org), $ALICE (tests/lib/khub-test.sh)
# only one background thread of each kind: a fetch that held the commit
# queue's thread would stop every commit
export KHUB_WORK_THREADS=1 KHUB_BUILD_SOURCE_FETCH_THREADS=1 KHUB_BUILD_SOURCE_ALLOW="127.0.0.2/32, localhost" \
	KHUB_BUILD_SOURCE_LOW_SPEED_S=300 KHUB_BUILD_SOURCE_DEADLINE_S=600
khub_start

H=$TEST_DIR/h
B=$TEST_DIR/b
api() {	# api TOKEN METHOD PATH [BODY [CONTENT-TYPE]] -> $ST, body in $B
	local args=(-s --max-time 300 -D "$H" -o "$B" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H "Content-Type: ${5:-application/json}" --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}
j() { jq -rc "$1" "$B" 2>/dev/null; }	# j JQ-FILTER: on the last body
b64() { base64 -w0 "$@"; }
enqueue() { api "$ALICE" POST /api/kernels/acme/relu/builds "{\"source\":{\"url\":\"$1\",\"revision\":\"main\"},\"variants\":[\"$V\"]}"; }
sources_left() { ls -A "$KHUB_DATA_DIR/build-sources" 2>/dev/null | tr '\n' ' '; }
wait_for() {	# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
	local n=$(($1 * 10)); shift
	for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}
TARPITS=()
tarpit() {	# tarpit NAME MODE PORT [ARG]: a hostile upstream on 127.0.0.2
	mkdir -p "$TEST_DIR/$1"
	/usr/bin/python3 "$KHUB_SRC/tests/lib/tarpit.py" "$2" 127.0.0.2 "$3" "$TEST_DIR/$1" "${4-}" >"$TEST_DIR/$1.log" 2>&1 &
	TARPITS+=($!)
	wait_for 30 test -e "$TEST_DIR/$1/ready" || bail "tarpit $1 did not start"
}
stop_tarpits() { for p in "${TARPITS[@]}"; do kill "$p" 2>/dev/null; done; }

files=$(printf '{"path":"build.toml","content":"%s","encoding":"base64"}' "$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | b64)")
api "$ALICE" POST /api/repos/create "{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[$files]}"
is "$ST" 200 "acme/relu, the kernel the builds are for"
UP=$(printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' | b64)
api "$ALICE" POST /api/repos/create "{\"name\":\"upstream\",\"organization\":\"acme\",\"type\":\"model\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$UP\",\"encoding\":\"base64\"}]}"
is "$ST" 200 "acme/upstream, a git repo served by this server on 127.0.0.1"
api "$ALICE" POST /api/repos/create '{"name":"other","organization":"acme","type":"model"}'
is "$ST" 200 "acme/other, a repo that has nothing to do with builds"

# ---- addresses ----------------------------------------------------------------------------------
for url in "$KHUB_URL/acme/upstream" "http://[::1]:$KHUB_PORT/acme/upstream" \
	"http://[::ffff:127.0.0.1]:$KHUB_PORT/acme/upstream" "http://169.254.169.254/latest" "http://10.1.2.3/x.git" \
	"http://0.0.0.0:$KHUB_PORT/acme/upstream" "http://100.64.0.1/x" "git://127.0.0.1:1/x.git" \
	"https://127.0.0.1:$KHUB_PORT/acme/upstream" "http://[fe80::1]:80/x" "http://224.0.0.1/x"; do
	enqueue "$url"
	like "$ST $(j '.error')" "^422 cannot fetch .*(loopback, private, link-local or reserved)" "$url is refused: $(j '.error' | cut -c1-80)…"
done
is "$(sources_left)" "" "nothing left under build-sources/ after the refused fetches"

enqueue "http://localhost:$KHUB_PORT/acme/upstream"
is "$ST" 202 "an allow-listed host name (localhost) is fetched although it is loopback"
is "$(sources_left | wc -w)" 1 "… into one bare repo under build-sources/"
api "$ALICE" POST "/api/builds/$(j '.builds[0].id')/cancel" '{}'

RPORT=$(free_port)
tarpit redir redirect "$RPORT" "$KHUB_URL/acme/upstream"
enqueue "http://127.0.0.2:$RPORT/acme/upstream"
like "$ST $(j '.error')" "^422 cannot fetch .*127\\.0\\.0\\.1.*(loopback, private, link-local or reserved)" \
	"an allow-listed upstream that redirects to a loopback address is refused at the redirect"
is "$(sources_left | wc -w)" 1 "… and leaves no bare repo behind"

# ---- a tarpit holds the fetch pool, never the commits' --------------------------------------------
TP=$(free_port)
tarpit silent silent "$TP"
curl -s --max-time 600 -o "$TEST_DIR/t1.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
	-H 'Content-Type: application/json' --data-binary "{\"source\":{\"url\":\"http://127.0.0.2:$TP/a.git\"},\"variants\":[\"$V\"]}" \
	"$KHUB_URL/api/kernels/acme/relu/builds" >"$TEST_DIR/t1.code" &
T1=$!
wait_for 120 grep -qx 1 "$TEST_DIR/silent/open"
ok $? "a fetch from a tarpit that never answers holds its connection"
curl -s --max-time 600 -o "$TEST_DIR/t2.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE" \
	-H 'Content-Type: application/json' --data-binary "{\"source\":{\"url\":\"http://127.0.0.2:$TP/b.git\"},\"variants\":[\"$V\"]}" \
	"$KHUB_URL/api/kernels/acme/relu/builds" >"$TEST_DIR/t2.code" &
T2=$!
api "$ALICE" POST /api/models/acme/other/commit/main \
	"$(printf '{"key":"header","value":{"summary":"unrelated","description":""}}\n{"key":"file","value":{"content":"%s","path":"a.txt","encoding":"base64"}}\n' "$(printf hello | b64)")" \
	application/x-ndjson
is "$ST" 200 "a commit to another repo goes through while the tarpit holds the fetch"
is "$(cat "$TEST_DIR/silent/open")" 1 "… the tarpit's connection still being open then"
kill -0 "$T1" 2>/dev/null
ok $? "… and the fetch's request still waiting"
touch "$TEST_DIR/silent/release"	# the tarpit hangs up: the first fetch fails, the second is refused as fast
wait "$T1" "$T2"
is "$(cat "$TEST_DIR/t1.code") $(cat "$TEST_DIR/t2.code")" "422 422" "both tarpit fetches end in 422 once it hangs up"
is "$(sources_left | wc -w)" 1 "the failed fetches left nothing under build-sources/"
khub_stop

# ---- limits: the low-speed limit and the deadline --------------------------------------------------
export KHUB_BUILD_SOURCE_LOW_SPEED_BYTES=100 KHUB_BUILD_SOURCE_LOW_SPEED_S=3 KHUB_BUILD_SOURCE_DEADLINE_S=8 \
	KHUB_BUILD_SOURCE_ALLOW=127.0.0.2/32
mkdir -p "$KHUB_DATA_DIR/build-sources/0123456789abcdef01234567.git.new-AbC123/objects/pack"	# a crash mid-fetch
touch "$KHUB_DATA_DIR/build-sources/0123456789abcdef01234567.git.new-AbC123/objects/pack/x.pack"
khub_start
is "$(sources_left | wc -w)" 1 "a restart removes what a fetch cut short by a crash left"
enqueue "http://localhost:$KHUB_PORT/acme/upstream"
like "$ST $(j '.error')" "^422 cannot fetch .*localhost resolves to .*(loopback, private, link-local or reserved)" \
	"a host name is checked on the addresses DNS gives (localhost, no longer allow-listed, is refused)"
rm -f "$TEST_DIR/silent/release"
enqueue "http://127.0.0.2:$TP/c.git"
like "$ST $(j '.error')" "^422 cannot fetch .*too slow: 0 bytes in 3 s" "a silent upstream fails the low-speed limit, with the reason"
TR=$(free_port)
tarpit trickle trickle "$TR" 0.5
enqueue "http://127.0.0.2:$TR/d.git"
like "$ST $(j '.error')" "^422 cannot fetch .*too slow: [0-9]+ bytes in 3 s" "an upstream trickling a byte every half second fails the low-speed limit"
FL=$(free_port)
tarpit flood flood "$FL" 2000
enqueue "http://127.0.0.2:$FL/e.git"
like "$ST $(j '.error')" "^422 cannot fetch .*longer than build_source_deadline_s \\(8 s\\)" \
	"an upstream sending an endless answer fast enough for the low-speed limit fails at the deadline"
is "$(sources_left | wc -w)" 1 "still nothing left behind"
stop_tarpits
done_testing
