"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP: calls host_get twice
under a policy that allows one call, and reads the second call's `rate_limited` error.
Usage: python rate_limited_python.py MCP_URL TOKEN. Prints one JSON summary line."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url, token):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool("host_get", {"limit": 1})
            second = await session.call_tool("host_get", {"limit": 1})
            assert second.isError, second
            body = json.loads(second.content[0].text)
            print(json.dumps({
                "first_ok": not first.isError,
                "code": body["code"],
                "retry_after_seconds": body["data"]["retry_after_seconds"],
                "decision_id": body.get("decision_id"),
            }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
