"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP: CALLS sessions call
host_get at once, and the summary counts the result codes they read (`ok` or the error
body's `code`), with one `overloaded` message.
Usage: python overload_python.py MCP_URL TOKEN CALLS. Prints one JSON summary line."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def one(url, headers, ready, go):
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            ready.release()
            await go.wait()
            result = await session.call_tool("host_get", {"limit": 1})
            if not result.isError:
                return "ok", None
            body = json.loads(result.content[0].text)
            return body["code"], body["message"]


async def main(url, token, calls):
    headers = {"Authorization": f"Bearer {token}"}
    ready, go = asyncio.Semaphore(0), asyncio.Event()
    tasks = [asyncio.create_task(one(url, headers, ready, go)) for _ in range(calls)]
    for _ in range(calls):
        await ready.acquire()
    go.set()
    results = await asyncio.gather(*tasks)
    codes = {}
    for code, _ in results:
        codes[code] = codes.get(code, 0) + 1
    message = next((m for c, m in results if c == "overloaded"), None)
    print(json.dumps({"codes": codes, "overloaded_message": message}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
