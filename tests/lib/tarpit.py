#!/usr/bin/env python3
"""tarpit.py -- a hostile upstream for the build farm's external-source tests.

tarpit.py MODE HOST PORT STATE_DIR [ARG]
  silent    accept and never answer; a connection is closed once STATE_DIR/release exists
  trickle   answer one byte of an endless HTTP header every ARG seconds (default 0.5)
  flood     answer an endless HTTP header at about ARG bytes a second (default 400)
  redirect  answer every request with 302 to ARG + the request's path
STATE_DIR/open holds the number of connections open now; STATE_DIR/ready
appears once it listens.
"""
import os
import socket
import sys
import threading
import time

mode, host, port, state = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
arg = sys.argv[5] if len(sys.argv) > 5 else None
lock = threading.Lock()
open_now = 0


def count(delta):
    global open_now
    with lock:
        open_now += delta
        with open(os.path.join(state, "open.tmp"), "w") as f:
            f.write(str(open_now))
        os.replace(os.path.join(state, "open.tmp"), os.path.join(state, "open"))


def serve(conn):
    count(1)
    try:
        if mode == "silent":
            while not os.path.exists(os.path.join(state, "release")):
                time.sleep(0.1)
        elif mode == "trickle":
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while True:
                conn.sendall(b"a")
                time.sleep(float(arg or 0.5))
        elif mode == "flood":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            rate = int(arg or 400)
            while True:
                conn.sendall(b"X-Endless: " + b"b" * (rate // 10 - 13) + b"\r\n")
                time.sleep(0.1)
        elif mode == "redirect":
            req = b""
            while b"\r\n\r\n" not in req:
                data = conn.recv(4096)
                if not data:
                    return
                req += data
            path = req.split(b" ")[1].decode()
            conn.sendall(("HTTP/1.1 302 Found\r\nLocation: %s%s\r\nContent-Length: 0\r\n"
                          "Connection: close\r\n\r\n" % (arg, path)).encode())
    except OSError:
        pass
    finally:
        conn.close()
        count(-1)


s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
s.listen(16)
count(0)
open(os.path.join(state, "ready"), "w").close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
