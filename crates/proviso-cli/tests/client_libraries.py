"""The client libraries people use, against a proviso server: instructor, pydantic-ai,
langchain-openai and litellm, each with structured output and tool calls, as their own
documentation shows them. Run by `serve::client_libraries` with PYTHONPATH pointing at the
libraries `scripts/setup` installs into target/pyclients.

Usage: client_libraries.py BASE_URL
"""

import os
import sys
from typing import Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from pydantic import BaseModel, Field  # noqa: E402

BASE = sys.argv[1].rstrip("/") + "/v1"
MODEL = "SmolLM2-135M-Instruct"
QUESTION = "Which arm of trial NCT04123456 was terminated? It was arm A."


class Arm(BaseModel):
    """One arm of a clinical trial."""

    trial_id: str = Field(pattern=r"^NCT[0-9]{8}$", description="The trial's registry id.")
    arm: Literal["A", "B", "C"]


GET_ARM = {
    "type": "function",
    "function": {
        "name": "get_arm",
        "description": "Reads one arm of a clinical trial.",
        "parameters": {
            "type": "object",
            "properties": {
                "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                "arm": {"type": "string", "enum": ["A", "B", "C"]},
            },
            "required": ["trial_id", "arm"],
            "additionalProperties": False,
        },
    },
}


def check_arm(where, value):
    assert isinstance(value, Arm), f"{where}: {value!r}"
    assert value.trial_id.startswith("NCT") and len(value.trial_id) == 11, f"{where}: {value!r}"
    print(f"ok {where}: {value!r}")


def instructor_checks():
    import instructor
    from openai import OpenAI

    raw = OpenAI(base_url=BASE, api_key="unused", max_retries=0, timeout=120)
    for mode in (instructor.Mode.TOOLS, instructor.Mode.JSON_SCHEMA):
        client = instructor.from_openai(raw, mode=mode)
        arm = client.chat.completions.create(
            model=MODEL,
            response_model=Arm,
            messages=[{"role": "user", "content": QUESTION}],
            temperature=0,
            max_retries=0,
        )
        check_arm(f"instructor {mode.value}", arm)


def pydantic_ai_checks():
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=BASE, api_key="unused")
    for name, model in (
        ("chat", OpenAIChatModel(MODEL, provider=provider)),
        ("responses", OpenAIResponsesModel(MODEL, provider=provider)),
    ):
        agent = Agent(model, output_type=Arm, retries=0)
        result = agent.run_sync(QUESTION, model_settings={"temperature": 0})
        check_arm(f"pydantic-ai {name}", result.output)


def langchain_checks():
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=MODEL, base_url=BASE, api_key="unused", temperature=0, max_retries=0, timeout=120)
    check_arm(
        "langchain with_structured_output(json_schema)",
        llm.with_structured_output(Arm, method="json_schema").invoke(QUESTION),
    )
    check_arm(
        "langchain with_structured_output(function_calling)",
        llm.with_structured_output(Arm, method="function_calling").invoke(QUESTION),
    )
    message = llm.bind_tools([GET_ARM], tool_choice="get_arm").invoke(QUESTION)
    assert message.tool_calls and message.tool_calls[0]["name"] == "get_arm", message
    print(f"ok langchain bind_tools: {message.tool_calls[0]['args']}")
    responses = ChatOpenAI(
        model=MODEL, base_url=BASE, api_key="unused", temperature=0, max_retries=0, timeout=120,
        use_responses_api=True, max_tokens=24,
    )
    reply = responses.invoke("Say hello.")
    assert reply.text, reply
    print(f"ok langchain use_responses_api: {reply.text!r}")


def litellm_checks():
    import litellm

    response = litellm.completion(
        model=f"openai/{MODEL}",
        api_base=BASE,
        api_key="unused",
        messages=[{"role": "user", "content": QUESTION}],
        tools=[GET_ARM],
        tool_choice="required",
        temperature=0,
    )
    calls = response.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_arm", response
    print(f"ok litellm tools: {calls[0].function.arguments}")
    response = litellm.completion(
        model=f"openai/{MODEL}",
        api_base=BASE,
        api_key="unused",
        messages=[{"role": "user", "content": QUESTION}],
        response_format=Arm,
        temperature=0,
    )
    check_arm("litellm response_format", Arm.model_validate_json(response.choices[0].message.content))


failures = []
for check in (instructor_checks, pydantic_ai_checks, langchain_checks, litellm_checks):
    try:
        check()
    except Exception as e:  # one library's failure must not hide the others'
        failures.append(f"{check.__name__}: {type(e).__name__}: {e}")
        print(f"FAILED {check.__name__}: {type(e).__name__}: {e}")
if failures:
    sys.exit(1)
print("all ok")
