#!/usr/bin/env python3
"""An instant stub Zabbix API for the performance scripts (HTTP/1.1, keep-alive).

Answers apiinfo.version (7.0.22), user.checkAuthentication, usergroup.get and host.get
(HOSTS hosts shaped as 7.0 returns them, the same as benches/proxy/stub.rs; at most the
request's `limit`, as Zabbix, whose answers the sidecar holds to it) at once.

With --forward URL it is a recording proxy instead: every request goes to URL unchanged,
and the first host.get body is written to --record FILE (used by wrk.sh to post the exact
host.get the sidecar sends straight to Zabbix). --port-file receives the bound port.
--close-every N closes the connection after every Nth answer (`Connection: close`, as the
lab's `php -S` does after each), so that the sidecar connects again.
"""
import argparse
import http.server
import itertools
import json
import socketserver
import sys
import urllib.request


def hosts(n):
    return [
        {
            "hostid": str(10100 + i),
            "host": f"mcp-stub-{i:02}",
            "name": f"MCP Stub {i:02}",
            "status": "0",
            "description": "",
            "maintenance_status": "0",
            "flags": "0",
            "hostgroups": [{"groupid": "2", "name": "Linux servers"}],
            "tags": [{"tag": "env", "value": "bench"}],
            "parentTemplates": [{"templateid": "10001", "name": "Linux by Zabbix agent"}],
            "triggers": [],
        }
        for i in range(1, n + 1)
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file")
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--forward")
    parser.add_argument("--record")
    parser.add_argument("--close-every", type=int, default=0)
    args = parser.parse_args()
    answers = itertools.count(1)
    results = {
        "apiinfo.version": '"7.0.22"',
        "user.checkAuthentication": '{"userid":"1","username":"Admin","type":3,"roleid":"3"}',
        "usergroup.get": '[{"name":"Zabbix administrators"}]',
    }
    every_host = hosts(args.hosts)
    # host.get's answer text by limit, made once each: the stub stays instant.
    host_answers = {}

    def host_get(params):
        limit = params.get("limit") if isinstance(params, dict) else None
        if not isinstance(limit, int) or limit < 0:
            limit = len(every_host)
        if limit not in host_answers:
            host_answers[limit] = json.dumps(every_host[:limit], separators=(",", ":"))
        return host_answers[limit]
    recorded = [False]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                request = json.loads(body)
            except ValueError:
                request = {}
            method = request.get("method", "?")
            if method == "host.get" and args.record and not recorded[0]:
                recorded[0] = True
                with open(args.record, "wb") as f:
                    f.write(body)
            if args.forward:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization")}
                forwarded = urllib.request.Request(args.forward, data=body, headers=headers)
                with urllib.request.urlopen(forwarded) as answer:
                    out = answer.read()
            else:
                if method == "host.get":
                    result = host_get(request.get("params"))
                else:
                    result = results.get(method, "[]")
                out = ('{"jsonrpc":"2.0","result":%s,"id":%s}'
                       % (result, json.dumps(request.get("id")))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            if args.close_every and next(answers) % args.close_every == 0:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(out)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", args.port), Handler)
    if args.port_file:
        with open(args.port_file, "w") as f:
            f.write(str(server.server_address[1]))
    print(f"stub on 127.0.0.1:{server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
