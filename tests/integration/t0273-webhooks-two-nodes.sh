#!/bin/bash
# t0273-webhooks-two-nodes.sh -- two khub serve nodes on one PostgreSQL
# deliver a repo's queued webhook deliveries once each (docs/webhooks.md:
# claimed FOR UPDATE SKIP LOCKED, leased while in flight): ten commits
# made by `khub import` while no node runs are queued in the database;
# both nodes then start and race for them, the receiver answering slowly
# so that attempts overlap; it gets ten POSTs, ten distinct deliveries,
# each its first and only attempt, and the delivery log has one attempt
# per delivery.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
export KHUB_WEBHOOKS_ALLOW_PRIVATE=1 KHUB_WEBHOOK_POLL_MS=50
khub_fixture	# acme/relu, $ALICE, node 1 on $KHUB_URL
. "$KHUB_SRC/tests/lib/webhooks.sh"
recv_start
B=$TEST_DIR/b
SECRET=two-nodes-secret-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)
ST=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" -H 'Content-Type: application/json' \
	--data-binary "{\"url\":\"http://127.0.0.1:$RECV_PORT/h\",\"secret\":\"$SECRET\",\"scopes\":[\"repo.content\"]}" \
	"$KHUB_URL/api/kernels/acme/relu/webhooks")
is "$ST" 201 "a hook to the receiver"
HOOK=$(jq -r .webhook.id "$B")
khub_stop

for i in $(seq 1 10); do
	printf 'change %s\n' "$i" >"$SRC/CHANGE.md"
	khub import "$SRC" --repo acme/relu --branch main >>"$TEST_DIR/import.log" 2>&1 || break
done
ok $? "ten commits by khub import while no node runs"
is "$(recv_count)" 0 "nothing delivered yet"

echo 0.3 >"$RECV/delay"
NODE2_PID=
trap 'recv_stop; [ -n "$NODE2_PID" ] && kill -TERM "$NODE2_PID" 2>/dev/null && wait "$NODE2_PID"; khub_teardown' EXIT
PORT2=$(free_port)
KHUB_EMBEDDED_DB_LINGER_S=$KHUB_TEST_LINGER_S KHUB_LISTEN=127.0.0.1:$PORT2 "$KHUB_BIN" serve >>"$TEST_DIR/node2.log" 2>&1 &
NODE2_PID=$!
khub_start
for _ in $(seq 1 300); do
	curl -sf "http://127.0.0.1:$PORT2/api/health" >/dev/null 2>&1 && break
	sleep 0.1
done
check "node 2 answers" -- curl -sf "http://127.0.0.1:$PORT2/api/health"
recv_wait 10
ok $? "ten POSTs received"
# a claim taken twice would show now, or as an eleventh POST while the log settles
for _ in $(seq 1 300); do
	curl -s -o "$B" -H "Authorization: Bearer $ALICE" "$KHUB_URL/api/kernels/acme/relu/webhooks/$HOOK/deliveries"
	[ "$(jq '[.deliveries[] | select(.state == "delivered")] | length' "$B")" -ge 10 ] && break
	sleep 0.1
done
is "$(recv_count)" 10 "exactly ten"
is "$(for n in $(seq 1 10); do recv_get $n '.headers["x-khub-delivery"]'; done | sort -u | wc -l)" 10 "ten distinct deliveries"
is "$(for n in $(seq 1 10); do recv_get $n '.headers["x-khub-attempt"]'; done | sort -u | tr '\n' ' ')" "1 " \
	"each POST was its delivery's first attempt"
is "$(jq -c '[(.deliveries | length), ([.deliveries[].delivery] | unique | length), ([.deliveries[] | .attempt] | unique)]' "$B")" \
	"[10,10,[1]]" "the log: ten deliveries, one attempt each"
bad=0
for n in $(seq 1 10); do recv_signed $n "$SECRET" || bad=$((bad + 1)); done
is "$bad" 0 "every POST signed"
diag "node 1 delivered $(grep -c 'webhooks: delivery' "$TEST_DIR/server.log"), node 2 $(grep -c 'webhooks: delivery' "$TEST_DIR/node2.log")"
done_testing
