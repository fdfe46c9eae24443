"""Server-executed MCP tools through the official openai Python client, against a proviso
server started with `--mcp` on the filesystem server (npm) and the time server (PyPI).

Checks, on /v1/responses:
- a tool that needs no approval runs: an `mcp_list_tools` item, an `mcp_call` item with its
  output, and an answer that states the fact the file holds;
- a tool that needs approval comes back as an `mcp_approval_request`, nothing run; the
  `mcp_approval_response` of the next request (by `previous_response_id`) runs it;
- a declined approval runs nothing;
- the time server's tool is called with schema-valid arguments;
- streaming carries the MCP items as their events;
- a write refused by the default policy is an `mcp_call` with a gate error, the file system
  untouched;
on /v1/chat/completions (proviso's extension): the calls under `proviso.mcp`; and
openai-agents' HostedMCPTool, with and without approval (its `on_approval_request`).

Usage: mcp_server.py BASE_URL DIR (DIR holds boiler.txt, served by the filesystem server)
"""

import json
import os
import sys
import time

from openai import OpenAI

BASE = sys.argv[1].rstrip("/") + "/v1"
DIR = sys.argv[2]
MODEL = "SmolLM2-135M-Instruct"
FILE = os.path.join(DIR, "boiler.txt")
QUESTION = f"Read {FILE}: when was the boiler serviced?"
FACT = "3 March 2026"

client = OpenAI(base_url=BASE, api_key="unused")
START = time.time()
# Every request is greedy (temperature 0): the server seeds unseeded sampling from a
# process-wide counter, so sampled runs would depend on which tests ran before.


def passed(what, *extra):
    print(f"{what}: ok ({time.time() - START:.1f} s)", *extra)


def kinds(response):
    return [item.type for item in response.output]


def fs(**extra):
    return {"type": "mcp", "server_label": "fs", "allowed_tools": ["read_text_file"], **extra}


# No approval needed: the call runs, its output is in the response, the answer states it.
r = client.responses.create(model=MODEL, temperature=0, input=QUESTION, tools=[fs(require_approval="never")])
assert kinds(r)[0] == "mcp_list_tools", kinds(r)
calls = [i for i in r.output if i.type == "mcp_call"]
assert calls and calls[0].name == "read_text_file" and calls[0].error is None, r.output
assert FACT in calls[0].output, calls[0].output
assert json.loads(calls[0].arguments) == {"path": FILE}, calls[0].arguments
assert FACT in r.output_text, r.output_text
passed("no approval")

# The default needs approval: a request, nothing run.
r = client.responses.create(model=MODEL, temperature=0, input=QUESTION, tools=[fs()])
assert "mcp_call" not in kinds(r), kinds(r)
asks = [i for i in r.output if i.type == "mcp_approval_request"]
assert len(asks) == 1 and asks[0].server_label == "fs", r.output
# Approved: it runs and the answer follows.
r2 = client.responses.create(model=MODEL, temperature=0, previous_response_id=r.id, tools=[fs()],
                             input=[{"type": "mcp_approval_response",
                                     "approval_request_id": asks[0].id, "approve": True}])
done = [i for i in r2.output if i.type == "mcp_call"]
assert done and done[0].approval_request_id == asks[0].id and FACT in done[0].output, r2.output
assert FACT in r2.output_text, r2.output_text
passed("approved")
# Declined: nothing runs.
r3 = client.responses.create(model=MODEL, temperature=0, previous_response_id=r.id, tools=[fs()],
                             input=[{"type": "mcp_approval_response",
                                     "approval_request_id": asks[0].id, "approve": False}])
assert "mcp_call" not in kinds(r3), kinds(r3)
passed("declined")

# The time server: schema-valid arguments, a result.
r = client.responses.create(
    model=MODEL, temperature=0, input="What time is it now in the timezone Europe/Paris?",
    tools=[{"type": "mcp", "server_label": "time", "require_approval": "never",
            "allowed_tools": ["get_current_time"]}])
calls = [i for i in r.output if i.type == "mcp_call"]
assert calls and calls[0].error is None, r.output
arguments = json.loads(calls[0].arguments)
assert set(arguments) == {"timezone"} and isinstance(arguments["timezone"], str), arguments
passed("time server", arguments)

# Streaming: the MCP items come as their events, then the answer.
seen = []
with client.responses.stream(model=MODEL, temperature=0, input=QUESTION, tools=[fs(require_approval="never")]) as stream:
    for event in stream:
        seen.append(event.type)
    final = stream.get_final_response()
assert "response.mcp_call.completed" in seen and "response.mcp_list_tools.completed" in seen, seen
assert FACT in final.output_text, final.output_text
passed("stream")

# A write under the default policy: refused at the permission gate, nothing written.
target = os.path.join(DIR, "written.txt")
r = client.responses.create(
    model=MODEL, temperature=0, input=f"Write the text 'hello' to the file {target}", max_output_tokens=200,
    # `required`: what is checked is the gate's refusal of a call, so the step is a call.
    tool_choice="required",
    tools=[{"type": "mcp", "server_label": "fs", "require_approval": "never",
            "allowed_tools": ["write_file"]}])
calls = [i for i in r.output if i.type == "mcp_call"]
assert calls, r.output
assert all(c.error is not None for c in calls), calls
assert "permission gate" in calls[0].error.message, calls[0].error
assert not os.path.exists(target), "the file system must be left untouched"
passed("write refused")

# Chat completions, proviso's extension: the same tool, the calls under `proviso.mcp`.
chat = client.chat.completions.create(
    model=MODEL, temperature=0, messages=[{"role": "user", "content": QUESTION}],
    tools=[fs()])
body = chat.model_dump()
made = [i for i in body["proviso"]["mcp"] if i["type"] == "mcp_call"]
assert made and FACT in made[0]["output"], body["proviso"]
assert FACT in chat.choices[0].message.content, chat.choices[0].message.content
passed("chat")

# openai-agents' HostedMCPTool runs the same `mcp` tool through its Responses model, and
# answers an approval request with its `on_approval_request` callback.
from agents import Agent, HostedMCPTool, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)
model = OpenAIResponsesModel(model=MODEL, openai_client=AsyncOpenAI(base_url=BASE, api_key="unused"))
asked = []


def approve(request):
    asked.append(request.data.name)
    return {"approve": True}


for approval in ("never", "always"):
    agent = Agent(name="reader", instructions="Answer from the file.", model=model,
                  model_settings=ModelSettings(temperature=0), tools=[
        HostedMCPTool(tool_config={"type": "mcp", "server_label": "fs", "allowed_tools": ["read_text_file"],
                                   "require_approval": approval}, on_approval_request=approve)])
    result = Runner.run_sync(agent, QUESTION)
    assert FACT in str(result.final_output), result.final_output
    names = [type(item).__name__ for item in result.new_items]
    assert "ToolCallItem" in names, names
    passed(f"openai-agents HostedMCPTool, approval {approval}")
assert asked == ["read_text_file"], asked
print("all ok")
