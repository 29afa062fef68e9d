"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP, holding one session:
prints whether the server announces tools.listChanged and the tools it lists, then waits
for N notifications/tools/list_changed, listing again after each. One JSON line each,
flushed at once, so that the caller can change the server between them.
Usage: python list_changed_python.py MCP_URL TOKEN N"""
import asyncio
import json
import sys

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

WAIT_SECONDS = 60


def say(line):
    print(json.dumps(line), flush=True)


async def main(url, token, wanted):
    changed = asyncio.Queue()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            await changed.put(True)

    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            tools = init.capabilities.tools
            listed = await session.list_tools()
            say({
                "list_changed": bool(tools and tools.listChanged),
                "tools": sorted(t.name for t in listed.tools),
            })
            for n in range(1, wanted + 1):
                await asyncio.wait_for(changed.get(), WAIT_SECONDS)
                listed = await session.list_tools()
                say({"notified": n, "tools": sorted(t.name for t in listed.tools)})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
