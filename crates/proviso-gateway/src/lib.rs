//! Gateway mode: generation is forwarded to an upstream OpenAI-compatible server, with the
//! constraint written in that upstream's dialect, and every response still goes through
//! proviso's gates before it is returned. The upstream is never trusted: a tool call it
//! returns is parsed strictly and checked against the declared schema and policies like any
//! model output, with bounded retries.
//!
//! The gateway builds without llama.cpp: a llama.cpp upstream's GBNF comes from the
//! [`GbnfConverter`] the caller injects (the `proviso` facade injects llama.cpp's own).

use std::sync::Arc;
use std::time::Duration;

use proviso_backend::{
    Backend, ChoiceResult, FinishReason, GenerationRequest, OutputConstraint, PromptInput,
    RejectedRequest, RunError, Sink, SteeringNote, Timings, UpstreamFault, Worker, WorkerError,
};
pub use proviso_tools::export::GbnfError;
use proviso_tools::export::{export_schema, export_tools, Dialect};
use proviso_tools::steer::Limits;
use proviso_tools::{
    instructions, write_call, CallFormat, GrammarOptions, Policy, ToolChoice, ToolGate,
};
use serde_json::{json, Map, Value};

use proviso_judge::{
    self as judge, call_arguments, contract, rejected_request as rejected, Ended, Judge,
};

/// Which dialect the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamKind {
    /// llama.cpp's server (or llama-cpp-python's): constraints as GBNF in `grammar`; tools
    /// rendered into the prompt as hermes calls and read back from the text.
    LlamaCpp,
    /// vLLM (0.12 on): native tools and `response_format`, plus `structured_outputs` for
    /// regular expressions, choices and grammars.
    Vllm,
    /// Any OpenAI-compatible server (proviso's own, OpenAI): native tools and
    /// `response_format` with `strict`.
    OpenAi,
}

impl UpstreamKind {
    /// The dialect with its article, for messages (`a llama.cpp`).
    fn article(self) -> &'static str {
        match self {
            Self::LlamaCpp => "a llama.cpp",
            Self::Vllm => "a vLLM",
            // Servers that take `structured_outputs` (vLLM, proviso's own) are reached with
            // the vllm dialect.
            Self::OpenAi => {
                "an OpenAI (use --upstream-kind vllm for a server that takes `structured_outputs`)"
            }
        }
    }
}

impl std::str::FromStr for UpstreamKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "llamacpp" => Ok(Self::LlamaCpp),
            "vllm" => Ok(Self::Vllm),
            "openai" => Ok(Self::OpenAi),
            other => Err(format!(
                "unknown upstream kind `{other}` (llamacpp, vllm, openai)"
            )),
        }
    }
}

/// How the gateway reaches its upstream.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// The upstream's base URL (`http://host:port`, with or without `/v1`).
    pub url: String,
    /// Its dialect.
    pub kind: UpstreamKind,
    /// The model name sent upstream (`None`: the upstream's first model).
    pub model: Option<String>,
    /// `Authorization: Bearer` token for the upstream, if it needs one.
    pub api_key: Option<String>,
    /// Permissions and policies applied to returned calls.
    pub policy: Policy,
    /// Attempts per choice when a gate rejects the upstream's output.
    pub attempts: usize,
    /// Timeout of one upstream call.
    pub timeout: Duration,
    /// JSON Schema to GBNF, for a llama.cpp upstream (`None`: constrained requests to a
    /// llama.cpp upstream are refused by name).
    pub gbnf: Option<GbnfConverter>,
    /// Largest upstream response body read; a longer one is a 502, read no further.
    pub max_body_bytes: usize,
    /// Steering from the conversation ([`proviso_tools::steer::plan`]), as the local
    /// backend applies it: an answer at the round limit (`tool_choice: none` to the
    /// upstream), tools that failed twice out of the choice. By default an upstream is not
    /// made to answer after one round of results ([`Limits::answer_after_results`] is off):
    /// a larger model may need a second lookup that the first one made possible. A repeated
    /// free-text call cannot be masked in an upstream. `None` turns steering off.
    pub steering: Option<Limits>,
}

impl GatewayConfig {
    /// A gateway to `url` in `kind`'s dialect: the upstream's first model, no key, the
    /// default policy, two attempts per choice, a 120-second timeout, no GBNF converter and
    /// a 16 MiB cap on upstream bodies.
    /// Set the public fields to change them.
    #[must_use]
    pub fn new(url: impl Into<String>, kind: UpstreamKind) -> Self {
        Self {
            url: url.into(),
            kind,
            model: None,
            api_key: None,
            policy: Policy::default(),
            attempts: 2,
            timeout: Duration::from_secs(120),
            gbnf: None,
            max_body_bytes: 16 * 1024 * 1024,
            steering: Some(Limits::default().answer_after_results(false)),
        }
    }
}

/// Why a gateway could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The upstream did not answer `GET /v1/models`.
    #[error("asking the upstream for its models: {message}")]
    Unreachable {
        /// The transport's message.
        message: String,
    },
    /// The upstream's model list is not JSON.
    #[error("the upstream's model list is not JSON: {message}")]
    ModelList {
        /// The parser's message.
        message: String,
    },
    /// The upstream's model list is empty.
    #[error("the upstream lists no model")]
    NoModel,
}

/// The gateway backend.
#[derive(Debug)]
pub struct GatewayBackend {
    config: GatewayConfig,
    base: String,
    id: String,
    agent: ureq::Agent,
}

impl GatewayBackend {
    /// A gateway to `config.url`. The model id is the configured one, or asked from the
    /// upstream's `/v1/models`.
    ///
    /// # Errors
    ///
    /// [`GatewayError`] when the upstream cannot be reached to learn its model.
    pub fn new(config: GatewayConfig) -> Result<Self, GatewayError> {
        let trimmed = config.url.trim_end_matches('/');
        let base = if trimmed.ends_with("/v1") {
            trimmed.to_owned()
        } else {
            format!("{trimmed}/v1")
        };
        let agent = ureq::AgentBuilder::new().timeout(config.timeout).build();
        let id = match &config.model {
            Some(m) => m.clone(),
            None => {
                let mut request = agent.get(&format!("{base}/models"));
                if let Some(key) = &config.api_key {
                    request = request.set("Authorization", &format!("Bearer {key}"));
                }
                let models: Value = request
                    .call()
                    .map_err(|e| GatewayError::Unreachable {
                        message: e.to_string(),
                    })?
                    .into_json()
                    .map_err(|e| GatewayError::ModelList {
                        message: e.to_string(),
                    })?;
                models
                    .pointer("/data/0/id")
                    .and_then(Value::as_str)
                    .ok_or(GatewayError::NoModel)?
                    .to_owned()
            }
        };
        Ok(Self {
            config,
            base,
            id,
            agent,
        })
    }
}

/// A prepared upstream request.
#[derive(Debug)]
pub struct GatewayJob {
    body: Value,
    judge: Judge,
    n: u32,
    /// `chat/completions`, or `completions` for a raw prompt.
    endpoint: &'static str,
    /// What steering from the conversation decided.
    steering: Option<SteeringNote>,
}

/// A converter from JSON Schema to GBNF, for a llama.cpp upstream. The gateway does not
/// convert schemas itself: the facade injects llama.cpp's own converter
/// (`json_schema_to_grammar`, the one llama.cpp's server applies to a `json_schema`), so
/// the gateway builds without llama.cpp and a llama.cpp upstream reads the grammar its own
/// code would have written.
#[derive(Clone)]
pub struct GbnfConverter(Arc<Convert>);

/// The conversion a [`GbnfConverter`] wraps.
type Convert = dyn Fn(&Value) -> Result<String, GbnfError> + Send + Sync;

impl GbnfConverter {
    /// Wraps a conversion function.
    pub fn new(
        convert: impl Fn(&Value) -> Result<String, GbnfError> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(convert))
    }

    /// Converts `schema`.
    ///
    /// # Errors
    ///
    /// [`GbnfError`] when the converter cannot convert the schema.
    pub fn convert(&self, schema: &Value) -> Result<String, GbnfError> {
        (self.0)(schema)
    }
}

impl std::fmt::Debug for GbnfConverter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GbnfConverter")
    }
}

fn wire_messages(
    request: &GenerationRequest,
    hermes_calls: bool,
    tool_text: Option<&str>,
) -> Result<Vec<Value>, RejectedRequest> {
    let PromptInput::Chat(messages) = &request.prompt else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(messages.len() + 1);
    for (i, m) in messages.iter().enumerate() {
        let mut message = json!({"role": m.role.as_str(), "content": m.content});
        // Arguments the client sends back are read as every backend reads them.
        let arguments: Vec<Map<String, Value>> = m
            .tool_calls
            .iter()
            .map(|call| call_arguments(i, call))
            .collect::<Result<_, _>>()?;
        if !m.tool_calls.is_empty() {
            if hermes_calls {
                // Tools are prompt text for this upstream: past calls are written as text too.
                let mut content = m.content.clone();
                for (call, args) in m.tool_calls.iter().zip(&arguments) {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&write_call(CallFormat::Hermes, &call.name, args));
                }
                message["content"] = json!(content);
            } else {
                message["tool_calls"] = Value::Array(
                    m.tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect(),
                );
            }
        }
        if let Some(id) = &m.tool_call_id {
            if hermes_calls {
                message["role"] = json!("user");
                message["content"] =
                    json!(format!("<tool_response>\n{}\n</tool_response>", m.content));
            } else {
                message["tool_call_id"] = json!(id);
            }
        }
        out.push(message);
    }
    if let Some(text) = tool_text {
        match out.first_mut() {
            Some(first) if first["role"] == "system" => {
                let content = format!(
                    "{}\n\n{text}",
                    first["content"].as_str().unwrap_or_default()
                );
                first["content"] = json!(content);
            }
            _ => out.insert(0, json!({"role": "system", "content": text})),
        }
    }
    Ok(out)
}

impl Backend for GatewayBackend {
    type Job = GatewayJob;
    type Worker = GatewayWorker;

    fn model_id(&self) -> &str {
        &self.id
    }

    fn prepare(&self, request: &GenerationRequest) -> Result<GatewayJob, RejectedRequest> {
        let to_gbnf = |schema: &Value| {
            match &self.config.gbnf {
            Some(converter) => converter.convert(schema),
            None => Err(GbnfError::new(
                "this gateway has no JSON Schema to GBNF converter, so it cannot constrain a llama.cpp upstream",
            )),
        }
        };
        if request.logprobs.is_some() {
            // The upstream's log-probabilities would describe its own (unchecked) sampling,
            // not the output the gates accepted; they are refused rather than passed on.
            return Err(rejected(
                "logprobs",
                "log-probabilities are served by the local model only, not through the gateway",
                true,
            ));
        }
        let kind = self.config.kind;
        let mut body = json!({"model": self.id, "stream": false});
        if let Some(m) = request.max_tokens {
            body["max_tokens"] = json!(m);
        }
        body["temperature"] = json!(request.sampling.temperature);
        body["top_p"] = json!(request.sampling.top_p);
        if let Some(seed) = request.sampling.seed {
            body["seed"] = json!(seed);
        }
        // Penalties travel in the upstream's own names; one it has no name for is refused,
        // never dropped.
        let sampling = &request.sampling;
        if sampling.frequency_penalty != 0.0 {
            body["frequency_penalty"] = json!(sampling.frequency_penalty);
        }
        if sampling.presence_penalty != 0.0 {
            body["presence_penalty"] = json!(sampling.presence_penalty);
        }
        let repetition = (sampling.repetition_penalty - 1.0).abs() > f32::EPSILON;
        if repetition || sampling.dry.is_some() {
            if kind == UpstreamKind::OpenAi {
                let param = if repetition {
                    "repetition_penalty"
                } else {
                    "dry_multiplier"
                };
                return Err(rejected(
                    param,
                    format!("`{param}` has no equivalent in the OpenAI API of the upstream"),
                    true,
                ));
            }
            if repetition {
                body["repetition_penalty"] = json!(sampling.repetition_penalty);
            }
            if let Some((multiplier, base, allowed_length)) = sampling.dry {
                if kind != UpstreamKind::LlamaCpp {
                    return Err(rejected(
                        "dry_multiplier",
                        "a DRY penalty is only forwarded to a llama.cpp upstream",
                        true,
                    ));
                }
                body["dry_multiplier"] = json!(multiplier);
                body["dry_base"] = json!(base);
                body["dry_allowed_length"] = json!(allowed_length);
            }
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        let answer_schema = judge::answer_schema(request);
        let tools = judge::tools(request)?;
        let mut steering = None;
        let judge = if let Some((registry, choice)) = tools {
            let steered = judge::steered(
                request,
                self.config.steering.as_ref(),
                CallFormat::Hermes,
                registry,
                choice,
                false,
            );
            let (registry, choice) = (steered.registry, steered.choice);
            steering = steered.note;
            // The declared tools the steered registry still holds (all of them, under an
            // answer: the upstream is then told `none`).
            let kept: Vec<&str> = registry.names();
            let mut tools = request.tools.clone().unwrap_or(Value::Null);
            if let Value::Array(items) = &mut tools {
                if choice != ToolChoice::None {
                    items.retain(|t| {
                        t.pointer("/function/name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| kept.contains(&n))
                    });
                }
            }
            let answer = match &answer_schema {
                Some(schema) => Some(Box::new(contract(schema, "response_format")?)),
                None => None,
            };
            let options = GrammarOptions::default()
                .choice(choice.clone())
                .max_calls(if request.parallel_tool_calls { 4 } else { 1 });
            let native = kind != UpstreamKind::LlamaCpp;
            if native {
                // The upstream enforces the tools natively (strict function schemas where the
                // dialect has them); proviso checks what comes back.
                let mut tools = tools.clone();
                if let Value::Array(items) = &mut tools {
                    for item in items.iter_mut() {
                        if let Some(f) = item.get_mut("function").and_then(Value::as_object_mut) {
                            f.remove("x-proviso");
                        }
                    }
                }
                body["tools"] = tools;
                body["parallel_tool_calls"] = json!(request.parallel_tool_calls);
                body["tool_choice"] = match &choice {
                    ToolChoice::Named(n) => {
                        json!({"type": "function", "function": {"name": n}})
                    }
                    ToolChoice::Required => json!("required"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Auto => json!("auto"),
                };
                body["messages"] = Value::Array(wire_messages(request, false, None)?);
            } else {
                if answer_schema.is_some() {
                    return Err(rejected("response_format", "a response schema next to tools cannot be sent to a llama.cpp upstream as one grammar", true));
                }
                let gbnf = export_tools(
                    &registry,
                    CallFormat::Hermes,
                    &options,
                    Dialect::Gbnf,
                    false,
                    &to_gbnf,
                )
                .map_err(|e| rejected("tools", e.to_string(), true))?;
                body["grammar"] = json!(gbnf);
                let text = instructions(&registry, CallFormat::Hermes, &options);
                body["messages"] = Value::Array(wire_messages(request, true, Some(&text))?);
            }
            // Text beside native calls, and every llama.cpp answer, is read as hermes.
            Judge::Tools {
                gate: Box::new(ToolGate::new(
                    Arc::new(registry),
                    CallFormat::Hermes,
                    self.config.policy.clone(),
                )),
                native,
                answer,
                choice,
                parallel: request.parallel_tool_calls,
            }
        } else {
            match &request.prompt {
                PromptInput::Chat(_) => {
                    body["messages"] = Value::Array(wire_messages(request, false, None)?)
                }
                PromptInput::Text(text) => body["prompt"] = json!(text),
            }
            match &request.constraint {
                OutputConstraint::None => Judge::Text,
                OutputConstraint::JsonObject => {
                    match kind {
                        UpstreamKind::LlamaCpp => {
                            body["grammar"] = json!(export_schema(
                                &json!({"type": "object"}),
                                Dialect::Gbnf,
                                false,
                                &to_gbnf
                            )
                            .map_err(|e| rejected("response_format", e.to_string(), true))?);
                        }
                        _ => body["response_format"] = json!({"type": "json_object"}),
                    }
                    Judge::JsonObject
                }
                OutputConstraint::JsonSchema { name, schema, .. } => {
                    let checked = contract(schema, "response_format.json_schema.schema")?;
                    match kind {
                        UpstreamKind::LlamaCpp => {
                            body["grammar"] =
                                json!(export_schema(schema, Dialect::Gbnf, false, &to_gbnf)
                                    .map_err(|e| rejected(
                                        "response_format.json_schema.schema",
                                        e.to_string(),
                                        true
                                    ))?);
                        }
                        // vLLM (0.12 on) reads a JSON schema from the OpenAI field; its own
                        // `structured_outputs` carries the other constraints.
                        UpstreamKind::Vllm | UpstreamKind::OpenAi => {
                            body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": name, "schema": proviso_tools::export::normalize(schema), "strict": true}});
                        }
                    }
                    Judge::Contract(Box::new(checked))
                }
                OutputConstraint::Regex(r) => {
                    match kind {
                        UpstreamKind::LlamaCpp | UpstreamKind::OpenAi => {
                            return Err(rejected(
                                "guided_regex",
                                format!(
                                    "{} upstream cannot enforce a regular expression",
                                    kind.article()
                                ),
                                true,
                            ))
                        }
                        UpstreamKind::Vllm => body["structured_outputs"] = json!({"regex": r}),
                    }
                    Judge::pattern(r, "guided_regex")?
                }
                OutputConstraint::Choice(c) => {
                    match kind {
                        UpstreamKind::LlamaCpp => {
                            let alternatives: Vec<String> = c
                                .iter()
                                .map(|s| serde_json::to_string(s).unwrap_or_default())
                                .collect();
                            body["grammar"] =
                                json!(format!("root ::= {}\n", alternatives.join(" | ")));
                        }
                        UpstreamKind::Vllm => body["structured_outputs"] = json!({"choice": c}),
                        UpstreamKind::OpenAi => {
                            return Err(rejected(
                                "guided_choice",
                                "an OpenAI upstream cannot enforce a choice of strings",
                                true,
                            ))
                        }
                    }
                    Judge::OneOf(c.clone())
                }
                OutputConstraint::Lark(l) => {
                    match kind {
                        UpstreamKind::LlamaCpp | UpstreamKind::OpenAi => {
                            return Err(rejected(
                                "guided_grammar",
                                format!(
                                    "{} upstream cannot enforce a Lark grammar",
                                    kind.article()
                                ),
                                true,
                            ))
                        }
                        UpstreamKind::Vllm => body["structured_outputs"] = json!({"grammar": l}),
                    }
                    Judge::grammar(l, "guided_grammar")?
                }
            }
        };
        let endpoint = match request.prompt {
            PromptInput::Chat(_) => "chat/completions",
            PromptInput::Text(_) => "completions",
        };
        Ok(GatewayJob {
            body,
            judge,
            n: request.n,
            endpoint,
            steering,
        })
    }

    fn steering(&self, job: &GatewayJob) -> Option<SteeringNote> {
        job.steering.clone()
    }

    fn worker(&self) -> Result<GatewayWorker, WorkerError> {
        Ok(GatewayWorker {
            agent: self.agent.clone(),
            base: self.base.clone(),
            api_key: self.config.api_key.clone(),
            attempts: self.config.attempts.max(1),
            max_body_bytes: self.config.max_body_bytes,
        })
    }
}

/// A gateway worker (one upstream request at a time).
#[derive(Debug)]
pub struct GatewayWorker {
    agent: ureq::Agent,
    base: String,
    api_key: Option<String>,
    attempts: usize,
    max_body_bytes: usize,
}

impl GatewayWorker {
    fn call(&self, endpoint: &str, body: &Value) -> Result<Value, RunError> {
        let mut request = self.agent.post(&format!("{}/{endpoint}", self.base));
        if let Some(key) = &self.api_key {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
        match request.send_json(body.clone()) {
            Ok(r) => {
                let text = read_capped(r, self.max_body_bytes)?;
                serde_json::from_str(&text).map_err(|e| {
                    upstream(
                        UpstreamFault::BadGateway,
                        None,
                        format!("the upstream's response is not JSON: {e}"),
                    )
                })
            }
            Err(ureq::Error::Status(code, r)) => {
                let retry_after = r
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let text = read_capped(r, self.max_body_bytes).unwrap_or_default();
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| {
                        v.pointer("/error/message")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| text.chars().take(300).collect());
                Err(status_error(code, retry_after, message))
            }
            Err(ureq::Error::Transport(t)) => {
                let timed_out = std::error::Error::source(&t)
                    .and_then(|e| e.downcast_ref::<std::io::Error>())
                    .is_some_and(|e| {
                        matches!(
                            e.kind(),
                            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                        )
                    })
                    || t.to_string().contains("timed out");
                let fault = if timed_out {
                    UpstreamFault::Timeout
                } else {
                    UpstreamFault::BadGateway
                };
                Err(upstream(
                    fault,
                    None,
                    format!("the upstream cannot be reached: {t}"),
                ))
            }
        }
    }
}

/// An upstream failure.
fn upstream(fault: UpstreamFault, retry_after: Option<u64>, message: String) -> RunError {
    RunError::Upstream {
        fault,
        retry_after,
        message,
    }
}

/// What an upstream's error status means for the client: its 4xx (but 429) is the request's
/// fault and is passed on as 400; 429 and 503 are overload (503, with its `Retry-After`);
/// 504 is a timeout; anything else is a bad gateway.
fn status_error(code: u16, retry_after: Option<u64>, message: String) -> RunError {
    match code {
        429 | 503 => upstream(
            UpstreamFault::Unavailable,
            retry_after,
            format!("the upstream answered {code}: {message}"),
        ),
        504 => upstream(
            UpstreamFault::Timeout,
            None,
            format!("the upstream answered {code}: {message}"),
        ),
        400..=499 => RunError::UpstreamRefused { message },
        _ => upstream(
            UpstreamFault::BadGateway,
            None,
            format!("the upstream answered {code}: {message}"),
        ),
    }
}

/// Reads a response body up to `limit` bytes; a longer one is a bad gateway, read no further.
fn read_capped(response: ureq::Response, limit: usize) -> Result<String, RunError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let limit_plus_one = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    response
        .into_reader()
        .take(limit_plus_one)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            let fault = if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) {
                UpstreamFault::Timeout
            } else {
                UpstreamFault::BadGateway
            };
            upstream(fault, None, format!("reading the upstream's response: {e}"))
        })?;
    if bytes.len() > limit {
        return Err(upstream(
            UpstreamFault::BadGateway,
            None,
            format!("the upstream's response is larger than {limit} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        upstream(
            UpstreamFault::BadGateway,
            None,
            "the upstream's response is not UTF-8".into(),
        )
    })
}

impl Worker for GatewayWorker {
    type Job = GatewayJob;

    fn run(&mut self, job: GatewayJob, sink: &mut dyn Sink) -> Result<Vec<ChoiceResult>, RunError> {
        let mut choices = Vec::new();
        for index in 0..job.n {
            let mut rejections = Vec::new();
            let mut completion_tokens = 0;
            let mut attempt = 0;
            loop {
                attempt += 1;
                if sink.cancelled() {
                    return Err(RunError::Cancelled);
                }
                let started = std::time::Instant::now();
                let response = self.call(job.endpoint, &job.body)?;
                let elapsed = started.elapsed();
                let generated = response
                    .pointer("/usage/completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                completion_tokens += generated;
                sink.generated(generated);
                let prompt_tokens = response
                    .pointer("/usage/prompt_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let base = ChoiceResult::new(index, prompt_tokens, completion_tokens)
                    .timings(Timings {
                        time_to_first_token: Some(elapsed),
                        ..Timings::default()
                    })
                    .rejections(rejections.clone());
                let ended = job
                    .judge
                    .envelope(&response, &mut |_| proviso_backend::call_id());
                let (fragment, finish_reason) = match ended {
                    Ok(Ended::Complete(judged)) => {
                        let choice = judge::choice(base, judged);
                        judge::send(sink, index, &choice, true)?;
                        choices.push(choice);
                        break;
                    }
                    // A fragment is returned as text and never judged as a call or an
                    // object; a loop is asked for again while attempts remain.
                    Ok(Ended::Cut(fragment)) => (fragment, FinishReason::Length),
                    Ok(Ended::Looped(_)) if attempt < self.attempts => {
                        rejections.push(proviso_contract::Gate::Transport);
                        continue;
                    }
                    Ok(Ended::Looped(fragment)) => (fragment, FinishReason::Repetition),
                    Err(refusal) => {
                        rejections.push(refusal.gate);
                        if attempt >= self.attempts {
                            return Err(judge::rejected(refusal));
                        }
                        continue;
                    }
                };
                let choice = base.content(Some(fragment)).finish_reason(finish_reason);
                judge::send(sink, index, &choice, true)?;
                choices.push(choice);
                break;
            }
        }
        Ok(choices)
    }
}
