"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP: one session has one call
refused by a limit of the sidecar's, reads that refusal as the call's own error, and then
makes another call in the same session.

MODE `large`: the call's body is over 1 MiB.
MODE `budget`: 64 raw connections each announce a 1 MiB body and send none of it, so the
request bodies hold their 64 MiB budget; they are closed after the refusal.
MODE `gate`: (stateless sidecar, MaxZabbixConcurrency=16 so the MCP gate holds 32, a stub
Zabbix that never answers within Timeout) 16 raw calls take the Zabbix slots, 16 more wait
for one inside the gate, 16 more (with padded bodies, to be seen in request_body_bytes)
wait at the gate; the session's call waits behind them and is refused once Timeout has
passed. The call after is a tools/list, which asks Zabbix nothing.
MODE `identity` DIR: after initialize, writes DIR/ready and waits for DIR/go (the test drops
the token's cached identity and makes Zabbix unreachable), calls, writes DIR/refused and
waits for DIR/again (Zabbix reachable again) before the call after.

Waits are on the sidecar's /metrics, never fixed sleeps.
Usage: python refused_call_python.py MCP_URL TOKEN MODE [DIR]. Prints one JSON summary line."""
import asyncio
import json
import os
import sys
import time
import urllib.parse

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

BUDGET = 64 * 1024 * 1024
MIB = 1024 * 1024


async def metric(http, base, name):
    text = (await http.get(f"{base}/metrics")).text
    for line in text.splitlines():
        if line.startswith(f"zabbix_mcp_guard_{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


async def wait_for(http, base, name, test, what):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if test(await metric(http, base, name)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def wait_file(path):
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        await asyncio.sleep(0.05)


def touch(path):
    with open(path, "w"):
        pass


async def hold_bodies(url, token, count):
    """Connections that announce a 1 MiB body each and send none of it."""
    parts = urllib.parse.urlsplit(url)
    held = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write((
            f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {MIB}\r\n\r\n"
        ).encode())
        await writer.drain()
        held.append(writer)
    return held


def raw_call(http, url, token, padding=0):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "host_get", "arguments": {"limit": 1}}}) + " " * padding
    return asyncio.create_task(http.post(url, content=body, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"}, timeout=120))


async def main(url, token, mode, signals=None):
    base = url.rsplit("/mcp", 1)[0]
    summary = {}
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits) as http:
        async with streamablehttp_client(url, headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                held, raw = [], []
                if mode == "budget":
                    held = await hold_bodies(url, token, BUDGET // MIB)
                    await wait_for(http, base, "request_body_bytes", lambda v: v >= BUDGET,
                                   "the bodies to hold the budget")
                elif mode == "gate":
                    raw += [raw_call(http, url, token) for _ in range(16)]
                    await wait_for(http, base, "calls_in_flight", lambda v: v >= 16,
                                   "16 calls at Zabbix")
                    raw += [raw_call(http, url, token) for _ in range(16)]
                    await wait_for(http, base, "mcp_requests_in_progress", lambda v: v >= 32,
                                   "the gate full")
                    raw += [raw_call(http, url, token, padding=100_000) for _ in range(16)]
                    await wait_for(http, base, "request_body_bytes", lambda v: v >= 1_600_000,
                                   "16 calls waiting at the gate")
                elif mode == "identity":
                    touch(os.path.join(signals, "ready"))
                    await wait_file(os.path.join(signals, "go"))
                try:
                    if mode == "large":
                        await session.call_tool("host_get", {"search": "x" * (1100 * 1024)})
                    else:
                        await session.call_tool("host_get", {"limit": 1})
                    summary["refused"] = False
                except McpError as error:
                    summary.update(refused=True, code=error.error.code,
                                   message=error.error.message, data=error.error.data)
                if mode == "identity":
                    touch(os.path.join(signals, "refused"))
                    await wait_file(os.path.join(signals, "again"))
                for writer in held:
                    writer.close()
                if held:
                    await wait_for(http, base, "request_body_bytes", lambda v: v == 0,
                                   "the budget free again")
                tools = await session.list_tools()
                summary["after_ok"] = len(tools.tools) > 0
                for task in raw:
                    task.cancel()
                await asyncio.gather(*raw, return_exceptions=True)
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
