#!/usr/bin/env python3
"""Makes N sequential MCP calls to the sidecar on one keep-alive connection and checks each
answer (stateless streamable HTTP, JSON responses). Used by callgrind.sh.

  mcp_calls.py HOST:PORT TOKEN N [--list] [--args '{"search":"mcp-","limit":10}']
               [--after-each COMMAND]
  mcp_calls.py HOST:PORT TOKEN N --raw FILE --path /api_jsonrpc.php

--after-each runs COMMAND (a shell command) after each answer, before the next call:
callgrind.sh's FOOTPRINT mode dumps the profile there, one dump per call. --raw posts
FILE's JSON-RPC body to PATH as a Zabbix API client does (callgrind.sh's reference proxy)
and requires a "result".
"""
import argparse
import http.client
import json
import subprocess
import sys


class Client:
    """Stateless MCP POSTs to the sidecar's /mcp on one keep-alive connection (also used by
    scripts/pgo/train.py), or with raw_path JSON-RPC POSTs there as to Zabbix."""

    def __init__(self, address, token, raw_path=None):
        host, port = address.rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port), timeout=600)
        self.path = raw_path or "/mcp"
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {token}",
        }
        if raw_path:
            # A Zabbix API client's POST, as wrk.lua's "direct" kind sends it.
            self.headers = {
                "Content-Type": "application/json-rpc",
                "Authorization": f"Bearer {token}",
            }

    def __call__(self, request):
        """POSTs the JSON-RPC request (bytes as they are); its status and body."""
        body = request if isinstance(request, bytes) else json.dumps(request).encode()
        self.connection.request("POST", self.path, body, self.headers)
        response = self.connection.getresponse()
        return response.status, response.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("token")
    parser.add_argument("n", type=int)
    parser.add_argument("--list", action="store_true", help="tools/list instead of host_get")
    parser.add_argument("--args", default='{"search":"mcp-","limit":10}')
    parser.add_argument("--after-each")
    parser.add_argument("--raw", help="a JSON-RPC body to post as it is, to --path")
    parser.add_argument("--path", default="/api_jsonrpc.php", help="where --raw posts")
    args = parser.parse_args()
    bad = b'"isError":true'
    if args.raw:
        with open(args.raw, "rb") as f:
            request = f.read()
        expect, bad = b'"result"', b'"error"'
    elif args.list:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        expect = b'"tools"'
    else:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "host_get", "arguments": json.loads(args.args)}}
        expect = b'"structuredContent"'
    post = Client(args.address, args.token, args.path if args.raw else None)
    for i in range(args.n):
        status, answer = post(request)
        if status != 200 or expect not in answer or bad in answer:
            print(f"call {i} failed: {status} {answer[:300]!r}", file=sys.stderr)
            sys.exit(1)
        if args.after_each:
            subprocess.run(args.after_each, shell=True, check=True)


if __name__ == "__main__":
    main()
