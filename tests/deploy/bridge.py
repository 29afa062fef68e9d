#!/usr/bin/env python3
"""Listens on HOST:PORT inside a network namespace and forwards each connection to
UP_HOST:UP_PORT in the namespace this process was started in: the lab's PostgreSQL
(host loopback) made reachable on a test "pod" namespace's loopback, nothing else.
Usage: bridge.py NETNS HOST PORT UP_HOST UP_PORT   (NETNS: a name under /run/netns)"""
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    # Network namespaces are per thread: only sockets made after this call are inside.
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main(netns, host, port, up_host, up_port):
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    setns(target)
    listener = socket.create_server((host, port))
    setns(home)
    print("bridge ready", flush=True)
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection((up_host, up_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
