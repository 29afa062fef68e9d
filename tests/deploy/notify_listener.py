"""A service manager's notification socket, as systemd's /run/systemd/notify: binds a
datagram socket at PATH (writable by any user, as systemd's is) and appends each message
it receives to LOG as one line (its fields joined by spaces), until killed.
Usage: python3 notify_listener.py PATH LOG"""
import os
import socket
import sys


def main(path, log):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    os.chmod(path, 0o777)
    with open(log, "a", buffering=1) as out:
        while True:
            message = sock.recv(4096).decode()
            out.write(" ".join(message.split("\n")).strip() + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
