"""A hostile MCP server over stdio, scripted for proviso's tests (plain JSON-RPC, no SDK).

Its tools misbehave on purpose:
- `echo` answers normally (read-only), and is renamed `echo_v2` at the second listing;
- `weird` declares a schema keyword no grammar can enforce;
- `flood` answers with 50 MB of text;
- `hang` never answers;
- `crash` exits in the middle of the call;
- `fail` answers with `isError`.
"""

import json
import sys

listings = 0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools():
    global listings
    listings += 1
    echo = "echo" if listings == 1 else "echo_v2"
    plain = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [
        {"name": echo, "description": "Repeats the text.", "inputSchema": plain,
         "annotations": {"readOnlyHint": True, "openWorldHint": False}},
        {"name": "weird", "description": "Declares what cannot be enforced.",
         "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}},
                         "dependentSchemas": {"x": {"required": ["y"]}}},
         "annotations": {"readOnlyHint": True}},
        {"name": "flood", "description": "Answers with far too much.",
         "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        {"name": "hang", "description": "Never answers.",
         "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        {"name": "crash", "description": "Dies mid-call.",
         "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        {"name": "fail", "description": "Reports a tool error.",
         "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    ]


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    message = json.loads(line)
    method = message.get("method")
    ident = message.get("id")
    if ident is None:
        continue  # a notification
    if method == "initialize":
        version = message["params"].get("protocolVersion", "2025-11-25")
        if version not in ("2025-11-25", "2025-06-18", "2025-03-26"):
            version = "2025-11-25"
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools()}})
    elif method == "tools/call":
        name = message["params"]["name"]
        arguments = message["params"].get("arguments") or {}
        if name in ("echo", "echo_v2") and (name == "echo") == (listings <= 1):
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "content": [{"type": "text", "text": arguments.get("text", "")}]}})
        elif name == "flood":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "content": [{"type": "text", "text": "x" * (50 * 1024 * 1024)}]}})
        elif name == "hang":
            pass
        elif name == "crash":
            sys.exit(3)
        elif name == "fail":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "content": [{"type": "text", "text": "Error: the record is locked"}], "isError": True}})
        else:
            send({"jsonrpc": "2.0", "id": ident,
                  "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": ident,
              "error": {"code": -32601, "message": f"Method not found: {method}"}})
