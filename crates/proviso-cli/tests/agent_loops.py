"""The agent loops of real frameworks against a proviso server: each runs with one tool whose
result answers the question, and must end with an answer within the framework's default
turn limit, having called the tool at least once and never the same call twice.

Frameworks: pydantic-ai (default ToolOutput, NativeOutput, PromptedOutput, and plain text),
langgraph's create_react_agent, openai-agents' Runner.run_sync with its Responses and its
Chat Completions model, and a plain openai-client loop on chat and on Responses. Run by
`serve::agent_loops` with PYTHONPATH pointing at target/pyagents (`scripts/setup --tests`).

Usage: agent_loops.py BASE_URL [NAME ...]
"""

import json
import sys
import time

from pydantic import BaseModel

BASE = sys.argv[1].rstrip("/") + "/v1"
ONLY = set(sys.argv[2:])
MODEL = "SmolLM2-135M-Instruct"
QUESTION = "What is the weather in Paris today?"
FACT = "sunny and 21 degrees"


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    summary: str


class Calls:
    """Every call a framework made to the tool, to check none was repeated."""

    def __init__(self):
        self.seen = []

    def record(self, city):
        self.seen.append(city)
        return f"In {city} it is {FACT} today."

    def check(self, where):
        assert self.seen, f"{where}: the tool was never called"
        assert len(set(self.seen)) == len(self.seen), f"{where}: a call was repeated: {self.seen}"


RESULTS = []


def case(name):
    def wrap(fn):
        def run():
            if ONLY and name not in ONLY:
                return
            calls = Calls()
            started = time.monotonic()
            try:
                answer = fn(calls)
                calls.check(name)
                assert answer is not None and str(answer).strip(), f"{name}: no answer"
            except Exception as e:  # noqa: BLE001 - every failure is reported by name
                RESULTS.append((name, False, f"{type(e).__name__}: {e}"))
                print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
                return
            took = time.monotonic() - started
            RESULTS.append((name, True, ""))
            print(f"ok {name} ({took:.1f} s, calls {calls.seen}): {answer!r}", flush=True)

        run.__name__ = name
        CASES.append(run)
        return run

    return wrap


CASES = []


def pydantic_model():
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=BASE, api_key="unused"))


def pydantic_agent(calls, output_type):
    from pydantic_ai import Agent

    agent = Agent(pydantic_model(), output_type=output_type, model_settings={"temperature": 0})

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return calls.record(city)

    return agent.run_sync(QUESTION).output


@case("pydantic-ai text")
def _(calls):
    return pydantic_agent(calls, str)


@case("pydantic-ai ToolOutput")
def _(calls):
    from pydantic_ai import ToolOutput

    return pydantic_agent(calls, ToolOutput(Weather))


@case("pydantic-ai NativeOutput")
def _(calls):
    from pydantic_ai import NativeOutput

    return pydantic_agent(calls, NativeOutput(Weather))


@case("pydantic-ai PromptedOutput")
def _(calls):
    from pydantic_ai import PromptedOutput

    return pydantic_agent(calls, PromptedOutput(Weather))


def langgraph_agent(calls, **kwargs):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return calls.record(city)

    llm = ChatOpenAI(model=MODEL, base_url=BASE, api_key="unused", temperature=0, max_retries=0)
    agent = create_react_agent(llm, [get_weather], **kwargs)
    return agent.invoke({"messages": [("user", QUESTION)]})


@case("langgraph create_react_agent")
def _(calls):
    state = langgraph_agent(calls)
    return state["messages"][-1].content


@case("langgraph create_react_agent, structured response")
def _(calls):
    state = langgraph_agent(calls, response_format=Weather)
    return state["structured_response"]


def openai_agents(calls, responses):
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=BASE, api_key="unused", max_retries=0)
    model = (
        OpenAIResponsesModel(model=MODEL, openai_client=client)
        if responses
        else OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    )

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city today."""
        return calls.record(city)

    agent = Agent(name="weather", instructions="Answer with the tool's help.", model=model,
                  tools=[get_weather], model_settings=ModelSettings(temperature=0))
    return Runner.run_sync(agent, QUESTION).final_output


@case("openai-agents Responses model")
def _(calls):
    return openai_agents(calls, responses=True)


@case("openai-agents Chat Completions model")
def _(calls):
    return openai_agents(calls, responses=False)


TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@case("openai client loop, chat")
def _(calls):
    from openai import OpenAI

    client = OpenAI(base_url=BASE, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": QUESTION}]
    ids = set()
    for _ in range(10):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=[TOOL],
                                                  temperature=0)
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            assert call.id not in ids, f"call id {call.id} repeated"
            ids.add(call.id)
            city = json.loads(call.function.arguments).get("city", "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calls.record(city)})
    raise AssertionError("no answer within 10 turns")


@case("openai client loop, Responses")
def _(calls):
    from openai import OpenAI

    client = OpenAI(base_url=BASE, api_key="unused", max_retries=0)
    tool = {"type": "function", **TOOL["function"]}
    previous = None
    items = [{"role": "user", "content": QUESTION}]
    ids = set()
    for _ in range(10):
        response = client.responses.create(model=MODEL, input=items, tools=[tool],
                                           previous_response_id=previous, temperature=0)
        previous = response.id
        made = [o for o in response.output if o.type == "function_call"]
        if not made:
            return response.output_text
        items = []
        for call in made:
            assert call.call_id not in ids, f"call id {call.call_id} repeated"
            ids.add(call.call_id)
            city = json.loads(call.arguments).get("city", "")
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": calls.record(city)})
    raise AssertionError("no answer within 10 turns")


# Three turns per conversation: ids repeat across turns and across conversations or not at
# all, and each turn costs two generations over a growing conversation.
@case("call ids unique over 3 turns and two conversations")
def _(calls):
    from openai import OpenAI

    client = OpenAI(base_url=BASE, api_key="unused", max_retries=0)
    ids = []
    cities = ["Paris", "Rome", "Oslo"]
    for conversation in range(2):
        messages = []
        for city in cities:
            messages.append({"role": "user", "content": f"What is the weather in {city} today?"})
            for _ in range(4):
                response = client.chat.completions.create(
                    model=MODEL, messages=messages, tools=[TOOL], temperature=0,
                    tool_choice="required" if messages[-1]["role"] == "user" else "auto")
                message = response.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    ids.append(call.id)
                    arguments = json.loads(call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": f"In {arguments.get('city', city)} it is {FACT}."})
        calls.seen.append(f"conversation {conversation}")
    assert len(ids) >= 2 * len(cities), f"too few calls: {ids}"
    assert len(set(ids)) == len(ids), f"call ids repeated: {ids}"
    assert all(i.startswith("call_") for i in ids), ids
    return f"{len(ids)} distinct ids"


if __name__ == "__main__":
    for run in CASES:
        run()
    failed = [r for r in RESULTS if not r[1]]
    print(f"{len(RESULTS) - len(failed)}/{len(RESULTS)} agent loops finished", flush=True)
    if failed:
        sys.exit(1)
    print("all ok")
