"""Small stdlib-only helpers for the Zabbix lab: env files, JSON-RPC client, trapper sender.

Used by seed.py, zapi.py and zsend.py. Works with Zabbix 6.0 (token in the body `auth` field)
and 6.4+/7.x (token in `Authorization: Bearer`).
"""
import json
import os
import re
import socket
import struct
import urllib.request
import zlib


# ------------------------------------------------------------------ env files (KEY=VALUE lines)
def load_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                env[k.strip()] = v.strip()
    return env


def update_env(path, values):
    """Set KEY=VALUE lines in an env file: existing keys are replaced in place, new keys appended.
    Idempotent (never duplicates a key); written atomically."""
    lines = open(path).read().splitlines() if os.path.exists(path) else []
    out, seen = [], set()
    for line in lines:
        k = line.split("=", 1)[0].strip() if "=" in line else None
        if k in values:
            if k in seen:
                continue  # drop duplicates left by older writers
            out.append(f"{k}={values[k]}")
            seen.add(k)
        else:
            out.append(line)
    out += [f"{k}={v}" for k, v in values.items() if k not in seen]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


# ------------------------------------------------------------------ JSON-RPC
class ApiError(RuntimeError):
    def __init__(self, method, error):
        super().__init__(f"{method}: {error}")
        self.method, self.error = method, error


_ID = 0


def rpc(url, method, params=None, token=None, bearer=None, timeout=60):
    """One JSON-RPC call; returns the whole response dict. token -> body `auth`, bearer -> header."""
    global _ID
    _ID += 1
    body = {"jsonrpc": "2.0", "method": method, "params": params if params is not None else {}, "id": _ID}
    headers = {"Content-Type": "application/json-rpc"}
    if token:
        body["auth"] = token
    if bearer:
        headers["Authorization"] = "Bearer " + bearer
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Api:
    """Version-aware client: Api(url, token). Picks body `auth` (< 6.4) or Bearer (>= 6.4)."""

    def __init__(self, url, token=None, version=None):
        self.url, self.token, self.bearer = url, token, False
        self.version = version or self.call("apiinfo.version", {}, auth=False)  # 6.0 rejects auth here
        self.major = version_tuple(self.version)
        self.bearer = self.major >= (6, 4)  # 6.4+: Authorization header (7.2+ requires it); 6.0: body only

    def with_token(self, token):
        return Api(self.url, token, self.version)

    def call(self, method, params=None, auth=True):
        tok = self.token if auth else None
        r = rpc(self.url, method, params, token=None if self.bearer else tok, bearer=tok if self.bearer else None)
        if "error" in r:
            raise ApiError(method, r["error"])
        return r["result"]

    @classmethod
    def from_env(cls, path, token_var="ZBX_TOKEN"):
        env = load_env(path)
        return cls(env["ZBX_URL"], env[token_var], env.get("ZBX_API_VERSION"))


# ------------------------------------------------------------------ trapper protocol (zabbix_sender)
def _recv_all(s):
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return buf
        buf += chunk


def send_values(data, server="127.0.0.1", port=10051, timeout=10):
    """data: list of {"host", "key", "value"[, "clock", "ns"]}. Returns the server's JSON reply,
    e.g. {"response": "success", "info": "processed: 1; failed: 0; total: 1; seconds spent: ..."}."""
    items = []
    for d in data:
        it = {"host": d["host"], "key": d["key"], "value": str(d["value"])}
        if d.get("clock") is not None:
            it["clock"] = int(d["clock"])
            it["ns"] = int(d.get("ns", 0))
        items.append(it)
    payload = json.dumps({"request": "sender data", "data": items}).encode()
    with socket.create_connection((server, int(port)), timeout=timeout) as s:
        s.sendall(b"ZBXD\x01" + struct.pack("<II", len(payload), 0) + payload)
        buf = _recv_all(s)
    if buf[:4] != b"ZBXD":
        raise RuntimeError(f"bad trapper response {buf[:64]!r}")
    flags = buf[4]
    if flags & 0x04:  # large packet: 8-byte datalen + 8-byte reserved
        datalen, _ = struct.unpack("<QQ", buf[5:21])
        body = buf[21:21 + datalen]
    else:
        datalen, _ = struct.unpack("<II", buf[5:13])
        body = buf[13:13 + datalen]
    if flags & 0x02:
        body = zlib.decompress(body)
    return json.loads(body)


def sender_counts(reply):
    """'processed: 9; failed: 1; total: 10; ...' -> (9, 1, 10)"""
    info = reply.get("info", "")
    get = lambda k: int(m.group(1)) if (m := re.search(k + r":\s*(\d+)", info)) else 0
    return get("processed"), get("failed"), get("total")


def port_open(host, port, timeout=2):
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False
