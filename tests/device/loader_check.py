"""loader_check.py -- drive the REAL `kernels` loader against a running khub.

Run by run_loader_check.sh with HF_ENDPOINT pointing at khub. Prints one
'PASS name' or 'FAIL name: why' line per check and exits non-zero on any
FAIL. Mode 'cold' (default) runs every check; 'warm' runs get_kernel once
more in a fresh process over the cache the cold run left.

Environment (set by run_loader_check.sh):
  KHUB_REPO             the demo kernel repo (khub-demo/relu)
  KHUB_UNTRUSTED_REPO   the same kernel under an org without the trust flag
  EXPECT_WEIGHTS_SHA256 sha256 of the LFS file build/*/weights.bin
  EXPECT_ARCH_VARIANT   name of the compiled CUDA variant, or empty
  KHUB_ENDPOINT         khub's base URL (for the kernel API checks)
  KHUB_WRITE_TOKEN      a write-scope token of a member of the org (bob)
  KHUB_V1_SHA           the commit branch v1 points at

The cold run also checks khub's own kernel API against what the loader did:
GET .../variants?compatible=true for this client must rank first the variant
get_kernel loaded; a benchmark of the loaded relu (CUDA-event timings), built
with kernels' own BenchmarkResult.to_payload(), must upload with the write
token and read back unchanged from GET .../benchmarks; and GET .../downloads
must count the loaded variant.
"""

import json
import logging
import os
import platform
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

failures = 0


def report(name, ok, why=""):
    global failures
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {why}", flush=True)


def check(name, fn):
    try:
        res = fn()
    except Exception as e:  # noqa: BLE001 -- every failure is a FAIL line
        traceback.print_exc()
        report(name, False, f"{type(e).__name__}: {e}")
        return None
    return res


# ---- khub's kernel API, next to what the loader did -----------------------

def http_json(method, url, body=None, token=None):
    """(status, parsed JSON or text) of one request; never raises on 4xx/5xx."""
    data = None
    headers = {"Accept": "application/json"}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def loaded_variant(module):
    """The build variant a loaded kernel module came from: the directory
    after build/ in its __file__ (…/snapshots/<sha>/build/<variant>/…)."""
    parts = Path(module.__file__).parts    # not resolved: cache files link to blobs/
    for i, part in enumerate(parts[:-1]):
        if part == "build" and i + 1 < len(parts) - 1:
            return parts[i + 1]
    return None


def check_variants_endpoint(torch, api, k):
    """(b) khub's variant index picks, for this client, what the loader loaded."""
    print("-- GET variants?compatible=true vs the variant get_kernel(version=1) loaded", flush=True)
    want = loaded_variant(k)
    print(f"  loaded module {k.__name__} from {k.__file__} -> variant {want}", flush=True)
    tv = torch.__version__.split("+")[0].split(".")
    q = {"revision": "v1", "compatible": "true", "torch": f"{tv[0]}.{tv[1]}"}
    if torch.version.cuda:
        q["cuda"] = torch.version.cuda
    q.update({"arch": "x86_64", "os": "linux"})
    url = f"{api}/variants?{urllib.parse.urlencode(q)}"
    status, body = http_json("GET", url)
    print(f"  GET {url} -> {status}", flush=True)
    if status != 200 or not isinstance(body, dict):
        report("variants endpoint answers 200", False, f"{status} {body}")
        return
    accepted = [v["name"] for v in body.get("variants", [])]
    print(f"  environment {json.dumps(body.get('environment'))}", flush=True)
    print(f"  selected {body.get('selected')}; accepted (best first) {accepted}", flush=True)
    for r in body.get("rejected", []):
        print(f"  rejected {r['name']}: {r['reason']}", flush=True)
    if body.get("warnings"):
        print(f"  warnings {body['warnings']}", flush=True)
    first = accepted[0] if accepted else None
    report("variants?compatible=true ranks first the variant the loader loaded",
           want is not None and first == want and body.get("selected") == want,
           f"first {first}, selected {body.get('selected')}, loader loaded {want}")
    report("variants endpoint's sha is branch v1's", body.get("sha") == os.environ.get("KHUB_V1_SHA"),
           f"sha {body.get('sha')}, v1 {os.environ.get('KHUB_V1_SHA')}")
    # The loader's own ranking of the same revision, accepted variants in order.
    import kernels
    if hasattr(kernels, "get_kernel_variants") and hasattr(kernels, "VariantAccepted"):
        repo = os.environ.get("KHUB_REPO", "khub-demo/relu")
        loader = [d.variant.variant_str for d in kernels.get_kernel_variants(repo, version=1)
                  if isinstance(d, kernels.VariantAccepted)]
        report("variants endpoint's accepted list equals the loader's, in order", loader == accepted,
               f"khub {accepted}, loader {loader}")


def load_kernels_cli_benchmark():
    """kernels/cli/benchmark.py of the kernels package in use, and where it
    came from. `import kernels.cli.benchmark` runs kernels/cli/__init__.py,
    which imports the signature verifier and so cryptography and sigstore;
    benchmark.py itself needs only huggingface_hub, torch and kernels, so
    without those extras it is loaded from its file. None when neither works
    (the payload is then a copy of to_payload's shape)."""
    try:
        from kernels.cli import benchmark as kb
        return kb, "kernels.cli.benchmark (the real dataclasses)"
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}"
    try:
        import importlib.util
        import kernels
        path = Path(kernels.__file__).parent / "cli" / "benchmark.py"
        spec = importlib.util.spec_from_file_location("khub_check_kernels_cli_benchmark", path)
        kb = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = kb
        spec.loader.exec_module(kb)
        return kb, f"{path} loaded from its file (the real dataclasses; import kernels.cli failed: {why})"
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return None, f"a copy of its shape (import kernels.cli failed: {why}; loading the file: {type(e).__name__}: {e})"


def time_cuda(torch, fn, warmup, iterations):
    """Per-call times in ms from CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iterations)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def check_benchmark_upload(torch, api, k):
    """(c) a real GPU timing of the loaded relu, uploaded as kernels would."""
    print("-- POST benchmarks (kernels' BenchmarkResult.to_payload) and GET it back", flush=True)
    token = os.environ.get("KHUB_WRITE_TOKEN", "")
    v1 = os.environ.get("KHUB_V1_SHA", "")
    if not token:
        report("benchmark upload", False, "no write token (KHUB_WRITE_TOKEN)")
        return
    kb, source = load_kernels_cli_benchmark()
    print(f"  payload from {source}", flush=True)

    x = torch.randn(1 << 24, device="cuda")   # 64 MiB of float32
    warmup, iterations = 5, 30
    out = {}

    def stats(times):
        n = len(times)
        mean = sum(times) / n
        std = (sum((t - mean) ** 2 for t in times) / n) ** 0.5
        if kb is not None:
            q1, q3, iqr, outliers = kb._calculate_iqr_and_outliers(times)
        else:
            s_ = sorted(times)
            pct = lambda p: s_[int((n - 1) * p / 100)] * (1 - ((n - 1) * p / 100 % 1)) + \
                s_[min(int((n - 1) * p / 100) + 1, n - 1)] * ((n - 1) * p / 100 % 1)
            q1, q3 = pct(25), pct(75)
            iqr = q3 - q1
            outliers = sum(1 for t in times if t < q1 - 1.5 * iqr or t > q3 + 1.5 * iqr)
        return dict(mean_ms=round(mean, 4), std_ms=round(std, 4), min_ms=round(min(times), 4),
                    max_ms=round(max(times), 4), iterations=n, q1_ms=round(q1, 4), q3_ms=round(q3, 4),
                    iqr_ms=round(iqr, 4), outliers=outliers)

    ok_relu = bool(torch.equal(k.relu(x), torch.relu(x)))
    out["ReluBenchmark.relu"] = dict(stats(time_cuda(torch, lambda: k.relu(x), warmup, iterations)),
                                     verified=ok_relu)
    out["ReluBenchmark.reference"] = stats(time_cuda(torch, lambda: torch.relu(x), warmup, iterations))
    for name, t in out.items():
        gbps = 2 * x.numel() * 4 / (t["mean_ms"] * 1e-3) / 1e9 if t["mean_ms"] > 0 else 0
        print(f"  {name}: mean {t['mean_ms']} ms (std {t['std_ms']}, min {t['min_ms']}, max {t['max_ms']}, "
              f"{t['iterations']} iterations) ~{gbps:.0f} GB/s", flush=True)

    # kernels sends the short sha from the module name (_<name>_<sha>); the
    # demo's module ids end in the variant, so send v1's short sha instead.
    script = Path(__file__).read_bytes()
    import hashlib
    script_sha = hashlib.sha256(script).hexdigest()
    payload = None
    if kb is not None:
        try:
            print(f"  (kernels' get_kernel_sha_from_build_name(module) would send "
                  f"{kb.get_kernel_sha_from_build_name(k)!r})", flush=True)
            # kernels v0.16.0's collect_machine_info() tests `_backend() in
            # {"cuda", "rocm"}`, but _backend() returns a Backend object, not
            # its name: on a CUDA machine it reports backend "CPU" and gpu
            # "N/A". Send what it means to send (as run_benchmark_class's
            # `_backend().name` does), in its own MachineInfo dataclass.
            mi = kb.collect_machine_info()
            print(f"  kernels' collect_machine_info() -> {mi}", flush=True)
            gpu, backend = torch.cuda.get_device_name(0), f"CUDA {torch.version.cuda}"
            if (mi.gpu, mi.backend) != (gpu, backend):
                print(f"NOTE kernels' collect_machine_info() reports gpu {mi.gpu!r}, backend {mi.backend!r} on "
                      f"{gpu} with {backend} (upstream bug: _backend() compared with strings); sending "
                      f"gpu {gpu!r}, backend {backend!r}", flush=True)
                mi = kb.MachineInfo(gpu=gpu, backend=backend, pytorch_version=mi.pytorch_version, os=mi.os,
                                    cpu=mi.cpu, gpu_cores=mi.gpu_cores)
            result = kb.BenchmarkResult(
                timing_results={n: kb.TimingResults(**t) for n, t in out.items()},
                machine_info=mi, kernel_commit_sha=v1[:7],
                benchmark_script_path="tests/device/loader_check.py", benchmark_script_sha=script_sha)
            payload = result.to_payload()
            print("  payload built by kernels' BenchmarkResult.to_payload()", flush=True)
        except Exception:  # noqa: BLE001 -- fall back to the copy of its shape
            traceback.print_exc()
            print("  kernels' dataclasses refused the values: payload is a copy of to_payload's shape", flush=True)
    if payload is None:
        payload = {
            "results": [{"workload": n, "timingResults": {kk: t[kk] for kk in (
                "mean_ms", "std_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "iqr_ms", "outliers", "iterations")},
                **({"verified": t["verified"]} if t.get("verified") is not None else {})}
                for n, t in sorted(out.items())],
            "machineInfo": {"gpu": torch.cuda.get_device_name(0), "backend": f"CUDA {torch.version.cuda}",
                            "pytorchVersion": torch.__version__,
                            "os": f"{platform.system()} {platform.release()}",
                            "cpu": platform.processor() or platform.machine() or "Unknown"},
            "kernelCommitSha": v1[:7], "benchmarkScriptPath": "tests/device/loader_check.py",
            "benchmarkScriptSha": script_sha,
        }
    print(f"  payload {json.dumps(payload)}", flush=True)

    status, body = http_json("POST", f"{api}/benchmarks", payload)
    report("benchmark upload without a token is refused (401)", status == 401, f"{status} {body}")
    status, body = http_json("POST", f"{api}/benchmarks", payload, token=token)
    print(f"  POST {api}/benchmarks -> {status} {body}", flush=True)
    if not (status == 200 and isinstance(body, dict) and isinstance(body.get("id"), int)):
        report("benchmark upload with bob's write token answers 200 with an id", False, f"{status} {body}")
        return
    report("benchmark upload with bob's write token answers 200 with an id", True)
    report("benchmark upload resolved kernelCommitSha to v1's commit", body.get("commit") == v1,
           f"commit {body.get('commit')}, v1 {v1}")
    run_id = body["id"]

    status, runs = http_json("GET", f"{api}/benchmarks?id={run_id}")
    print(f"  GET {api}/benchmarks?id={run_id} -> {status} {json.dumps(runs)}", flush=True)
    run = runs[0] if status == 200 and isinstance(runs, list) and len(runs) == 1 else None
    if run is None:
        report("GET benchmarks?id= returns the run", False, f"{status} {runs}")
        return
    diffs = []
    for key in ("kernelCommitSha", "benchmarkScriptPath", "benchmarkScriptSha", "machineInfo", "results"):
        if run.get(key) != payload.get(key):
            diffs.append(f"{key}: sent {payload.get(key)!r}, got {run.get(key)!r}")
    if run.get("commit") != v1:
        diffs.append(f"commit {run.get('commit')} != {v1}")
    if run.get("submitter") != "bob":
        diffs.append(f"submitter {run.get('submitter')!r}")
    report("benchmark round-trips (payload fields equal, commit v1, submitter bob)", not diffs, "; ".join(diffs))

    status, lst = http_json("GET", f"{api}/benchmarks?revision=v1&variant={loaded_variant(k)}")
    ids = [r.get("id") for r in lst] if isinstance(lst, list) else lst
    report("GET benchmarks?revision=v1&variant=<loaded> lists the run", status == 200 and run_id in ids,
           f"{status} {ids}")
    status, agg = http_json("GET", f"{api}/benchmarks/aggregate")
    print(f"  GET {api}/benchmarks/aggregate -> {status} {json.dumps(agg)}", flush=True)
    row = next((r for r in agg.get("results", []) if r.get("workload") == "ReluBenchmark.relu"), None) \
        if isinstance(agg, dict) else None
    want_speedup = out["ReluBenchmark.reference"]["mean_ms"] / out["ReluBenchmark.relu"]["mean_ms"]
    report("benchmarks/aggregate compares relu with its reference",
           row is not None and row.get("speedup") is not None and abs(row["speedup"] - want_speedup) < 1e-9,
           f"row {row}, want speedup {want_speedup}")


def check_downloads(api, variant):
    """(d) the variant get_kernel loaded is counted (flushed every 500 ms)."""
    print(f"-- GET downloads [expect {variant} counted]", flush=True)
    body, total = None, 0
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status, body = http_json("GET", f"{api}/downloads")
        if status == 200 and isinstance(body, dict):
            entry = next((v for v in body.get("variants", []) if v.get("variant") == variant), None)
            total = entry["total"] if entry else 0
            if total >= 1:
                break
        time.sleep(0.5)
    print(f"  GET {api}/downloads -> {json.dumps(body)}", flush=True)
    report("downloads counts the variant the loader loaded", total >= 1, f"{variant}: {total}; {body}")
    if isinstance(body, dict):
        rows = [r for r in body.get("rows", []) if r.get("variant") == variant]
        import kernels
        report("downloads rows carry the client's kernels version from its User-Agent",
               any(r.get("kernels") == kernels.__version__ for r in rows),
               f"rows {rows} (HF_HUB_DISABLE_TELEMETRY={os.environ.get('HF_HUB_DISABLE_TELEMETRY')})")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "cold"
    # httpx logs one INFO line per request with the full URL and status:
    # the client's view of the sequence, next to khub's access log.
    logging.basicConfig(level=logging.WARNING, format="client: %(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.INFO)

    repo = os.environ.get("KHUB_REPO", "khub-demo/relu")
    untrusted = os.environ.get("KHUB_UNTRUSTED_REPO", "")
    want_sha = os.environ.get("EXPECT_WEIGHTS_SHA256", "")
    arch_variant = os.environ.get("EXPECT_ARCH_VARIANT", "")

    import torch
    import huggingface_hub
    import kernels

    cuda = torch.cuda.is_available()
    print(
        f"versions: kernels {kernels.__version__} ({os.path.dirname(kernels.__file__)}), "
        f"huggingface_hub {huggingface_hub.__version__}, torch {torch.__version__} "
        f"(cuda {torch.version.cuda}, available {cuda}), python {sys.version.split()[0]}",
        flush=True,
    )
    print(f"HF_ENDPOINT={os.environ.get('HF_ENDPOINT')} HF_HUB_CACHE={huggingface_hub.constants.HF_HUB_CACHE}",
          flush=True)
    from kernels import get_kernel

    # Which variant the default backend should pick on this machine.
    if cuda:
        default_variant = arch_variant or "torch-cuda"
    else:
        default_variant = "torch-cpu"

    def relu_matches(k, device):
        x = torch.tensor([-1.0, 2.0, -3.5, 0.0, 4.25], device=device)
        y = k.relu(x)
        print(f"  {device}: relu({x.tolist()}) = {y.tolist()}  -> {y}", flush=True)
        want = torch.tensor([0.0, 2.0, 0.0, 0.0, 4.25], device=device)
        return bool(torch.equal(y, want)) and y.device.type == torch.device(device).type

    if mode == "warm":
        print("-- get_kernel(version=1), warm cache, new process", flush=True)
        k = check("warm get_kernel(version=1)", lambda: get_kernel(repo, version=1))
        if k is not None:
            dev = "cuda" if cuda else "cpu"
            report("warm get_kernel(version=1) relu", relu_matches(k, dev) and k.VARIANT == default_variant,
                   f"variant {k.VARIANT}")
        return

    if hasattr(kernels, "get_kernel_variants"):
        print("-- get_kernel_variants(version=1)", flush=True)

        def variants():
            decisions = kernels.get_kernel_variants(repo, version=1)
            for d in decisions:
                why = getattr(d, "reason", "accepted")
                print(f"  {type(d).__name__}: {d.variant.variant_str} ({why})", flush=True)
            return decisions

        decisions = check("get_kernel_variants", variants)
        if decisions is not None:
            names = {d.variant.variant_str for d in decisions}
            want = {"torch-cpu", "torch-cuda"} | ({arch_variant} if arch_variant else set())
            first = decisions[0].variant.variant_str if decisions else None
            report("get_kernel_variants lists every variant, preferred first",
                   names == want and first == default_variant, f"got {sorted(names)}, first {first}")
    else:
        print("SKIP get_kernel_variants (not in this kernels version)", flush=True)

    if hasattr(kernels, "has_kernel"):
        print("-- has_kernel", flush=True)
        r = check("has_kernel(version=1)", lambda: kernels.has_kernel(repo, version=1))
        if r is not None:
            report("has_kernel(version=1)", r is True, f"returned {r!r}")
        r = check("has_kernel(version=1, backend=cpu)", lambda: kernels.has_kernel(repo, version=1, backend="cpu"))
        if r is not None:
            report("has_kernel(version=1, backend=cpu)", r is True, f"returned {r!r}")

    print(f"-- get_kernel(version=1) [default backend; expect {default_variant}]", flush=True)
    k = check("get_kernel(version=1)", lambda: get_kernel(repo, version=1))
    if k is not None:
        report("get_kernel(version=1) picked the expected variant", k.VARIANT == default_variant,
               f"got {k.VARIANT}, want {default_variant}")
        report("get_kernel(version=1) loaded the v1 branch", k.BRANCH == "v1", f"BRANCH={k.BRANCH}")
        dev = "cuda" if cuda else "cpu"
        ok = check(f"relu on {dev}", lambda: relu_matches(k, dev))
        if ok is not None:
            report(f"get_kernel(version=1).relu on {dev} tensors", ok, "wrong result")
        if cuda and getattr(k, "NATIVE", False):
            big = torch.randn(1 << 20, device="cuda")
            ok = check("native relu 1M", lambda: bool(torch.equal(k.relu(big), torch.relu(big))))
            if ok is not None:
                report("compiled CUDA relu matches torch.relu on 1M elements", ok, "mismatch")

    print("-- get_kernel(version=1, backend='cpu') [expect torch-cpu]", flush=True)
    kc = check("get_kernel(version=1, backend=cpu)", lambda: get_kernel(repo, version=1, backend="cpu"))
    if kc is not None:
        report("get_kernel(backend=cpu) picked torch-cpu", kc.VARIANT == "torch-cpu", f"got {kc.VARIANT}")
        ok = check("relu on cpu", lambda: relu_matches(kc, "cpu"))
        if ok is not None:
            report("get_kernel(version=1, backend=cpu).relu on cpu tensors", ok, "wrong result")
        report("LFS file weights.bin arrived intact (sha256)", kc.WEIGHTS_SHA256 == want_sha,
               f"got {kc.WEIGHTS_SHA256}, want {want_sha}")
        report("nested file data/info.json arrived", kc.INFO.get("variant") == "torch-cpu", f"INFO={kc.INFO}")

    print("-- get_kernel(revision='main')", flush=True)
    km = check("get_kernel(revision=main)", lambda: get_kernel(repo, revision="main"))
    if km is not None:
        report("get_kernel(revision=main) loaded the main branch", km.BRANCH == "main", f"BRANCH={km.BRANCH}")

    if untrusted:
        print(f"-- get_kernel({untrusted}) [org without the trust flag: must refuse]", flush=True)
        try:
            get_kernel(untrusted, version=1)
        except ValueError as e:
            report("untrusted org is refused", "trusted publisher" in str(e), str(e))
        except Exception as e:  # noqa: BLE001
            report("untrusted org is refused", False, f"{type(e).__name__}: {e}")
        else:
            report("untrusted org is refused", False, "get_kernel succeeded")
        kt = check("get_kernel(untrusted, trust_remote_code=True)",
                   lambda: get_kernel(untrusted, version=1, backend="cpu", trust_remote_code=True))
        if kt is not None:
            report("untrusted org loads with trust_remote_code=True", kt.VARIANT == "torch-cpu", f"{kt.VARIANT}")

    endpoint = os.environ.get("KHUB_ENDPOINT") or os.environ.get("HF_ENDPOINT", "")
    api = f"{endpoint}/api/kernels/{repo}"
    if k is None:
        report("khub kernel API checks", False, "get_kernel(version=1) failed")
        return
    check("variants endpoint", lambda: check_variants_endpoint(torch, api, k))
    if cuda:
        check("benchmark upload", lambda: check_benchmark_upload(torch, api, k))
    else:
        print("SKIP benchmark upload (no GPU)", flush=True)
    check("downloads", lambda: check_downloads(api, loaded_variant(k)))


if __name__ == "__main__":
    main()
    print(f"loader_check: {'all passed' if failures == 0 else f'{failures} failed'}", flush=True)
    sys.exit(1 if failures else 0)
