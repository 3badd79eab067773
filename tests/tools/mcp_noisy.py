"""A real MCP server over stdio (the official SDK) that leaves work behind: at start it starts a
child process in its own process group that would outlive it (its pid written to the file named
by ``NOISY_PID_FILE``), and its tool writes ``size`` bytes to stderr before answering. It exits
cleanly when its stdin closes, as a well-behaved server does."""

from __future__ import annotations

import os
import subprocess
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("noisy")
CHILD = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # same group
with open(os.environ["NOISY_PID_FILE"], "a") as pids:
    pids.write(f"{CHILD.pid}\n")


@app.tool()
def shout(size: int) -> str:
    """Write ``size`` bytes to stderr, then answer."""
    block = "e" * (1 << 20) + "\n"
    for _ in range(size >> 20):
        sys.stderr.write(block)
    sys.stderr.write("the last words\n")
    sys.stderr.flush()
    return "shouted"


if __name__ == "__main__":
    app.run("stdio")
