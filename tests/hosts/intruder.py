"""A process on a third host that knows no secret. Until STOPFILE exists it connects, again and
again, to every port listed in PORTSFILE (rewritten while the run goes on), listens, sends what a
guessing peer would (64 bytes, a store client's request, a Gloo-like sequence header) and listens
again. It logs only how many bytes each port told it ("heard port=P bytes=N")."""
import os
import socket
import sys


def knock(host, port, payload):
    heard = 0
    try:
        s = socket.create_connection((host, port), timeout=0.5)
    except OSError:
        return
    s.settimeout(0.1)
    try:
        for chunk in (b"", payload):
            if chunk:
                s.sendall(chunk)
            try:
                while True:
                    b = s.recv(4096)
                    if not b:
                        break
                    heard += len(b)
            except socket.timeout:
                pass
    except OSError:
        pass
    finally:
        s.close()
    print(f"heard port={port} bytes={heard}", flush=True)


def main():
    host, portsfile, stopfile = sys.argv[1:4]
    payloads = [b"x" * 64, b"\x00\x03\x00\x00\x00\x03run" + b"\x00" * 8, (1).to_bytes(8, "little") * 8]
    while not os.path.exists(stopfile):
        try:
            ports = [int(p) for p in open(portsfile).read().split()]
        except (OSError, ValueError):
            ports = []
        for port in ports:
            for p in payloads:
                knock(host, port, p)


if __name__ == "__main__":
    main()
