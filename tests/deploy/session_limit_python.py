"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP, in one stateful session
of a sidecar with MaxRequestsPerSession=1: sends host_get calls four at a time until one
is refused for the session's limit, reads that refusal as the call's own error, then
calls host_get once more in the same session.
Usage: python session_limit_python.py MCP_URL TOKEN. Prints one JSON summary line."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


async def main(url, token):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def one():
                try:
                    result = await session.call_tool("host_get", {"limit": 1})
                    return ("ok", not result.isError)
                except McpError as error:
                    return ("refused", error.error)

            refusal, answered = None, 0
            for _ in range(50):
                for kind, what in await asyncio.gather(*[one() for _ in range(4)]):
                    if kind == "ok":
                        answered += what
                    else:
                        refusal = what
                if refusal is not None:
                    break
            after = await session.call_tool("host_get", {"limit": 1})
            print(json.dumps({
                "refused": refusal is not None,
                "code": refusal.code if refusal else None,
                "message": refusal.message if refusal else None,
                "data": refusal.data if refusal else None,
                "answered": answered,
                "after_ok": not after.isError,
            }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
