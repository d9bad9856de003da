#!/usr/bin/env python3
"""post_body.py URL BODY_FILE TOKEN [--kill PID] [--after-send SECONDS]
POST an NDJSON commit body from a file over a plain socket. With --kill,
send SIGKILL to PID SECONDS after the last body byte went out (a response
that arrives first is still read). Prints one line:
  status=<code or none> sent=<bytes> waited=<seconds from the last body byte
  to the first response byte, or none> body=<response body, one line>
"""
import os
import select
import signal
import socket
import sys
import time
import urllib.parse


def main():
    url, path, token = sys.argv[1:4]
    opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
    kill_pid = int(opts["--kill"]) if "--kill" in opts else None
    delay = float(opts.get("--after-send", "0"))
    u = urllib.parse.urlsplit(url)
    size = os.path.getsize(path)
    s = socket.create_connection((u.hostname, u.port))
    target = u.path + ("?" + u.query if u.query else "")
    s.sendall((f"POST {target} HTTP/1.1\r\nHost: {u.netloc}\r\nAuthorization: Bearer {token}\r\n"
               f"Content-Type: application/x-ndjson\r\nContent-Length: {size}\r\n"
               f"Connection: close\r\n\r\n").encode())
    sent = 0
    try:
        with open(path, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                s.sendall(b)
                sent += len(b)
    except OSError:
        pass
    got = b""
    t_sent = time.monotonic()
    t_first = None
    deadline = time.monotonic() + delay
    killed = False
    while True:
        wait = deadline - time.monotonic() if kill_pid and not killed else 30
        if kill_pid and not killed and wait <= 0:
            os.kill(kill_pid, signal.SIGKILL)
            killed = True
            continue
        r, _, _ = select.select([s], [], [], max(wait, 0))
        if not r:
            if killed or not kill_pid:
                break
            continue
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        if t_first is None:
            t_first = time.monotonic()
        got += b
    if kill_pid and not killed:
        os.kill(kill_pid, signal.SIGKILL)
    status = "none"
    body = b""
    if got.startswith(b"HTTP/1.1 "):
        status = got[9:12].decode()
        body = got.split(b"\r\n\r\n", 1)[-1]
    waited = f"{t_first - t_sent:.3f}" if t_first is not None else "none"
    print(f"status={status} sent={sent} waited={waited} body={body.decode(errors='replace').strip()}")


if __name__ == "__main__":
    main()
