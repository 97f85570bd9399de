#!/usr/bin/env python3
"""An independent NATS client for walhook's tests (Python standard library only: it shares no
code with walhook or nats.c). Speaks the NATS client protocol over TCP and the JetStream API.

  nats_read_stream.py PORT read STREAM        one JSON line per stored message:
        {"seq", "subject", "headers": [[name, value], ...], "data"} (data: the body, UTF-8)
  nats_read_stream.py PORT api SUBJECT BODY    one JetStream API request; prints the answer

A server that requires TLS is spoken to over TLS, trusting the CA file in $NATS_CA_FILE.
"""
import base64
import json
import os
import socket
import ssl
import sys


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        info = json.loads(self._line()[len(b"INFO "):])
        if info.get("tls_required"):
            # NATS upgrades to TLS after INFO; NATS_CA_FILE is the CA to trust (a test's own).
            ctx = ssl.create_default_context(cafile=os.environ.get("NATS_CA_FILE"))
            self.sock = ctx.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n')
        self.sock.sendall(b"SUB _INBOX.walhooktest 1\r\n")

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def request(self, subject, body):
        payload = body.encode()
        self.sock.sendall(b"PUB %s _INBOX.walhooktest %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        while True:
            line = self._line()
            if line.startswith(b"PING"):
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                size = int(line.split()[-1])
                return self._exact(size)
            elif line.startswith(b"HMSG "):
                parts = line.split()
                hsize, total = int(parts[-2]), int(parts[-1])
                raw = self._exact(total)
                status = raw[:hsize].split(b"\r\n")[0]
                if b" 503" in status:
                    return json.dumps({"error": {"description": "no responders"}}).encode()
                return raw[hsize:]
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())


def parse_headers(raw):
    lines = raw.decode().split("\r\n")[1:]
    out = []
    for l in lines:
        if not l:
            continue
        name, _, value = l.partition(":")
        out.append([name, value.lstrip()])
    return out


def main():
    port = int(sys.argv[1])
    c = Client(port)
    if sys.argv[2] == "api":
        print(c.request(sys.argv[3], sys.argv[4]).decode())
        return
    stream = sys.argv[3]
    info = json.loads(c.request("$JS.API.STREAM.INFO." + stream, ""))
    if "error" in info:
        raise SystemExit("stream info: " + json.dumps(info["error"]))
    first, last = info["state"]["first_seq"], info["state"]["last_seq"]
    for seq in range(first, last + 1):
        answer = json.loads(c.request("$JS.API.STREAM.MSG.GET." + stream, json.dumps({"seq": seq})))
        if "error" in answer:
            continue  # deleted
        m = answer["message"]
        headers = parse_headers(base64.b64decode(m["hdrs"])) if m.get("hdrs") else []
        print(json.dumps({"seq": m["seq"], "subject": m["subject"], "headers": headers,
                          "data": base64.b64decode(m.get("data", "")).decode("utf-8")}))


if __name__ == "__main__":
    main()
