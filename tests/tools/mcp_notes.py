"""A real MCP server over stdio (or streamable HTTP: ``http PORT``), written with the official SDK:
two stateful tools (a note list),
a tool that reports an error, and, when started with ``hostile``, misbehaviour: a non-JSON line
and an unsolicited notification on stdout before it answers, a huge result, and a tool that
kills the server."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("notes")
NOTES: list[str] = []
HOSTILE = "hostile" in sys.argv[1:]


@app.tool()
def add_note(text: str) -> str:
    """Add a note."""
    NOTES.append(text)
    return f"{len(NOTES)} note(s)"


@app.tool(name="notes.list")
def list_notes() -> list[str]:
    """List the notes."""
    return NOTES


@app.tool()
def refuse(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@app.tool()
def huge(size: int) -> str:
    """A result of ``size`` characters."""
    return "y" * size


@app.tool()
def die() -> str:
    """Ends the server mid-call."""
    os._exit(3)


if __name__ == "__main__":
    if HOSTILE:
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", '
                         '"data": "unasked"}}\n')
        sys.stdout.flush()
        print("starting, noisily", file=sys.stderr)
    if "http" in sys.argv[1:]:  # streamable HTTP on 127.0.0.1:PORT/mcp (uvicorn)
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("http") + 1]))
    else:
        app.run()
