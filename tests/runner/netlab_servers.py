"""What the network test's "outside" answers: DNS (UDP and TCP) and HTTP on the metadata server's
address, and HTTP on an "internet" address (TEST-NET-2, in the test's own network namespace).

    netlab_servers.py METADATA_ADDRESS INTERNET_ADDRESS SECONDS READY_FILE

The DNS server answers example.test with INTERNET_ADDRESS. Writes READY_FILE once every server
listens, and exits after SECONDS.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

RECORDS: dict[str, str] = {}  # name -> IPv4


def answer(query: bytes) -> bytes:
    ident = struct.unpack(">H", query[:2])[0]
    pos, labels = 12, []
    while query[pos] and len(labels) < 64:  # bounded, like every loop here
        n = query[pos]
        labels.append(query[pos + 1:pos + 1 + n].decode(errors="replace"))
        pos += n + 1
    qtype = struct.unpack(">H", query[pos + 1:pos + 3])[0]
    question = query[12:pos + 5]
    name = ".".join(labels).lower()
    ip = RECORDS.get(name)
    if ip and qtype == 1:
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
        return struct.pack(">HHHHHH", ident, 0x8180, 1, 1, 0, 0) + question + rr
    rcode = 0 if ip else 3
    return struct.pack(">HHHHHH", ident, 0x8180 | rcode, 1, 0, 0, 0) + question



class Udp(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(answer(data), self.client_address)



class Tcp(socketserver.BaseRequestHandler):
    def handle(self):
        size = struct.unpack(">H", self.request.recv(2))[0]
        reply = answer(self.request.recv(size))
        self.request.sendall(struct.pack(">H", len(reply)) + reply)



def http(body: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    metadata, internet, seconds, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    RECORDS["example.test"] = internet
    servers = [socketserver.ThreadingUDPServer((metadata, 53), Udp), socketserver.ThreadingTCPServer((metadata, 53), Tcp),
               HTTPServer((metadata, 80), http("METADATA-SECRET-TOKEN")),
               HTTPServer((internet, 80), http("hello from the internet"))]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(ready, "w") as marker:
        marker.write("ready\n")
    time.sleep(seconds)


if __name__ == "__main__":
    main()
