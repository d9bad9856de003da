#!/usr/bin/env python3
"""fault_proxy.py -- a threaded HTTP reverse proxy (python3 stdlib only) that
sits between a khub mirror and its upstream and injects faults on demand.

  fault_proxy.py --upstream http://127.0.0.1:PORT [--listen 127.0.0.1:0]
                 [--control FILE] [--log FILE] [--port-file FILE]

Every request is forwarded to the upstream with its method, path, query,
headers (hop-by-hop ones dropped, Host kept so that absolute links the
upstream builds point back at the proxy) and body; the answer comes back
with Connection: close. One access-log line per request goes to --log:

  <unix time> <METHOD> <path?query> <status> <body bytes sent> [<faults>]

The control file (JSON, re-read on every request; editing it resets the
per-rule counters) lists rules, applied in order to requests whose
"METHOD path?query" contains the rule's "match" substring (or matches its
"regex"); "count" limits how many requests a rule touches (default: all):

  {"rules": [
    {"match": "/resolve/", "action": "429", "count": 2, "retry_after": 1},
    {"match": "/overview", "action": "429", "count": 1, "ratelimit": "\\"api\\";r=0;t=1"},
    {"match": "_big.so", "action": "throttle", "bytes_per_sec": 20000000},
    {"match": "_bad.so", "action": "corrupt", "offset": 1000},
    {"match": "_big.so", "action": "drop", "after_bytes": 5000000, "count": 1},
    {"match": "/info/refs", "action": "status", "status": 503, "count": 1}
  ]}

  429      answer 429 without asking the upstream, with Retry-After (if
           retry_after is given) and/or a RateLimit header
  status   answer that status without asking the upstream
  corrupt  flip (xor 0xff) the byte at object offset "offset" (a 206 body is
           placed by its Content-Range) of a 200/206 body
  drop     close the connection abruptly after "after_bytes" body bytes
  throttle send the body at about bytes_per_sec
"""
import argparse
import http.client
import http.server
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.parse

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
       "transfer-encoding", "upgrade", "proxy-connection"}
CHUNK = 256 * 1024


class Control:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.stamp = None
        self.rules = []
        self.used = []

    def _load(self):
        if not self.path:
            return
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self.stamp:
            return
        self.stamp = stamp
        rules = []
        if stamp is not None:
            try:
                with open(self.path) as f:
                    text = f.read()
                rules = json.loads(text).get("rules", []) if text.strip() else []
            except (OSError, ValueError) as e:
                print(f"fault_proxy: bad control file: {e}", file=sys.stderr)
        self.rules = rules
        self.used = [0] * len(rules)

    def take(self, line):
        """The rules that apply to this request (counters consumed)."""
        out = []
        with self.lock:
            self._load()
            for i, r in enumerate(self.rules):
                if "regex" in r:
                    if not re.search(r["regex"], line):
                        continue
                elif r.get("match", "") not in line:
                    continue
                if "count" in r and self.used[i] >= int(r["count"]):
                    continue
                self.used[i] += 1
                out.append(r)
        return out


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault_proxy"

    def log_message(self, fmt, *args):  # silence the default stderr log
        pass

    def _log(self, status, nbytes, faults):
        line = f"{time.time():.3f} {self.command} {self.path} {status} {nbytes}"
        if faults:
            line += " " + ",".join(faults)
        with self.server.log_lock:
            self.server.log.write(line + "\n")
            self.server.log.flush()

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                size_line = self.rfile.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else None

    def _answer(self, status, headers, body, faults):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True
        self._log(status, len(body), faults)

    def _handle(self):
        line = f"{self.command} {self.path}"
        rules = self.server.control.take(line)
        body = self._read_body() if self.command in ("POST", "PUT", "PATCH", "DELETE") else None
        for r in rules:
            if r.get("action") == "429":
                hdrs = [("Content-Type", "application/json")]
                if "retry_after" in r:
                    hdrs.append(("Retry-After", str(r["retry_after"])))
                if "ratelimit" in r:
                    hdrs.append(("RateLimit", r["ratelimit"]))
                return self._answer(429, hdrs, b'{"error":"rate limited (fault_proxy)"}',
                                    [f"429(retry_after={r.get('retry_after')},ratelimit={r.get('ratelimit')})"])
            if r.get("action") == "status":
                st = int(r.get("status", 503))
                return self._answer(st, [("Content-Type", "application/json")],
                                    b'{"error":"injected by fault_proxy"}', [f"status{st}"])
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname, up.port or 80, timeout=300)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            return self._answer(502, [("Content-Type", "application/json")],
                                json.dumps({"error": f"fault_proxy: upstream unreachable: {e}"}).encode(),
                                ["upstream-down"])
        faults = []
        corrupt = [r for r in rules if r.get("action") == "corrupt"]
        drop = next((r for r in rules if r.get("action") == "drop"), None)
        throttle = next((r for r in rules if r.get("action") == "throttle"), None)
        start = 0
        cr = resp.getheader("Content-Range")
        if resp.status == 206 and cr:
            m = re.match(r"bytes (\d+)-", cr)
            start = int(m.group(1)) if m else 0
        if resp.status not in (200, 206):
            corrupt = []
        self.send_response(resp.status)
        length = resp.getheader("Content-Length")
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        chunked = length is None and self.command != "HEAD" and resp.status not in (204, 304)
        if length is not None:
            self.send_header("Content-Length", length)
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        sent = 0
        t0 = time.monotonic()
        rate = float(throttle["bytes_per_sec"]) if throttle else 0
        if rate:
            faults.append(f"throttle({int(rate)}B/s)")
        try:
            if self.command == "HEAD":
                resp.read()
            else:
                while True:
                    want = CHUNK
                    if rate:
                        want = max(4096, min(CHUNK, int(rate / 20)))
                    if drop is not None:
                        left = int(drop.get("after_bytes", 0)) - sent
                        if left <= 0:
                            faults.append(f"drop@{sent}")
                            self.wfile.flush()
                            try:
                                self.connection.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass
                            break
                        want = min(want, left)
                    data = resp.read(want)
                    if not data:
                        break
                    for r in corrupt:
                        off = int(r.get("offset", 0)) - (start + sent)
                        if 0 <= off < len(data):
                            b = bytearray(data)
                            b[off] ^= 0xFF
                            data = bytes(b)
                            faults.append(f"corrupt@{start + sent + off}")
                    if chunked:
                        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                    else:
                        self.wfile.write(data)
                    sent += len(data)
                    if rate:
                        ahead = sent / rate - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                if chunked and "drop" not in ",".join(faults):
                    self.wfile.write(b"0\r\n\r\n")
            # a body shorter than the upstream promised: the upstream died
            if length is not None and self.command != "HEAD" and not any(f.startswith("drop") for f in faults) \
                    and resp.status not in (204, 304) and sent < int(length):
                faults.append(f"upstream-cut@{sent}")
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        except (OSError, http.client.HTTPException) as e:
            faults.append(f"cut@{sent}:{type(e).__name__}")
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            conn.close()
        self._log(resp.status, sent, faults)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--control", default=os.environ.get("FAULT_PROXY_CONTROL"))
    ap.add_argument("--log", default=os.environ.get("FAULT_PROXY_LOG"))
    ap.add_argument("--port-file")
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    srv = Server((host, int(port)), Proxy)
    srv.upstream = urllib.parse.urlsplit(a.upstream)
    srv.control = Control(a.control)
    srv.log = open(a.log, "a", buffering=1) if a.log else sys.stderr
    srv.log_lock = threading.Lock()
    actual = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{actual}\n")
        os.rename(tmp, a.port_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
