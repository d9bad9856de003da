# farm_bench.sh -- seeding farm benchmark runs through the real routes, for
# the tests that read them (source after khub-test.sh): a kernel made by
# POST /api/repos/create, build jobs claimed by a worker, and what the
# worker measured posted to POST /api/builds/{id}/benchmark under the job's
# lease (docs/build-farm.md).
#
#   fb_api TOKEN METHOD PATH [BODY]      -> $ST; the body in $FB_BODY
#   fb_kernel NS/NAME TOKEN [private]    -> the repo with a torch-ext wrapper; its main in $FB_SHA
#   fb_commit NS/NAME TOKEN TEXT         -> a commit of the wrapper's text on main, in $FB_SHA
#   fb_job NS/NAME SHA WORKER VARIANT    -> a job of SHA claimed by WORKER, in $FB_JOB (TOKEN: $ALICE)
#   fb_run JOB SHA DEVICE "WORKLOAD MEAN STD; ..." [TORCH] -> the farm run of JOB; $ST
FB_BODY=$TEST_DIR/fb_body

fb_api() {
	local args=(-s -o "$FB_BODY" -w '%{http_code}' -X "$2")
	[ -n "$1" ] && args+=(-H "Authorization: Bearer $1")
	[ -n "${4-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	ST=$(curl "${args[@]}" "$KHUB_URL$3")
}

fb_kernel() {
	local ns=${1%/*} name=${1#*/} private=false
	[ "${3-}" = private ] && private=true
	printf '[general]\nname = "%s"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n' \
		"$name" | base64 -w0 >"$TEST_DIR/fb_toml"
	printf 'import torch\n\ndef %s(x):\n    return torch.relu(x)\n' "$name" | base64 -w0 >"$TEST_DIR/fb_init"
	fb_api "$2" POST /api/repos/create "{\"name\":\"$name\",\"organization\":\"$ns\",\"type\":\"kernel\",\"private\":$private,\"files\":[{\"path\":\"build.toml\",\"content\":\"$(cat "$TEST_DIR/fb_toml")\",\"encoding\":\"base64\"},{\"path\":\"torch-ext/$name/__init__.py\",\"content\":\"$(cat "$TEST_DIR/fb_init")\",\"encoding\":\"base64\"}]}"
	FB_SHA=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/$ns/$name.git" rev-parse main 2>/dev/null)
}

fb_commit() {
	local ns=${1%/*} name=${1#*/}
	fb_api "$2" POST "/api/kernels/$1/commit/main" "$(printf '{"key":"header","value":{"summary":"change"}}\n{"key":"file","value":{"content":"%s","path":"torch-ext/%s/__init__.py","encoding":"base64"}}\n' \
		"$(printf '%s' "$3" | base64 -w0)" "$name")"
	FB_SHA=$(git --git-dir="$KHUB_DATA_DIR/repos/kernels/$ns/$name.git" rev-parse main 2>/dev/null)
}

fb_job() {
	fb_api "$ALICE" POST "/api/kernels/$1/builds" "{\"revision\":\"$2\",\"variants\":[\"$4\"]}"
	FB_JOB=
	for _ in 1 2 3 4; do
		fb_api "$3" POST /api/workers/claim "{\"variants\":[\"$4\"]}"
		[ "$ST" = 200 ] || break
		[ "$(jq -r .build.commit "$FB_BODY")" = "$2" ] && { FB_JOB=$(jq -r .build.id "$FB_BODY"); break; }
	done
}

# fb_payload SHA DEVICE SPEC [TORCH]: the kernels payload (min and max are
# the mean -/+ the std).
fb_payload() {
	jq -n --arg sha "${1:0:7}" --arg dev "$2" --arg spec "$3" --arg torch "${4:-2.11.0}" '
	  {results: [$spec | split(";")[] | ltrimstr(" ") | split(" ") | {workload: .[0],
	     timingResults: {mean_ms: (.[1] | tonumber), std_ms: (.[2] | tonumber),
	       min_ms: ((.[1] | tonumber) - (.[2] | tonumber)), max_ms: ((.[1] | tonumber) + (.[2] | tonumber)),
	       q1_ms: 0, q3_ms: 0, iqr_ms: 0, outliers: 0, iterations: 100}, verified: true}],
	   machineInfo: {gpu: $dev, backend: "CPU", pytorchVersion: $torch, os: "Linux", cpu: "x86_64"},
	   kernelCommitSha: $sha, benchmarkScriptPath: "benchmarks/benchmark_relu.py"}'
}

fb_run() {
	local worker=${FB_WORKER:?fb_run needs FB_WORKER, the worker token holding the job}
	fb_api "$worker" POST "/api/builds/$1/benchmark" "$(fb_payload "$2" "$3" "$4" "${5-}")"
}
