//! One judge for every backend: the local model's workers (`proviso::LocalBackend`) and the
//! gateway (`proviso-gateway`) both hand a finished output here, and get back the same typed
//! result; retries and the sending of accepted calls are written here once.
//!
//! The order is the gates' order. The transport gate comes first and no default stands in
//! for what it judges: an upstream envelope is opened by [`proviso_contract::open_envelope`]
//! (a missing `finish_reason` is `missing_stop_reason`, never `stop`; missing content is
//! `missing_content`, never `""`), and the local model's stop reason is read from its own
//! enum. Only then is the output judged as text, a JSON object, a response schema's contract,
//! or tool calls through the [`ToolGate`] (with the answer contract for text answers).

use proviso_backend::{
    ChoiceResult, Delta, FinishReason, GenerationRequest, OutputConstraint, PromptInput,
    RejectedRequest, Reply, RunError, Sink, SteeringNote, ToolCallOut, ToolChoiceRequest,
};
use proviso_contract::{Code, Contract, Gate, Intent, Rejection};
use proviso_tools::steer::{self, History, Limits};
use proviso_tools::{CallFormat, Finish, Registry, ToolChoice, ToolGate, Usage};
use serde_json::Value;

/// A request refused before generation, naming the parameter.
pub fn rejected_request(
    param: &str,
    message: impl Into<String>,
    unsupported: bool,
) -> RejectedRequest {
    RejectedRequest {
        param: Some(param.to_owned()),
        message: message.into(),
        unsupported,
    }
}

/// The arguments of a call the client sent back in `messages[i]`: a JSON object, or the
/// request is refused (422). Every backend reads them here, so none reads a malformed
/// call as `{}`.
pub fn call_arguments(
    i: usize,
    call: &proviso_contract::MessageToolCall,
) -> Result<serde_json::Map<String, Value>, RejectedRequest> {
    let param = format!("messages[{i}].tool_calls");
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(_) => Err(rejected_request(
            &param,
            "tool-call arguments must be a JSON object",
            false,
        )),
        Err(e) => Err(rejected_request(
            &param,
            format!("arguments of `{}` are not JSON: {e}", call.name),
            false,
        )),
    }
}

/// The validator of a response schema; what it cannot enforce is refused by name.
///
/// A schema that is not valid (a malformed `pattern`, a reference that does not resolve) is
/// malformed data (422), as the same schema is among a tool's parameters; one that is valid
/// but cannot be enforced (an unknown keyword, a limit) is 400.
pub fn contract(schema: &Value, param: &str) -> Result<Contract, RejectedRequest> {
    Contract::builder(proviso_decode::strip_extensions(schema))
        .build()
        .map_err(|e| {
            let malformed = matches!(
                e,
                proviso_contract::ContractError::InvalidSchema { .. }
                    | proviso_contract::ContractError::InvalidDeclaration { .. }
            );
            rejected_request(
                param,
                format!("the schema cannot be enforced: {e}"),
                !malformed,
            )
        })
}

/// What steering from the conversation made of a request's tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Steered {
    /// The registry to generate and judge under.
    pub registry: Registry,
    /// The tool choice to generate under.
    pub choice: ToolChoice,
    /// Calls the decoder must not complete (the grammar could not exclude them).
    pub avoid: Vec<String>,
    /// Whether a first call the conversation cannot trace is to be written again on the
    /// other tools ([`proviso_tools::steer::first_call`]).
    pub retarget: bool,
    /// What was decided, for the response and the log.
    pub note: Option<SteeringNote>,
}

/// Steers a request's tools from its conversation, the same way for every backend
/// ([`proviso_tools::steer::plan`]): `limits` `None` (the server's `--steering off`) or a
/// request's `steering: false` leaves them as sent. `can_retarget` says whether the backend
/// can regenerate a first call on the other tools (the local model can; an upstream
/// cannot).
#[must_use]
pub fn steered(
    request: &GenerationRequest,
    limits: Option<&Limits>,
    format: CallFormat,
    registry: Registry,
    choice: ToolChoice,
    can_retarget: bool,
) -> Steered {
    let unsteered = |registry, choice| Steered {
        registry,
        choice,
        avoid: Vec::new(),
        retarget: false,
        note: None,
    };
    let (Some(limits), PromptInput::Chat(messages), true) =
        (limits, &request.prompt, request.steering)
    else {
        return unsteered(registry, choice);
    };
    let history = History::read(messages);
    let note = |report: &steer::Report| SteeringNote {
        summary: report.summary(),
        detail: serde_json::to_value(report).unwrap_or_default(),
    };
    let first = can_retarget
        .then(|| steer::first_call(&registry, &choice, &history))
        .flatten();
    let retarget = first.is_some();
    let mut steered = match steer::plan(&registry, format, &choice, &history, limits) {
        Some(plan) => Steered {
            note: Some(note(&plan.report)),
            registry: plan.registry,
            choice: plan.choice,
            avoid: plan.avoid,
            retarget,
        },
        None => Steered {
            note: first.as_ref().map(note),
            retarget,
            ..unsteered(registry, choice)
        },
    };
    // Arguments held to what the conversation supports (closed objects, no unasked knobs,
    // locators it wrote): the same narrowing as the harness's.
    let asked: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == proviso_contract::Role::User)
        .map(|m| m.content.as_str())
        .collect();
    let seen = conversation(request);
    if let Some(narrowed) =
        steer::narrow_arguments(&steered.registry, &asked.join("\n"), &[seen.as_str()])
    {
        steered.registry = narrowed;
    }
    steered
}

/// The text a call's arguments may come from: the user's and the tools' turns (not the
/// system prompt, which quotes every declaration, nor the assistant's own words).
#[must_use]
pub fn conversation(request: &GenerationRequest) -> String {
    match &request.prompt {
        PromptInput::Text(text) => text.clone(),
        PromptInput::Chat(messages) => messages
            .iter()
            .filter(|m| {
                matches!(
                    m.role,
                    proviso_contract::Role::User | proviso_contract::Role::Tool
                )
            })
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Under `json_object`, the JSON Schema the request's instructions state for the answer:
/// the first object in a system message that is a schema of an object (it declares
/// `properties`). JSON mode asks the prompt to describe the object (pydantic-ai's
/// `PromptedOutput` writes "Always respond with a JSON object that's compatible with this
/// schema: {…}"); a small model follows a grammar, not a description. Only the system
/// messages are read, which the application writes: a user's or a tool's text never
/// becomes a grammar. `None` for any other constraint, or when no schema is stated.
#[must_use]
pub fn stated_schema(request: &GenerationRequest) -> Option<Value> {
    if request.constraint != OutputConstraint::JsonObject || !request.steering {
        return None;
    }
    let PromptInput::Chat(messages) = &request.prompt else {
        return None;
    };
    messages
        .iter()
        .filter(|m| m.role == proviso_contract::Role::System)
        .find_map(|m| first_schema(&m.content))
}

/// The first JSON object in `text` that is a schema of an object.
fn first_schema(text: &str) -> Option<Value> {
    text.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value @ Value::Object(_)))
                if value.get("properties").is_some_and(Value::is_object)
                    && value.get("type").is_none_or(|t| t == "object") =>
            {
                Some(value)
            }
            _ => None,
        }
    })
}

/// The schema a text answer must meet, read from the request the same way for every
/// backend: a response schema (without proviso's extensions), or any object for
/// `json_object`.
pub fn answer_schema(request: &GenerationRequest) -> Option<Value> {
    match &request.constraint {
        OutputConstraint::JsonSchema { schema, .. } => {
            Some(proviso_decode::strip_extensions(schema))
        }
        OutputConstraint::JsonObject => Some(serde_json::json!({"type": "object"})),
        _ => None,
    }
}

/// The request's tools and tool choice, read the same way for every backend; `None` when
/// the request declares no tools or forbids calls. A named tool must be declared.
pub fn tools(
    request: &GenerationRequest,
) -> Result<Option<(Registry, ToolChoice)>, RejectedRequest> {
    let Some(tools) = &request.tools else {
        return Ok(None);
    };
    let choice = match &request.tool_choice {
        ToolChoiceRequest::None => return Ok(None),
        ToolChoiceRequest::Auto => ToolChoice::Auto,
        ToolChoiceRequest::Required => ToolChoice::Required,
        ToolChoiceRequest::Named(name) => ToolChoice::Named(name.clone()),
    };
    let registry = Registry::from_openai(tools)
        .map_err(|e| rejected_request("tools", e.to_string(), false))?;
    if let ToolChoice::Named(name) = &choice {
        if registry.get(name).is_none() {
            return Err(rejected_request(
                "tool_choice",
                format!(
                    "tool_choice names `{name}`, which is not among the declared tools ({})",
                    registry.names().join(", ")
                ),
                true,
            ));
        }
    }
    Ok(Some((registry, choice)))
}

/// How a finished output is judged.
#[derive(Debug)]
pub enum Judge {
    /// Returned as is (free text, and Lark, whose grammar is the whole contract: no second
    /// parser re-reads it).
    Text,
    /// Text that must match a regular expression, whole.
    Pattern(Box<regex::Regex>),
    /// Text that must be one of these strings.
    OneOf(Vec<String>),
    /// Text that must be in a Lark grammar's language, re-checked by llguidance over a
    /// byte-level tokenizer (an upstream that ignored the grammar is caught here).
    Grammar(Box<proviso_decode::TextChecker>),
    /// Strict JSON, an object.
    JsonObject,
    /// The response schema's contract.
    Contract(Box<Contract>),
    /// The tool gates; text answers pass `answer` when a response schema is given.
    Tools {
        /// The tool gate the calls pass.
        gate: Box<ToolGate>,
        /// Whether calls arrive in the envelope's `tool_calls` (an upstream's native tools)
        /// rather than written in the text.
        native: bool,
        /// The response schema's contract a text answer passes, when one is given.
        answer: Option<Box<Contract>>,
        /// The request's `tool_choice`, enforced on what comes back: under `required` or a
        /// named tool a text answer is refused, under a named tool every call must be to it.
        /// The local grammar already makes anything else unreachable; an upstream's output
        /// is held to the same rule here.
        choice: ToolChoice,
        /// `parallel_tool_calls`: when false, an output with more than one call is refused.
        parallel: bool,
    },
}

/// Why an output was refused: the gate, its stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The gate that refused it.
    pub gate: Gate,
    /// The gate's stable code.
    pub code: Code,
    /// What was wrong, for the client.
    pub message: String,
}

impl From<&Rejection> for Refusal {
    fn from(r: &Rejection) -> Self {
        Self {
            gate: r.gate(),
            code: r.code().clone(),
            message: r.message().to_owned(),
        }
    }
}

impl Refusal {
    fn new(gate: Gate, code: Code, message: impl Into<String>) -> Self {
        Self {
            gate,
            code,
            message: message.into(),
        }
    }
}

/// What an output that passed the transport gate is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// A text answer (also a JSON answer under a response schema).
    Answer(String),
    /// Accepted calls; `id` is the provider's id when it gave one.
    Calls(Vec<ToolCallOut>),
    /// A clarification question or an abort (a call format with typed intents): its text,
    /// and which it is.
    Reply(String, Reply),
}

/// How an output ended, before it is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Complete: judge it.
    Complete(Judged),
    /// Cut by the token limit: returned as a fragment of text, never judged as a call or an
    /// object.
    Cut(String),
    /// Stopped for degenerate repetition: a fragment, which a caller may regenerate.
    Looped(String),
}

impl Judge {
    /// The judge of a `guided_regex` (or `structured_outputs.regex`) constraint: the whole
    /// output must match. The decoder enforces the same expression; an upstream that ignored
    /// it is caught here.
    pub fn pattern(regex: &str, param: &str) -> Result<Self, RejectedRequest> {
        regex::Regex::new(&format!("^(?:{regex})$"))
            .map(|r| Self::Pattern(Box::new(r)))
            .map_err(|e| rejected_request(param, format!("not a regular expression: {e}"), false))
    }

    /// The complete calls of a step that was cut or looped inside a later call, as a step of
    /// its own (see [`proviso_tools::CallFormat::complete_calls`]); `None` for every other
    /// judge and for native calls. The caller judges the result as a complete output: a
    /// valid first call is not lost because the model went on writing.
    pub fn complete_calls(&self, fragment: &str) -> Option<String> {
        match self {
            Self::Tools {
                gate,
                native: false,
                ..
            } => gate.format().complete_calls(fragment),
            _ => None,
        }
    }

    /// The judge of a Lark grammar (`guided_grammar`, a custom tool's grammar): the whole
    /// output must be in its language.
    pub fn grammar(lark: &str, param: &str) -> Result<Self, RejectedRequest> {
        proviso_decode::TextChecker::new(
            &proviso_decode::ConstraintSpec::Lark(lark.to_owned()),
            &proviso_decode::CompileOptions::default(),
        )
        .map(|checker| Self::Grammar(Box::new(checker)))
        .map_err(|e| rejected_request(param, e.to_string(), false))
    }

    /// Judges a complete output of the local model (its stop reason was a natural end).
    pub fn local(
        &self,
        text: &str,
        id: &mut dyn FnMut(usize) -> String,
    ) -> Result<Judged, Refusal> {
        match self {
            Self::Tools {
                gate,
                answer,
                choice,
                parallel,
                ..
            } => {
                let verdict = gate.check(text, Finish::Stop, &Usage::default());
                Self::verdict(&verdict, text, answer.as_deref(), id)
                    .and_then(|judged| Self::obeys_choice(judged, choice, *parallel))
            }
            _ => self.text(text),
        }
    }

    /// Judges an upstream's response envelope: the transport gate first, then the output.
    pub fn envelope(
        &self,
        envelope: &Value,
        id: &mut dyn FnMut(usize) -> String,
    ) -> Result<Ended, Refusal> {
        let payload = match proviso_contract::open_envelope(envelope) {
            Ok(payload) => payload,
            Err(r) if matches!(r.code(), Code::IncompleteResponse | Code::Repetition) => {
                let fragment = fragment(envelope);
                // The complete calls written before the cut or loop are judged as a step.
                if let Some(calls) = self.complete_calls(&fragment) {
                    if let Ok(judged @ Judged::Calls(_)) = self.local(&calls, id) {
                        return Ok(Ended::Complete(judged));
                    }
                }
                return Ok(if *r.code() == Code::Repetition {
                    Ended::Looped(fragment)
                } else {
                    Ended::Cut(fragment)
                });
            }
            Err(r) => return Err(Refusal::from(&r)),
        };
        if let Self::Tools {
            gate,
            native: true,
            answer,
            choice,
            parallel,
        } = self
        {
            let verdict = gate.check_envelope(envelope.to_string().as_bytes(), &Usage::default());
            let text = payload.text.unwrap_or_default();
            return Self::verdict(&verdict, &text, answer.as_deref(), id)
                .and_then(|judged| Self::obeys_choice(judged, choice, *parallel))
                .map(Ended::Complete);
        }
        if !payload.tool_calls.is_empty() {
            return Err(Refusal::new(
                Gate::Application,
                Code::UnexpectedToolCalls,
                "the upstream returned native tool calls where none were asked for",
            ));
        }
        let Some(text) = payload.text else {
            return Err(Refusal::new(
                Gate::Transport,
                Code::MissingContent,
                "the response has neither content nor tool calls",
            ));
        };
        self.local(&text, id).map(Ended::Complete)
    }

    /// Judges text under a judge without tools.
    fn text(&self, text: &str) -> Result<Judged, Refusal> {
        match self {
            Self::Text | Self::Tools { .. } => Ok(Judged::Answer(text.to_owned())),
            Self::Pattern(regex) if regex.is_match(text) => Ok(Judged::Answer(text.to_owned())),
            Self::Pattern(regex) => Err(Refusal::new(
                Gate::Schema,
                Code::PatternMismatch,
                format!(
                    "the output does not match the requested regular expression {}",
                    regex.as_str()
                ),
            )),
            Self::Grammar(checker) => match checker.check(text) {
                Ok(()) => Ok(Judged::Answer(text.to_owned())),
                Err(at) => Err(Refusal::new(
                    Gate::Schema,
                    Code::GrammarMismatch,
                    format!("the output leaves the requested grammar at byte {at}"),
                )),
            },
            Self::OneOf(choices) if choices.iter().any(|c| c == text) => {
                Ok(Judged::Answer(text.to_owned()))
            }
            Self::OneOf(choices) => Err(Refusal::new(
                Gate::Schema,
                Code::NotAChoice,
                format!(
                    "the output is not one of the {} requested choices",
                    choices.len()
                ),
            )),
            Self::JsonObject => {
                match proviso_json::parse_str(text, &proviso_json::ParseOptions::default()) {
                    Ok(Value::Object(_)) => Ok(Judged::Answer(text.to_owned())),
                    Ok(_) => Err(Refusal::new(
                        Gate::Schema,
                        Code::TypeMismatch,
                        "the output is not a JSON object",
                    )),
                    Err(e) => Err(Refusal::new(
                        Gate::Parse,
                        Code::from(e.kind()),
                        e.to_string(),
                    )),
                }
            }
            Self::Contract(contract) => match contract.check_text(text.as_bytes()).rejection() {
                None => Ok(Judged::Answer(text.to_owned())),
                Some(r) => Err(Refusal::from(r)),
            },
        }
    }

    /// Holds a judged output to the request's `tool_choice` and `parallel_tool_calls`.
    fn obeys_choice(
        judged: Judged,
        choice: &ToolChoice,
        parallel: bool,
    ) -> Result<Judged, Refusal> {
        match (&judged, choice) {
            (
                Judged::Answer(_) | Judged::Reply(..),
                ToolChoice::Required | ToolChoice::Named(_),
            ) => Err(Refusal::new(
                Gate::Application,
                Code::MissingToolCall,
                "tool_choice requires a tool call, and the output answered in text",
            )),
            (Judged::Calls(calls), ToolChoice::Named(name))
                if calls.iter().any(|c| &c.name != name) =>
            {
                Err(Refusal::new(
                    Gate::Application,
                    Code::ToolChoiceMismatch,
                    format!("tool_choice names `{name}`, and the output called another tool"),
                ))
            }
            (Judged::Calls(calls), _) if !parallel && calls.len() > 1 => Err(Refusal::new(
                Gate::Application,
                Code::TooManyCallsInStep,
                format!(
                    "parallel_tool_calls is false, and the output made {} calls",
                    calls.len()
                ),
            )),
            (Judged::Calls(_), ToolChoice::None) => Err(Refusal::new(
                Gate::Application,
                Code::UnexpectedToolCalls,
                "tool_choice is `none`, and the output made a call",
            )),
            _ => Ok(judged),
        }
    }

    /// Turns the tool gate's verdict into calls or a text answer (which passes `answer`).
    fn verdict(
        verdict: &proviso_contract::Verdict,
        text: &str,
        answer: Option<&Contract>,
        id: &mut dyn FnMut(usize) -> String,
    ) -> Result<Judged, Refusal> {
        match (verdict.intent(), verdict.rejection()) {
            // A call written twice in one step is one call: a small model repeats itself,
            // and a client would otherwise run the same call twice.
            (Some(Intent::ToolRequest { calls, .. }), _) => {
                let mut out: Vec<ToolCallOut> = Vec::with_capacity(calls.len());
                for (i, c) in calls.iter().enumerate() {
                    let arguments = Value::Object(c.arguments().clone()).to_string();
                    if out
                        .iter()
                        .any(|o| o.name == c.name() && o.arguments == arguments)
                    {
                        continue;
                    }
                    // The id is the server's, never the gate's positional `call_1` nor an
                    // upstream's: a client that drops items whose call id it has seen
                    // (openai-agents) needs ids unique across the conversation.
                    out.push(ToolCallOut {
                        id: id(i),
                        name: c.name().to_owned(),
                        arguments,
                    });
                }
                Ok(Judged::Calls(out))
            }
            (Some(Intent::FinalAnswer { .. }), _) => match answer {
                None => Ok(Judged::Answer(text.to_owned())),
                Some(contract) => match contract.check_text(text.trim().as_bytes()).rejection() {
                    None => Ok(Judged::Answer(text.to_owned())),
                    Some(r) => Err(Refusal::from(r)),
                },
            },
            (Some(Intent::Clarification { question, .. }), _) => {
                Ok(Judged::Reply(question.clone(), Reply::Clarification))
            }
            (Some(Intent::Abort { reason, .. }), _) => {
                Ok(Judged::Reply(reason.clone(), Reply::Abort))
            }
            (_, Some(r)) => Err(Refusal::from(r)),
            (Some(other), None) => Err(Refusal::new(
                Gate::Application,
                Code::UnsupportedIntent,
                format!("`{}` is not returned by the server", other.kind()),
            )),
            (None, None) => Err(Refusal::new(
                Gate::Application,
                Code::MissingIntent,
                "no intent",
            )),
        }
    }
}

/// The text of a cut or looping envelope, shown as a fragment.
fn fragment(envelope: &Value) -> String {
    envelope
        .pointer("/choices/0/message/content")
        .or_else(|| envelope.pointer("/choices/0/text"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Fills `base` with what was judged: the text, or the calls with `tool_calls` as the end.
pub fn choice(base: ChoiceResult, judged: Judged) -> ChoiceResult {
    match judged {
        Judged::Answer(text) => base.content(Some(text)),
        Judged::Reply(text, reply) => base.content(Some(text)).reply(reply),
        Judged::Calls(calls) => base
            .content(None)
            .tool_calls(calls)
            .finish_reason(FinishReason::ToolCalls),
    }
}

/// Sends an accepted choice's calls (and, when it was not streamed already, its text) to
/// the client. Calls are sent only now, whole, after every gate passed.
pub fn send(
    sink: &mut dyn Sink,
    index: u32,
    choice: &ChoiceResult,
    send_text: bool,
) -> Result<(), RunError> {
    if send_text {
        if let Some(text) = choice.content.as_ref().filter(|t| !t.is_empty()) {
            if !sink.send(index, Delta::Content(text.clone())) {
                return Err(RunError::Cancelled);
            }
        }
    }
    for (i, call) in choice.tool_calls.iter().enumerate() {
        let delta = Delta::ToolCall {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            call: call.clone(),
        };
        if !sink.send(index, delta) {
            return Err(RunError::Cancelled);
        }
    }
    Ok(())
}

/// The error that ends a request whose output every attempt's gates refused.
pub fn rejected(refusal: Refusal) -> RunError {
    RunError::OutputRejected {
        gate: refusal.gate,
        code: refusal.code,
        message: refusal.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proviso_contract::Message;
    use serde_json::json;

    fn json_mode(system: &str, user: &str) -> GenerationRequest {
        let mut request = proviso_backend::wire::chat_request(&json!({
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_object"}
        }))
        .unwrap();
        request.prompt = PromptInput::Chat(vec![
            Message::system(system),
            Message::new(proviso_contract::Role::User, user),
        ]);
        request
    }

    #[test]
    fn json_mode_reads_the_schema_the_instructions_state_and_only_there() {
        let schema = r#"{"type": "object", "properties": {"city": {"type": "string"}}}"#;
        let stated = stated_schema(&json_mode(
            &format!("Answer with JSON compatible with this schema:\n{schema}\nNo fences."),
            "Weather?",
        ));
        assert_eq!(stated, Some(serde_json::from_str(schema).unwrap()));
        // A user's text never becomes a grammar; an object that is not a schema is no schema.
        assert_eq!(stated_schema(&json_mode("Answer in JSON.", schema)), None);
        assert_eq!(
            stated_schema(&json_mode(r#"Like {"city": "Paris"}."#, "x")),
            None
        );
        let mut off = json_mode(schema, "x");
        off.steering = false;
        assert_eq!(stated_schema(&off), None);
    }

    #[test]
    fn a_call_written_twice_in_one_step_is_returned_once() {
        let registry = Registry::from_openai(&json!([{"type": "function", "function": {
            "name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
        .unwrap();
        let gate = ToolGate::new(
            std::sync::Arc::new(registry),
            proviso_tools::CallFormat::Hermes,
            proviso_tools::Policy::from_json(&json!({"role": "client",
                "roles": {"client": {"classes": ["read", "compute", "mutate", "submit"]}}}))
            .unwrap(),
        );
        let judge = Judge::Tools {
            gate: Box::new(gate),
            native: false,
            answer: None,
            choice: ToolChoice::Auto,
            parallel: true,
        };
        let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let mut n = 0;
        let judged = judge
            .local(&format!("{call}\n{call}"), &mut |_| {
                n += 1;
                format!("call_test{n}")
            })
            .unwrap();
        let Judged::Calls(calls) = judged else {
            panic!("expected calls, got {judged:?}")
        };
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "call_test1");
    }

    #[test]
    fn an_envelope_clarification_or_abort_is_a_typed_reply_never_a_call_or_an_answer() {
        let registry = Registry::from_openai(&json!([{"type": "function", "function": {
            "name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
        .unwrap();
        let judge = |choice: ToolChoice| Judge::Tools {
            gate: Box::new(ToolGate::new(
                std::sync::Arc::new(registry.clone()),
                proviso_tools::CallFormat::Envelope,
                proviso_tools::Policy::default(),
            )),
            native: false,
            answer: None,
            choice,
            parallel: true,
        };
        let ask =
            r#"{"reasoning": "no city", "intent": "clarification", "question": "Which city?"}"#;
        let judged = judge(ToolChoice::Auto).local(ask, &mut |_| String::new());
        assert_eq!(
            judged,
            Ok(Judged::Reply("Which city?".into(), Reply::Clarification))
        );
        let abort =
            r#"{"reasoning": "no tool", "intent": "abort", "reason": "No tool books flights."}"#;
        let judged = judge(ToolChoice::Auto).local(abort, &mut |_| String::new());
        assert_eq!(
            judged,
            Ok(Judged::Reply("No tool books flights.".into(), Reply::Abort))
        );
        // Under `required` a reply is not the call the client asked for.
        let refused = judge(ToolChoice::Required)
            .local(ask, &mut |_| String::new())
            .unwrap_err();
        assert_eq!(refused.code, Code::MissingToolCall);
        let choice = super::choice(
            ChoiceResult::new(0, 1, 1),
            Judged::Reply("Which city?".into(), Reply::Clarification),
        );
        assert_eq!(
            (choice.content.as_deref(), choice.reply),
            (Some("Which city?"), Reply::Clarification)
        );
    }
}
