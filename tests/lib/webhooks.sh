# tests/lib/webhooks.sh -- a real receiver for the webhook tests (sourced
# after khub-test.sh): tests/lib/webhook_receiver.py, which records each
# POST in $RECV/requests (a JSON line: n, path, status, headers, body) and
# its body byte for byte in $RECV/body.N, and answers the statuses listed
# in $RECV/statuses first (one a line), then 200.
RECV=$TEST_DIR/receiver
mkdir -p "$RECV"
RECV_PID=
# recv_start [PORT]: start it (default: a free port) and wait until it listens; $RECV_PORT
recv_start() {
	rm -f "$RECV/port"
	/usr/bin/python3 "$KHUB_SRC/tests/lib/webhook_receiver.py" "$RECV" ${1:-} >>"$RECV/log" 2>&1 &
	RECV_PID=$!
	for _ in $(seq 1 600); do
		[ -s "$RECV/port" ] && break
		kill -0 "$RECV_PID" 2>/dev/null || bail "the webhook receiver exited: $(tail -3 "$RECV/log")"
		sleep 0.1
	done
	[ -s "$RECV/port" ] || bail "the webhook receiver did not start"
	RECV_PORT=$(cat "$RECV/port")
}
recv_stop() {
	if [ -n "$RECV_PID" ]; then
		kill "$RECV_PID" 2>/dev/null
		wait "$RECV_PID" 2>/dev/null
	fi
	RECV_PID=
}
trap 'recv_stop; khub_teardown' EXIT
# recv_count: the requests received so far
recv_count() { if [ -f "$RECV/requests" ]; then wc -l <"$RECV/requests"; else echo 0; fi; }
# recv_wait N: wait (at most 120 s) until N requests have come; fails otherwise
recv_wait() {
	for _ in $(seq 1 1200); do
		[ "$(recv_count)" -ge "$1" ] && return 0
		sleep 0.1
	done
	diag "waited for request $1, have $(recv_count)"
	return 1
}
# recv_get N JQ-EXPR: of request N
recv_get() { sed -n "${1}p" "$RECV/requests" | jq -r "$2"; }
# recv_signed N SECRET: its X-Khub-Signature-256 is the HMAC-SHA256 of its body under SECRET (openssl)
recv_signed() {
	local want
	want="sha256=$(openssl dgst -sha256 -hmac "$2" -r "$RECV/body.$1" | cut -d' ' -f1)"
	[ "$(recv_get "$1" '.headers["x-khub-signature-256"]')" = "$want" ]
}
