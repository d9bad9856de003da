# sandbox_attacks.py -- hostile build code for t0139: the test puts it in a
# kernel's torch-ext/<module>/__init__.py (run by the worker's smoke import),
# after a line `CONFIG = {...}` naming what to attack. Every attempt prints
# one line "ATTACK <name>: blocked (<why>)" or "ATTACK <name>: ESCAPED
# (<what>)". Secrets it finds are printed as "SECRET <sha256>" only, so that
# the test can tell a leak from the worker's log scrubbing.
import ctypes
import errno
import hashlib
import os
import platform
import signal
import socket
import subprocess
import sys
import time

C = globals().get("CONFIG", {})
libc = ctypes.CDLL(None, use_errno=True)
X86_64 = platform.machine() == "x86_64"
# x86_64 system call numbers (the filter is checked by number on that arch)
NR = {"keyctl": 250, "bpf": 321, "ptrace": 101, "unshare": 272, "setns": 308, "pivot_root": 155,
      "process_vm_readv": 310, "perf_event_open": 298, "userfaultfd": 323, "add_key": 248}


def report(name, escaped, detail):
    print("ATTACK %s: %s (%s)" % (name, "ESCAPED" if escaped else "blocked", detail), flush=True)


def secret(data):
    if isinstance(data, str):
        data = data.encode()
    data = data.strip()
    if data:
        print("SECRET " + hashlib.sha256(data).hexdigest(), flush=True)


def err_name(e):
    return errno.errorcode.get(getattr(e, "errno", 0) or 0, type(e).__name__)


def try_read(name, path, harmless=None):
    """Escaped when path can be read (harmless(data): unless what it holds is harmless)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        secret(data)
        for part in data.split(b"\0"):
            secret(part.split(b"=", 1)[-1])
        report(name, not (harmless and harmless(data)), "read %d bytes of %s" % (len(data), path))
    except Exception as e:
        report(name, False, "%s: %s" % (path, err_name(e)))


def no_worker_variables(data):
    return b"KHUB" not in data and b"TOKEN" not in data


def try_list(name, path, allowed=()):
    try:
        entries = [e for e in os.listdir(path) if e not in allowed]
        report(name, bool(entries), "%s lists %s" % (path, sorted(entries)[:8]))
    except Exception as e:
        report(name, False, "%s: %s" % (path, err_name(e)))


def try_write(name, path):
    """Whether the write reached the worker's disk, the test sees from outside."""
    try:
        with open(path, "w") as f:
            f.write("pwned\n")
        print("WRITE %s: wrote %s" % (name, path), flush=True)
    except Exception as e:
        print("WRITE %s: %s: %s" % (name, path, err_name(e)), flush=True)


def try_call(name, fn):
    """Blocked only when refused with EPERM: any other answer means the call reached the kernel."""
    ctypes.set_errno(0)
    r = fn()
    e = ctypes.get_errno()
    report(name, not (r == -1 and e == errno.EPERM), "returned %d, %s" % (r, errno.errorcode.get(e, e)))


def files():
    try_read("token-file", C["token_file"])
    try_read("shadow", "/etc/shadow")
    try_read("other-scratch", C["decoy"])
    own = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # <scratch>/stage/<variant>/__init__.py
    # the path down to its own scratch exists in the sandbox, holding nothing else
    try_list("work-dir", C["work_dir"], allowed=(os.path.relpath(own, C["work_dir"]).split("/")[0],))
    try_list("root-home", "/root")
    try_list("home", "/home")
    try_list("var", "/var")
    try_list("scratch-neighbours", os.path.dirname(own), allowed=(os.path.basename(own),))
    # links the worker would follow when it packages the variant or renders the card
    for name, link in [("stage-link", os.path.join(os.path.dirname(__file__), "khub-card.md")),
                       ("source-link", os.path.join(own, "src", "CARD.md"))]:
        try:
            if os.path.lexists(link):
                os.remove(link)
            os.symlink("/etc/shadow", link)
            report(name, True, "made %s -> /etc/shadow" % link)
        except OSError as e:
            report(name, False, "%s: %s" % (link, err_name(e)))
    try_write("write-usr", "/usr/khub-pwned")
    try_write("write-etc", "/etc/khub-pwned")
    try_write("write-root", "/khub-pwned")
    try_write("write-work-dir", os.path.join(C["work_dir"], "khub-pwned"))
    try_write("tmp", C["tmp_marker"])  # /tmp is the sandbox's own: writable, never the host's


def environment():
    for k, v in os.environ.items():
        secret(v)
    worker_vars = [k for k in os.environ if k.startswith("KHUB") or "TOKEN" in k]
    report("environment", bool(worker_vars), "variables %s" % sorted(os.environ))
    # the processes above this one: in the sandbox, only bwrap's and the launcher; the host's (the
    # test's shell, standing for the daemon) do not exist here
    for who, pid in [("init", 1), ("parent", os.getppid()), ("host", C["host_pid"])]:
        try_read("proc-environ-" + who, "/proc/%s/environ" % pid, harmless=no_worker_variables)
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
            for part in cmd.split(b"\0"):
                secret(part)
            report("proc-cmdline-" + who, b"khub" in cmd and b"--url" in cmd or who == "host",
                   cmd.replace(b"\0", b" ")[:80].decode(errors="replace"))
        except Exception as e:
            report("proc-cmdline-" + who, False, err_name(e))


def processes():
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    seen = []
    for p in pids:
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                seen.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    host = [c for c in seen if "postgres" in c or "khub serve" in c or "--url" in c]
    report("host-processes", bool(host) or len(pids) > 50, "%d processes visible, host ones: %s" % (len(pids), host[:3]))
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    uid = status["Uid"].split()[0]
    caps = int(status["CapEff"].strip(), 16)
    report("identity", uid == "0" or caps != 0, "uid %s, CapEff %x, CapBnd %s" % (uid, caps, status["CapBnd"].strip()))
    report("no-new-privs", status["NoNewPrivs"].strip() != "1", "NoNewPrivs " + status["NoNewPrivs"].strip())
    report("seccomp", status["Seccomp"].strip() != "2", "Seccomp " + status["Seccomp"].strip())


def kernel_calls():
    MS_REMOUNT, MS_BIND, MNT_DETACH = 32, 4096, 2
    try_call("mount-tmpfs", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
    try_call("remount-rw", lambda: libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None))
    try_call("umount-proc", lambda: libc.umount2(b"/proc", MNT_DETACH))
    try_call("unshare-user", lambda: libc.unshare(0x10000000))
    try_call("unshare-mount", lambda: libc.unshare(0x00020000))
    if X86_64:
        try_call("ptrace-attach", lambda: libc.syscall(NR["ptrace"], 16, 1, 0, 0))
        try_call("keyctl", lambda: libc.syscall(NR["keyctl"], 0, 0, 0, 0, 0))
        try_call("bpf", lambda: libc.syscall(NR["bpf"], 0, 0, 0))
        try_call("setns", lambda: libc.syscall(NR["setns"], 0, 0))
        try_call("pivot-root", lambda: libc.syscall(NR["pivot_root"], b"/tmp", b"/tmp"))
        try_call("userfaultfd", lambda: libc.syscall(NR["userfaultfd"], 0))
    # clone with CLONE_NEWUSER through the shell's unshare(1)
    r = subprocess.run(["unshare", "-U", "true"], capture_output=True)
    report("unshare-command", r.returncode == 0, "exit %d %s" % (r.returncode, r.stderr.decode()[-60:].strip()))


def network():
    for host, port in [("127.0.0.1", int(C["server_port"])), ("1.1.1.1", 53)]:
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((host, port))
            report("network-%s" % host, True, "connected to %s:%d" % (host, port))
        except Exception as e:
            report("network-%s" % host, False, "%s:%d: %s" % (host, port, err_name(e)))
        finally:
            s.close()


BOMB = r'''
import os, signal, sys, time
n, kids, why = int(sys.argv[1]), [], "all started"
for i in range(n):
    try:
        pid = os.fork()
    except OSError as e:
        why = "fork failed: %s" % e.strerror
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids), why)
'''


def fork_bomb():
    n = int(C.get("processes", 10000))
    r = subprocess.run([sys.executable, "-c", BOMB, str(n)], capture_output=True, text=True)
    out = (r.stdout.strip() or r.stderr.strip()[-80:]).split(" ", 1)
    started = int(out[0]) if out[0].isdigit() else -1
    report("processes", started >= n or started < 0, "%s of %d processes: %s" % (started, n, out[-1]))


def disk():
    mb = int(C.get("fill_mb", 0))
    if not mb:
        return
    chunk = b"\0" * (1 << 20)
    try:  # /tmp: a tmpfs of the disk limit's size
        with open("/tmp/fill", "wb") as f:
            for _ in range(mb):
                f.write(chunk)
                f.flush()
        report("tmp-fill", True, "wrote %d MiB to /tmp" % mb)
    except OSError as e:
        report("tmp-fill", False, "/tmp: %s" % err_name(e))
    os.remove("/tmp/fill")
    home = os.environ.get("HOME", "/tmp")
    print("filling %s with %d MiB in files of 8 MiB" % (home, mb), flush=True)
    for i in range(mb // 8):
        with open(os.path.join(home, "fill-%d" % i), "wb") as f:
            for _ in range(8):
                f.write(chunk)
        time.sleep(0.05)
    report("disk-fill", True, "wrote %d MiB to the scratch and was not stopped" % mb)


def leak():
    t = C.get("leak")
    if t:  # the second line of defence: a token printed is scrubbed, even cut across two writes
        print("LEAK whole: " + t, flush=True)
        sys.stdout.write("LEAK split: " + t[: len(t) // 2])
        sys.stdout.flush()
        time.sleep(2.5)
        print(t[len(t) // 2:], flush=True)


files()
environment()
processes()
kernel_calls()
network()
fork_bomb()
leak()
disk()
print("ATTACKS DONE", flush=True)
