#!/usr/bin/env python3
"""Tiny Zabbix JSON-RPC CLI (stdlib only).

  zapi.py -e /var/lib/zbx-test/zabbix7.env [-t ZBX_TOKEN_VIEWER] METHOD ['{"json": "params"}']
      URL + token from the env file; the token is sent the way that version wants it
      (body `auth` on 6.0, `Authorization: Bearer` on 6.4+). -t picks another token variable.
  ZBX_URL=... ZBX_AUTH=token | ZBX_BEARER=token  zapi.py METHOD [PARAMS]     (raw, explicit style)
Prints the whole JSON-RPC response.
"""
import argparse, json, os, sys

sys.dont_write_bytecode = True  # keep deploy/lab free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zbxlab import Api, load_env, rpc  # noqa: E402

URL = os.environ.get("ZBX_URL", "http://127.0.0.1:8080/api_jsonrpc.php")


def call(method, params=None, auth=None, bearer=None, url=None, raw=False):
    resp = rpc(url or URL, method, params, token=auth, bearer=bearer)
    if raw:
        return resp
    if "error" in resp:
        raise RuntimeError(f"{method}: {resp['error']}")
    return resp["result"]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Zabbix JSON-RPC call")
    ap.add_argument("-e", "--env", help="env file written by start-zabbix.sh")
    ap.add_argument("-t", "--token-var", default="ZBX_TOKEN", help="token variable in the env file")
    ap.add_argument("method")
    ap.add_argument("params", nargs="?", default="{}")
    a = ap.parse_args()
    p = json.loads(a.params)
    if a.env:
        env = load_env(a.env)
        api = Api(env["ZBX_URL"], env[a.token_var], env.get("ZBX_API_VERSION"))
        tok = None if a.method in ("apiinfo.version", "user.login", "user.checkAuthentication") else api.token
        resp = rpc(api.url, a.method, p, token=None if api.bearer else tok, bearer=tok if api.bearer else None)
    else:
        resp = call(a.method, p, auth=os.environ.get("ZBX_AUTH"), bearer=os.environ.get("ZBX_BEARER"), raw=True)
    print(json.dumps(resp, indent=1))
