#!/usr/bin/env python3
"""webhook_receiver.py -- a real HTTP receiver for the webhook tests.

webhook_receiver.py STATE_DIR [PORT]
Listens on 127.0.0.1:PORT (default: a free port), written to STATE_DIR/port
once it listens. Each POST is recorded as one JSON line in STATE_DIR/requests
(path, the headers, the body as text, the status answered), and its body
alone in STATE_DIR/body.N (N from 1, byte for byte, for the signature
check). The status answered is the first line of STATE_DIR/statuses, which
is then removed from it (none left: 200). When STATE_DIR/delay holds a
number, each answer waits that many seconds first (slow receivers).
"""
import http.server
import json
import os
import sys
import threading
import time

state = sys.argv[1]
lock = threading.Lock()
try:	# a receiver started again goes on numbering
    with open(os.path.join(state, "requests")) as f:
        count = sum(1 for _ in f)
except FileNotFoundError:
    count = 0


def next_status():
    path = os.path.join(state, "statuses")
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if l.strip()]
    except FileNotFoundError:
        return 200
    if not lines:
        return 200
    with open(path + ".tmp", "w") as f:
        f.write("".join(l + "\n" for l in lines[1:]))
    os.replace(path + ".tmp", path)
    return int(lines[0])


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            status = next_status()
            count += 1
            with open(os.path.join(state, "body.%d" % count), "wb") as f:
                f.write(body)
            record = {"n": count, "path": self.path, "status": status,
                      "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body": body.decode("utf-8", "replace")}
            with open(os.path.join(state, "requests"), "a") as f:
                f.write(json.dumps(record) + "\n")
        try:
            with open(os.path.join(state, "delay")) as f:
                time.sleep(float(f.read().strip() or 0))
        except FileNotFoundError:
            pass
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
with open(os.path.join(state, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.replace(os.path.join(state, "port.tmp"), os.path.join(state, "port"))
server.serve_forever()
