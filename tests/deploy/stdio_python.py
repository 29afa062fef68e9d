"""The official MCP Python SDK (PyPI `mcp`) spawns `zabbix-mcp-guard stdio` and calls
tools over its stdin/stdout. Usage: python stdio_python.py BINARY FRONTEND_URL TOKEN
Prints one JSON summary line; exits non-zero with the reason on failure."""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary, url, token):
    params = StdioServerParameters(
        command=binary,
        args=["--frontend-url", url, "stdio"],
        env={"ZABBIX_API_TOKEN": token},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            assert "host_get" in tools, tools
            result = await session.call_tool("host_get", {"limit": 50})
            assert not result.isError, result
            text = result.content[0].text
            hosts = [h["host"] for h in json.loads(text)["results"]]
            assert "mcp-web-01" in hosts, hosts
            print(json.dumps({"server": init.serverInfo.name, "tools": len(tools), "hosts": hosts}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
