"""A hostile MCP server over stdio, written by hand (JSON-RPC lines) to send what the SDK's own
servers never would: ``echo`` listed three times, and ``broken`` answering a result that is no MCP
result. ``env_value`` answers the value of its environment's ``FROM_PARENT``."""

from __future__ import annotations

import json
import os
import sys

TOOL = {"inputSchema": {"type": "object", "properties": {}}}
TOOLS = [{"name": "echo", "description": "Echo.", **TOOL}] * 3 + [
    {"name": "broken", "description": "Broken.", **TOOL},
    {"name": "env_value", "description": "Env.", **TOOL},
    {"name": "state_json", "description": "The state as JSON text.", **TOOL}]


def answer(request: dict, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if "id" not in request:
        continue  # a notification
    if method == "initialize":
        answer(request, {"protocolVersion": request["params"]["protocolVersion"],
                         "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}})
    elif method == "tools/list":
        answer(request, {"tools": TOOLS})
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "broken":
            answer(request, {"content": "not a list of blocks", "isError": "maybe"})
        elif name == "state_json":  # the SDK's shape for a "-> str" tool: text, and {"result": text}
            text = json.dumps({"notes": ["a", "b"], "n": 2})
            answer(request, {"content": [{"type": "text", "text": text}],
                             "structuredContent": {"result": text}})
        elif name == "env_value":
            answer(request, {"content": [{"type": "text", "text": os.environ.get("FROM_PARENT", "<unset>")}]})
        else:
            answer(request, {"content": [{"type": "text", "text": "echoed"}]})
    else:
        answer(request, {})
