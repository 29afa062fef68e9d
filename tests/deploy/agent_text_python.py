"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP: one session calls
hostgroup_get with the most text a request carries (900 names of 255 characters, limit 1)
and with names that make 16 diamonds of edges "a/b" (limit 2), while another session reads
host_get {limit: 1}, all at once. Usage: python agent_text_python.py MCP_URL TOKEN.
Prints one JSON summary line: each call's error body (or null) and the other read's count."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def session_for(url, token, work):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def error_of(result):
    return json.loads(result.content[0].text) if result.isError else None


def distinct_names(count):
    """As the Rust tests' distinct_names: every character different, four bytes each."""
    return ["".join(chr(0x20000 + n * 255 + i) for i in range(255)) for n in range(count)]


def diamonds(layers):
    """As the Rust tests' diamonds: n0/a0, n0/b0, a0/n1, b0/n1, ..., 2^layers paths."""
    return [name for l in range(layers)
            for name in (f"n{l}/a{l}", f"n{l}/b{l}", f"a{l}/n{l + 1}", f"b{l}/n{l + 1}")]


async def main(url, token):
    calls = [{"names": distinct_names(900), "limit": 1}, {"names": diamonds(16), "limit": 2}]

    async def agent(session):
        results = await asyncio.gather(
            *(session.call_tool("hostgroup_get", args) for args in calls))
        return [error_of(r) for r in results]

    async def other(session):
        result = await session.call_tool("host_get", {"limit": 1})
        return result.structuredContent["count"]

    errors, count = await asyncio.gather(
        session_for(url, token, agent), session_for(url, token, other))
    print(json.dumps({"errors": errors, "other_count": count}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
