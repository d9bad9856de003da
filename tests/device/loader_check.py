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
"""

import logging
import os
import sys
import traceback

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


if __name__ == "__main__":
    main()
    print(f"loader_check: {'all passed' if failures == 0 else f'{failures} failed'}", flush=True)
    sys.exit(1 if failures else 0)
