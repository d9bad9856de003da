#!/usr/bin/env python3
"""http_client.py -- one HTTP client process for a test's many requests.

Started once per test by khub-test.sh's http_request (a bash coprocess), so
that a table-driven test does not start a curl per cell: each curl start
costs more CPU (the dynamic linker, libcurl's libraries) than the request.
Each request is sent as curl sends it (a new connection, User-Agent curl/…,
Accept */*, the method and headers given, the body byte for byte) and its
answer written as curl -D HFILE -o BFILE writes it.

stdin, one request per line, tab-separated:
  METHOD URL HFILE BFILE REQBODY [HEADER...]
REQBODY is a file whose bytes are the request body, or "-" for none;
each HEADER is "Name: value". METHOD HEAD reads no body: BFILE gets the
headers, as with curl -I.
stdout, one line per request: the status (000 when no answer came, as
curl's %{http_code}). KHUB_HTTP_TIMEOUT (seconds, as curl --max-time): a
request that takes longer has no answer.
"""
import http.client
import os
import subprocess
import sys
import urllib.parse

try:
    UA = "curl/" + subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()[1]
except (OSError, IndexError):
    UA = "curl"


def request(method, url, hfile, bfile, reqbody, headers):
    u = urllib.parse.urlsplit(url)
    body = None
    if reqbody != "-":
        with open(reqbody, "rb") as f:
            body = f.read()
    hdrs = {"User-Agent": UA, "Accept": "*/*"}
    for h in headers:
        name, _, value = h.partition(":")
        hdrs[name.strip()] = value.strip()
    target = u.path or "/"
    if u.query:
        target += "?" + u.query
    timeout = float(os.environ["KHUB_HTTP_TIMEOUT"]) if os.environ.get("KHUB_HTTP_TIMEOUT") else None
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in hdrs.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
    except (OSError, http.client.HTTPException):
        open(hfile, "wb").close()
        open(bfile, "wb").close()
        return "000"
    finally:
        conn.close()
    with open(hfile, "wb") as f:
        f.write(b"HTTP/1.1 %d %s\r\n" % (resp.status, resp.reason.encode("latin-1")))
        for name, value in resp.getheaders():
            f.write(b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1")))
        f.write(b"\r\n")
    if method == "HEAD":  # curl -I writes the headers as the body
        with open(hfile, "rb") as f:
            data = f.read()
    with open(bfile, "wb") as f:
        f.write(data)
    return "%03d" % resp.status


for line in sys.stdin:
    fields = line.rstrip("\n").split("\t")
    print(request(fields[0], fields[1], fields[2], fields[3], fields[4], fields[5:]), flush=True)
