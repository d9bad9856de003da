# benchmark_run.py -- run a kernel's benchmarks/benchmark*.py as `kernels
# benchmark` does, inside khub-worker's sandbox (khub-worker benchmark):
# every Benchmark subclass's benchmark_<workload> timed after setup and a
# warm-up, verify_<workload> compared with torch.allclose(atol=1e-2); one
# BenchmarkResult.to_payload() per script, as a JSON list on stdout.
# argv: source variant_dir commit device iterations warmup
import glob, hashlib, importlib.util, json, os, platform, statistics, sys, time, types, traceback

src, variant_dir, commit, device, iterations, warmup = sys.argv[1:7]
iterations, warmup = int(iterations), int(warmup)
real_stdout = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # the scripts' prints go to the log, not into the payload
import torch


def load_kernel():
    spec = importlib.util.spec_from_file_location("kernel_under_benchmark", os.path.join(variant_dir, "__init__.py"),
                                                  submodule_search_locations=[variant_dir])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


class Benchmark:
    seed = 0
    kernel = None
    device = "cpu"

    def setup(self):
        pass


# `from kernels.benchmark import Benchmark` finds this one (the loader itself is not needed)
kernels_mod = types.ModuleType("kernels")
kernels_bench = types.ModuleType("kernels.benchmark")
kernels_bench.Benchmark = Benchmark
kernels_mod.benchmark = kernels_bench
sys.modules.setdefault("kernels", kernels_mod)
sys.modules["kernels.benchmark"] = kernels_bench


def sync():
    if device != "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()


def timing(samples):
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0], s[0], s[0]]
    iqr = q[2] - q[0]
    out = sum(1 for x in s if x < q[0] - 1.5 * iqr or x > q[2] + 1.5 * iqr)
    return {"mean_ms": statistics.fmean(s), "std_ms": statistics.pstdev(s), "min_ms": s[0], "max_ms": s[-1],
            "q1_ms": q[0], "q3_ms": q[2], "iqr_ms": iqr, "outliers": out, "iterations": len(s)}


def run_workload(cls, kernel, name):
    bench = cls()
    bench.kernel, bench.device = kernel, "cpu" if device == "cpu" else "cuda"
    torch.manual_seed(getattr(bench, "seed", 0))
    getattr(bench, "setup_" + name, bench.setup)()
    fn = getattr(bench, "benchmark_" + name)
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(iterations):
        t = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - t) * 1000.0)
    result = {"workload": cls.__name__ + "." + name, "timingResults": timing(samples)}
    verify = getattr(bench, "verify_" + name, None)
    if verify is not None:
        result["verified"] = bool(torch.allclose(getattr(bench, "out"), verify(), atol=1e-2))
    return result


def machine():
    if device == "cpu":
        backend = "CPU"
    else:
        backend = "CUDA " + (torch.version.cuda or "") if torch.version.cuda else "ROCm " + (torch.version.hip or "")
    return {"gpu": device, "backend": backend.strip(), "pytorchVersion": torch.__version__,
            "os": platform.system() + " " + platform.release(), "cpu": platform.machine()}


scripts = sorted(glob.glob(os.path.join(src, "benchmarks", "benchmark*.py")))
if not scripts:
    sys.exit("khub-worker benchmark: no benchmarks/benchmark*.py in the source")
kernel = load_kernel()
payloads, failed = [], 0
for path in scripts:
    rel = os.path.relpath(path, src)
    print("khub-worker benchmark: running " + rel, file=sys.stderr, flush=True)
    try:
        spec = importlib.util.spec_from_file_location("bench_" + hashlib.sha1(rel.encode()).hexdigest()[:8], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        classes = [c for c in vars(mod).values() if isinstance(c, type) and issubclass(c, Benchmark) and c is not Benchmark]
        if not classes:
            raise RuntimeError(rel + " defines no Benchmark subclass")
        results = [run_workload(c, kernel, m[len("benchmark_"):]) for c in classes for m in sorted(dir(c))
                   if m.startswith("benchmark_") and callable(getattr(c, m))]
        if not results:
            raise RuntimeError(rel + " has no benchmark_* workload")
    except BaseException:
        failed += 1
        print("khub-worker benchmark: " + rel + " failed:\n" + traceback.format_exc(), file=sys.stderr, flush=True)
        continue
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    payloads.append({"results": results, "machineInfo": machine(), "kernelCommitSha": commit,
                     "benchmarkScriptPath": rel, "benchmarkScriptSha": sha})
json.dump(payloads, real_stdout)
real_stdout.flush()
sys.exit(1 if failed else 0)
