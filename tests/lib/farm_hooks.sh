# tests/lib/farm_hooks.sh -- a hub for the tests of the build farm's webhooks
# (sourced after khub-test.sh; docs/webhooks.md): farm_hooks_hub starts it,
# farm_hooks_kernel makes acme/relu, a kernel the farm builds.
# farm_hooks_hub WORKER RETRY_DELAYS VARIANT...: khub_setup; the build
# variants VARIANT... ($TEST_DIR/variants.json), webhooks to private
# addresses allowed, polled every 100 ms and retried after RETRY_DELAYS;
# alice, admin of acme ($ALICE, khub_accounts); worker WORKER, its token in
# $W1; khub_start (with the caller's environment: a prefix such as
# KHUB_BUILD_LEASE_SECONDS=2 reaches the server); then a webhook receiver
# (tests/lib/webhooks.sh: recv_start, $RECV_PORT). $H and $B are files for
# the tests' requests.
farm_hooks_hub() {
	local worker=$1 retry=$2 variants; shift 2
	khub_setup
	variants=$(printf '"%s", ' "$@")
	printf '{"x86_64-linux": {"cpu": [%s]}}\n' "${variants%, }" >"$TEST_DIR/variants.json"
	export KHUB_BUILD_VARIANTS=$TEST_DIR/variants.json KHUB_WEBHOOKS_ALLOW_PRIVATE=1 KHUB_WEBHOOK_POLL_MS=100 \
		KHUB_WEBHOOK_RETRY_DELAYS=$retry
	log=$TEST_DIR/setup.log
	khub_accounts
	W1=$(khub admin worker add "$worker" 2>>"$log" | tail -n 1)
	khub_start
	. "$KHUB_SRC/tests/lib/webhooks.sh"
	recv_start
	H=$TEST_DIR/h
	B=$TEST_DIR/b
}

b64() { base64 -w0 "$@"; }

# farm_hooks_kernel INIT_PY: acme/relu, made by alice (POST
# /api/repos/create) with a build.toml for the cpu backend and INIT_PY's
# text as torch-ext/relu/__init__.py; the status in $CREATE_STATUS, the
# commit of main in $C1.
farm_hooks_kernel() {
	printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' \
		>"$TEST_DIR/build.toml"
	printf '%s' "$1" >"$TEST_DIR/init.py"
	CREATE_STATUS=$(curl -s -o "$B" -w '%{http_code}' -H "Authorization: Bearer $ALICE" \
		-H 'Content-Type: application/json' --data-binary \
		"{\"name\":\"relu\",\"organization\":\"acme\",\"type\":\"kernel\",\"files\":[{\"path\":\"build.toml\",\"content\":\"$(b64 "$TEST_DIR/build.toml")\",\"encoding\":\"base64\"},{\"path\":\"torch-ext/relu/__init__.py\",\"content\":\"$(b64 "$TEST_DIR/init.py")\",\"encoding\":\"base64\"}]}" \
		"$KHUB_URL/api/repos/create")
	C1=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/acme/relu.git" rev-parse main 2>/dev/null)
}
