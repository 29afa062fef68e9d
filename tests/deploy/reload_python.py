"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP: lists the tools, then
calls each tool named on the command line with {"limit": 1}, in order, and reports how
each call ended (a result, a tool error with its code, or a JSON-RPC error).
Usage: python reload_python.py MCP_URL TOKEN TOOL... Prints one JSON summary line."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def call(session, tool):
    try:
        result = await session.call_tool(tool, {"limit": 1})
    except McpError as error:
        return {"tool": tool, "rpc_error": error.error.code, "message": error.error.message}
    if result.isError:
        body = json.loads(result.content[0].text)
        return {"tool": tool, "code": body["code"], "message": body["message"]}
    return {"tool": tool, "ok": True}


async def main(url, token, tools):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            calls = [await call(session, tool) for tool in tools]
            print(json.dumps({
                "tools": sorted(t.name for t in listed.tools),
                "calls": calls,
            }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
