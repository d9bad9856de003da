#!/usr/bin/env python3
"""notify_listen.py -- the receiving end of sd_notify, as systemd's is for a
Type=notify unit: bind a datagram socket at PATH and append one line per
message to LOG: "PID MESSAGE" (the sender's PID from SCM_CREDENTIALS, which
systemd checks against the unit's main PID; newlines in the message become
spaces). Runs until killed.

  notify_listen.py PATH LOG
"""
import socket
import struct
import sys


def main():
    path, log = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    with open(log, "a", buffering=1) as out:
        while True:
            msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(struct.calcsize("iII")))
            pid = -1
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", data[:struct.calcsize("iII")])[0]
            out.write("%d %s\n" % (pid, msg.decode(errors="replace").replace("\n", " ").strip()))


if __name__ == "__main__":
    main()
