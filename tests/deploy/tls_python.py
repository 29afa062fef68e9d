"""The official MCP Python SDK (PyPI `mcp`) over streamable HTTP with TLS, trusting only
CA_FILE: calls host_get {"search": "mcp-web-01"}.
Usage: python tls_python.py MCP_URL TOKEN CA_FILE. Prints one JSON summary line: is_error,
the record count, and a tool error's code and message as the SDK read them."""
import asyncio
import json
import ssl
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main(url, token, ca_file):
    context = ssl.create_default_context(cafile=ca_file)

    # The SDK's own factory (mcp.shared._httpx_utils) with the CA as the only trust.
    def client_factory(headers=None, timeout=None, auth=None):
        return httpx.AsyncClient(
            headers=headers,
            timeout=timeout or httpx.Timeout(30.0, read=300.0),
            auth=auth,
            follow_redirects=True,
            verify=context,
        )

    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(
        url, headers=headers, httpx_client_factory=client_factory
    ) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("host_get", {"search": "mcp-web-01"})
            body = result.structuredContent or json.loads(result.content[0].text)
            print(
                json.dumps(
                    {
                        "is_error": result.isError,
                        "count": body.get("count"),
                        "code": body.get("code"),
                        "message": body.get("message"),
                    }
                )
            )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
