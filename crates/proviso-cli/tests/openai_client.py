"""The official `openai` Python client against a running `proviso serve`.

Usage: python3 openai_client.py BASE_URL

Each check prints one line; any failure raises, and the script exits non-zero. The model is
tiny, so the checks assert what proviso guarantees (shape, validity, exact finish reasons),
never what the model chooses to say.
"""

import json
import re
import sys
from typing import Annotated, List, Literal, Optional, Union

import openai
import pydantic
from openai import OpenAI

BASE = sys.argv[1]
client = OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0, timeout=120)
MODEL = client.models.list().data[0].id

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_arm",
            "description": "Reads the arms of one clinical trial.",
            "parameters": {
                "type": "object",
                "properties": {
                    "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                    "arm_label": {"type": "string", "enum": ["A", "B", "C"]},
                },
                "required": ["trial_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_trials",
            "description": "Full-text search over trials.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 2, "maxLength": 40}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
]
QUESTION = [{"role": "user", "content": "Which arms of trial NCT04123456 were terminated?"}]


def valid_call(call):
    """Checks a returned call against the declared schemas (by hand: no jsonschema needed)."""
    args = json.loads(call.function.arguments)
    if call.function.name == "get_arm":
        assert set(args) <= {"trial_id", "arm_label"}, args
        assert re.fullmatch(r"NCT[0-9]{8}", args["trial_id"]), args
        assert args.get("arm_label", "A") in ("A", "B", "C"), args
    elif call.function.name == "search_trials":
        assert set(args) == {"query"}, args
        assert 2 <= len(args["query"]) <= 40, args
    else:
        raise AssertionError(f"undeclared tool {call.function.name}")
    assert call.id and call.type == "function"


def check(name, fn):
    fn()
    print(f"ok {name}")


def required():
    r = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls, choice
    for call in choice.message.tool_calls:
        valid_call(call)
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


def named():
    r = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=TOOLS, temperature=0,
        tool_choice={"type": "function", "function": {"name": "search_trials"}},
    )
    calls = r.choices[0].message.tool_calls
    assert calls and all(c.function.name == "search_trials" for c in calls), calls
    for call in calls:
        valid_call(call)


def auto():
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hello."}], tools=TOOLS, tool_choice="auto", temperature=0, max_tokens=40)
    choice = r.choices[0]
    if choice.finish_reason == "tool_calls":
        for call in choice.message.tool_calls:
            valid_call(call)
    else:
        assert choice.finish_reason in ("stop", "length"), choice
        assert choice.message.tool_calls is None and isinstance(choice.message.content, str)


def parallel():
    single = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, temperature=0)
    assert len(single.choices[0].message.tool_calls) == 1
    many = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", parallel_tool_calls=True, temperature=0)
    calls = many.choices[0].message.tool_calls
    assert 1 <= len(calls) <= 4
    assert len({c.id for c in calls}) == len(calls), "call ids must be distinct"
    for call in calls:
        valid_call(call)


def tool_round_trip():
    first = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"arms": [{"label": "A", "status": "terminated"}]})},
    ]
    r = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=30)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason in ("stop", "length")


def json_schema_strict():
    schema = {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}, "count": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["color", "hex", "count"],
        "additionalProperties": False,
    }
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name a color."}], temperature=0.7, seed=3,
        response_format={"type": "json_schema", "json_schema": {"name": "color", "schema": schema, "strict": True}},
    )
    assert r.choices[0].finish_reason == "stop"
    value = json.loads(r.choices[0].message.content)
    assert value["color"] in ("red", "green", "blue") and re.fullmatch(r"#[0-9a-f]{6}", value["hex"]) and 1 <= value["count"] <= 9, value


def stream_tool_calls():
    stream = client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice="required", temperature=0, stream=True)
    calls, finish = {}, None
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": None, "name": None, "arguments": ""})
                entry["id"] = delta.id or entry["id"]
                if delta.function and delta.function.name:
                    entry["name"] = delta.function.name
                if delta.function and delta.function.arguments:
                    entry["arguments"] += delta.function.arguments
            finish = choice.finish_reason or finish
    assert finish == "tool_calls", finish
    assert calls
    for entry in calls.values():
        assert entry["id"] and entry["name"] in ("get_arm", "search_trials")
        json.loads(entry["arguments"])


def stream_text():
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Count to five."}], temperature=0, max_tokens=12, stream=True)
    text, finish = "", None
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert text and finish == "length", (text, finish)


def unsupported_keyword():
    try:
        client.chat.completions.create(
            model=MODEL, messages=QUESTION,
            response_format={"type": "json_schema", "json_schema": {"name": "u", "schema": {"type": "array", "uniqueItems": True}}},
        )
    except openai.BadRequestError as e:
        assert e.status_code == 400 and "uniqueItems" in str(e), e
    else:
        raise AssertionError("an unenforceable keyword was accepted")


def unknown_named_tool():
    try:
        client.chat.completions.create(model=MODEL, messages=QUESTION, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "delete_trial"}})
    except openai.BadRequestError as e:
        assert "delete_trial" in str(e), e
    else:
        raise AssertionError("an undeclared named tool was accepted")


def truncation():
    r = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=5, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}},
    )
    choice = r.choices[0]
    assert choice.finish_reason == "length", choice
    try:
        json.loads(choice.message.content)
    except json.JSONDecodeError:
        pass
    else:
        raise AssertionError("a response cut by max_tokens held a complete object")


def completions():
    r = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=4, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length") and isinstance(r.choices[0].text, str)
    r = client.completions.create(model=MODEL, prompt="Answer yes or no:", max_tokens=4, temperature=0, extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].text in ("yes", "no"), r.choices[0].text


class Address(pydantic.BaseModel):
    street: str
    city: str
    zip_code: Optional[str] = None


class Cat(pydantic.BaseModel):
    pet_type: Literal["cat"]
    lives: int


class Dog(pydantic.BaseModel):
    pet_type: Literal["dog"]
    good: bool


class Person(pydantic.BaseModel):
    """A nested Pydantic model: its JSON schema refers to its `$defs`."""

    name: str
    kind: Literal["patient", "doctor"]
    home: Address
    # Bounded: a greedy 135M model repeats list items until the token limit otherwise.
    previous: List[Address] = pydantic.Field(max_length=2)
    nickname: Optional[str] = None
    pet: Annotated[Union[Cat, Dog], pydantic.Field(discriminator="pet_type")]


def pydantic_tool():
    # The tool as the openai client derives it from a Pydantic model (strict, with `$defs`).
    tool = openai.pydantic_function_tool(Person, name="register_person")
    assert "$defs" in tool["function"]["parameters"]
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Register Ada, a doctor living at 1 Main St, Springfield, with her cat."}],
        tools=[tool], tool_choice={"type": "function", "function": {"name": "register_person"}}, temperature=0, max_tokens=400,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.function.name == "register_person"
    Person.model_validate_json(call.function.arguments)


def pydantic_structured_output():
    r = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": "Describe a patient named Bo."}], response_format=Person, temperature=0, max_tokens=400,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop", choice
    assert isinstance(choice.message.parsed, Person), choice.message


RESPONSE_TOOLS = [
    {"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
     "parameters": t["function"]["parameters"], "strict": True}
    for t in TOOLS
]


def responses_api():
    """`client.responses.create`: a function tool, a JSON schema format, streamed and not."""
    r = client.responses.create(model=MODEL, input=QUESTION[0]["content"], tools=RESPONSE_TOOLS, tool_choice="required", temperature=0)
    calls = [item for item in r.output if item.type == "function_call"]
    assert r.status == "completed" and calls, r
    args = json.loads(calls[0].arguments)
    assert calls[0].name in ("get_arm", "search_trials"), calls[0]
    if calls[0].name == "get_arm":
        assert re.fullmatch(r"NCT[0-9]{8}", args["trial_id"]), args
    # The tool's result sent back, continuing the stored response.
    follow = client.responses.create(
        model=MODEL, previous_response_id=r.id, temperature=0, max_output_tokens=60,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": json.dumps({"arms": [{"label": "A", "status": "terminated"}]})}],
    )
    assert follow.status in ("completed", "incomplete") and follow.output[0].type == "message", follow
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 60}}, "required": ["answer"], "additionalProperties": False}
    r = client.responses.create(model=MODEL, input="Name one arm label.", temperature=0, max_output_tokens=80,
                                text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}})
    assert r.status == "completed", r
    assert isinstance(json.loads(r.output_text)["answer"], str), r.output_text
    kinds = []
    with client.responses.create(model=MODEL, input=QUESTION[0]["content"], tools=RESPONSE_TOOLS, tool_choice="required", temperature=0, stream=True) as stream:
        for event in stream:
            kinds.append(event.type)
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert "response.function_call_arguments.done" in kinds, kinds


def responses_logprobs():
    """Log-probabilities on the Responses API, as on chat: `include` and `top_logprobs`."""
    try:
        r = client.responses.create(model=MODEL, input="Say hello.", temperature=0, max_output_tokens=8,
                                    include=["message.output_text.logprobs"], top_logprobs=2)
    except openai.BadRequestError as e:
        # A gateway refuses them by name: an upstream's numbers would describe its own
        # sampling, not the output the gates accepted.
        assert "logprobs" in str(e) and "gateway" in str(e), e
        return
    part = r.output[0].content[0]
    assert part.logprobs, r
    assert "".join(t.token for t in part.logprobs) == part.text, (part.text, part.logprobs)
    assert all(t.logprob <= 0 and len(t.top_logprobs) <= 2 for t in part.logprobs), part.logprobs
    plain = client.responses.create(model=MODEL, input="Say hello.", temperature=0, max_output_tokens=8)
    assert plain.output[0].content[0].logprobs == [], plain


for name, fn in [
    ("required", required), ("named", named), ("auto", auto), ("parallel", parallel),
    ("tool_round_trip", tool_round_trip), ("json_schema_strict", json_schema_strict),
    ("stream_tool_calls", stream_tool_calls), ("stream_text", stream_text),
    ("unsupported_keyword", unsupported_keyword), ("unknown_named_tool", unknown_named_tool),
    ("truncation", truncation), ("completions", completions),
    ("pydantic_tool", pydantic_tool), ("pydantic_structured_output", pydantic_structured_output),
    ("responses_api", responses_api), ("responses_logprobs", responses_logprobs),
]:
    check(name, fn)
print("all ok")
