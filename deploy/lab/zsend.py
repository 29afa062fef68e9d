#!/usr/bin/env python3
"""Minimal zabbix_sender replacement (bookworm has no zabbix-sender package).

  zsend.py HOST KEY VALUE [server] [port] [clock]
Prints the server's reply, e.g. {"response": "success", "info": "processed: 1; failed: 0; ..."}.
"""
import json, os, sys

sys.dont_write_bytecode = True  # keep deploy/lab free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zbxlab import send_values  # noqa: E402


def send(host, key, value, server="127.0.0.1", port=10051, clock=None):
    return send_values([{"host": host, "key": key, "value": value, "clock": clock}], server, port)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) < 3:
        sys.exit(__doc__)
    print(json.dumps(send(a[0], a[1], a[2], a[3] if len(a) > 3 else "127.0.0.1",
                          int(a[4]) if len(a) > 4 else 10051, int(a[5]) if len(a) > 5 else None)))
