# tests/lib/bench_kernel.sh -- the kernel sources of the benchmark tests
# (sourced after khub-test.sh): a noarch relu, its benchmark script and a
# script that attacks the sandbox it runs in.

# bench_needs: $WORKER_BIN (the khub-worker built with khub) and $PY
# (Debian's python3 with torch), bubblewrap and root, or the test skips.
. "$KHUB_SRC/tests/lib/worker_env.sh"
bench_needs() {
	worker_needs torch bwrap root
}

# bench_noarch_tree DIR: DIR/build.toml (noarch, the cpu backend) and
# DIR/torch-ext/relu/__init__.py (relu is torch.relu); DIR/benchmarks made.
bench_noarch_tree() {
	mkdir -p "$1/torch-ext/relu" "$1/benchmarks"
	printf '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n' \
		>"$1/build.toml"
	printf 'import torch\n\n\ndef relu(x):\n    return torch.relu(x)\n' >"$1/torch-ext/relu/__init__.py"
}

# bench_relu_script FILE SIDE CASE [verify]: ReluBenchmark, whose
# benchmark_CASE is the kernel's relu of a SIDE x SIDE tensor; with verify,
# also verify_CASE (torch.relu of it).
bench_relu_script() {
	cat >"$1" <<PY
import torch
from kernels.benchmark import Benchmark


class ReluBenchmark(Benchmark):
    def setup(self):
        self.x = torch.randn($2, $2, device=self.device)

    def benchmark_$3(self):
        self.out = self.kernel.relu(self.x)
PY
	[ "${4:-}" != verify ] || printf '\n    def verify_%s(self):\n        return torch.relu(self.x)\n' "$3" >>"$1"
}

# bench_attack_script FILE TOKEN_FILE PORT PORT_NAME: a benchmark script
# that reads TOKEN_FILE, connects to 1.1.1.1:80 and to 127.0.0.1:PORT
# (attempts named token-file, network and PORT_NAME), prints "attack
# refused NAME: ..." or "ATTACK SUCCEEDED NAME: ..." for each, then fails.
bench_attack_script() {
	cat >"$1" <<PY
import socket
from kernels.benchmark import Benchmark

def attempt(what, fn):
    try:
        got = fn()
        print("ATTACK SUCCEEDED " + what + ": " + repr(got), flush=True)
    except Exception as e:
        print("attack refused " + what + ": " + type(e).__name__ + ": " + str(e), flush=True)

attempt("token-file", lambda: open("$2").read())
attempt("network", lambda: socket.create_connection(("1.1.1.1", 80), timeout=5))
attempt("$4", lambda: socket.create_connection(("127.0.0.1", $3), timeout=5))
raise SystemExit("the attack script stops here")
PY
}
