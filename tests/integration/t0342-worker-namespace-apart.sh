#!/bin/bash
# t0342-worker-namespace-apart.sh -- with the binding served from the build
# cache (compiled once for the runtime namespace), each commit and each repo
# still gets its own op namespace: acme/relu builds commit 1, then commit 2
# (one line of build.toml changed: every unit a cache hit), then commit 1
# again (every unit a hit, after commit 2 went through the same cached
# objects); other/relu, a repo with the same module in the same cache root,
# builds commit 3. Each library names its own namespace only (never another
# commit's, never the fixed identifier khub_ops); commit 1 rebuilt is byte for byte commit
# 1's first build; the three variants load in one Python process, each
# registering its op under its own namespace, and compute relu.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/khub-test.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../lib/worker_build.sh"

worker_build_setup t0342
C1=1111111111111111111111111111111111111111
C2=2222222222222222222222222222222222222222
C3=3333333333333333333333333333333333333333
cp -r "$KHUB_SRC/examples/relu" "$T/k1"
chmod -R a+rX "$T/k1"
cp -r "$T/k1" "$T/k2"
printf '\n# one more line\n' >>"$T/k2/build.toml"
wbuild a1 "$T/k1" $C1 --repo acme/relu --cache-root "$T/ccache" &
wbuild b3 "$T/k1" $C3 --repo other/relu --cache-root "$T/ccache" &
wait
wbuild a2 "$T/k2" $C2 --repo acme/relu --cache-root "$T/ccache"
wbuild a1again "$T/k1" $C1 --repo acme/relu --cache-root "$T/ccache"
is "$(cat "$T/a1.rc")/$(cat "$T/a2.rc")/$(cat "$T/a1again.rc")/$(cat "$T/b3.rc")" 0/0/0/0 "the four builds exit 0"
is "$(cache_field a2 hits)/$(cache_field a2 misses)" "2/0" "acme commit 2: both units (the binding too) from the cache"
is "$(cache_field a1again hits)/$(cache_field a1again misses)" "2/0" "acme commit 1 again: both units from the cache"
is "$(cache_field b3 hits)/$(cache_field b3 misses)" "0/2" "other/relu: nothing from acme's cache (a cache of its own)"
names() {	# names BUILD NS: the namespaces of relu builds found in build BUILD's .so, and khub_ops
	grep -aoE '(_relu_cpu_(1111111|2222222|3333333)|khub_ops)' "$T/out-$1/$VARIANT/$2.abi3.so" | sort -u | tr '\n' ' '
}
is "$(names a1 _relu_cpu_1111111)" "_relu_cpu_1111111 " "commit 1's library names its namespace only"
is "$(names a2 _relu_cpu_2222222)" "_relu_cpu_2222222 " "commit 2's, from commit 1's cached objects, its own only"
is "$(names a1again _relu_cpu_1111111)" "_relu_cpu_1111111 " "commit 1 again, after commit 2, its own only"
is "$(names b3 _relu_cpu_3333333)" "_relu_cpu_3333333 " "other/relu's commit 3: its own only"
check "commit 1 rebuilt from the cache is byte for byte its first build" -- diff -r "$T/out-a1/$VARIANT" "$T/out-a1again/$VARIANT"
is "$($PY - "$T" "$VARIANT" <<'PY' 2>&1
import importlib.util, json, os, sys, torch
t, variant = sys.argv[1], sys.argv[2]
seen = []
for build in ("a1", "a2", "b3"):
    d = os.path.join(t, "out-" + build, variant)
    kid = json.load(open(os.path.join(d, "metadata.json")))["id"]
    spec = importlib.util.spec_from_file_location(kid, os.path.join(d, "__init__.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[kid] = mod
    spec.loader.exec_module(mod)
    x = torch.randn(100)
    out = torch.empty_like(x)
    getattr(torch.ops, kid).relu(out, x)
    seen.append("%s:%s" % (kid, "relu" if torch.equal(out, torch.relu(x)) else "WRONG"))
print(" ".join(seen))
PY
)" "_relu_cpu_1111111:relu _relu_cpu_2222222:relu _relu_cpu_3333333:relu" \
	"the three load in one process, each op under its own namespace, each computing relu"
done_testing
