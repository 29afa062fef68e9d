# Shared by the perf scripts (sourced, not run).

# A free port in ListenPort's range (1024-32767).
free_port() {
    python3 -c '
import random, socket
for _ in range(100):
    port = random.randint(20000, 32767)
    try:
        socket.socket().bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        pass'
}
