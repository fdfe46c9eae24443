//! The seam between the HTTP server and whatever generates: [`wire`] reads OpenAI's request
//! bodies into [`GenerationRequest`]s, which the server hands to a [`Backend`]; the backend
//! (the local model in `proviso-local`, an upstream server in gateway mode) compiles
//! constraints, generates, runs the gates through `proviso-judge`, and reports
//! [`ChoiceResult`]s.
//!
//! This crate sits below both the server and the judge, so the judge fills these types
//! without depending on HTTP, and the server serves them without knowing grammars or gates.

use std::time::Duration;

use serde_json::Value;

pub mod wire;

/// The prompt: a chat, or raw text (legacy completions).
#[derive(Debug, Clone, PartialEq)]
pub enum PromptInput {
    /// Messages, rendered with the model's chat template.
    Chat(Vec<proviso_contract::Message>),
    /// Raw text, used as is.
    Text(String),
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoiceRequest {
    /// Text or a call.
    Auto,
    /// No call.
    None,
    /// At least one call.
    Required,
    /// A call to this function.
    Named(String),
}

impl ToolChoiceRequest {
    /// Whether the choice forces a call (`required`, or one tool by name).
    #[must_use]
    pub fn forces_call(&self) -> bool {
        matches!(self, Self::Required | Self::Named(_))
    }
}

/// What the output must be.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputConstraint {
    /// Free text.
    None,
    /// Any JSON object.
    JsonObject,
    /// JSON valid under a schema.
    JsonSchema {
        /// The schema's name.
        name: String,
        /// The schema.
        schema: Value,
        /// Whether the client asked for strict mode (proviso enforces the schema either way).
        strict: bool,
    },
    /// A regular expression the whole output matches.
    Regex(String),
    /// One of these strings.
    Choice(Vec<String>),
    /// A Lark grammar (llguidance dialect).
    Lark(String),
}

/// Sampling parameters, as the wire reader validated them (made only by
/// [`crate::wire`], so a new field never breaks a caller).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SamplingParams {
    /// 0 is greedy. OpenAI's default is 1.
    pub temperature: f32,
    /// Nucleus threshold.
    pub top_p: f32,
    /// Seed, for reproducible sampling.
    pub seed: Option<u64>,
    /// OpenAI's `frequency_penalty` (-2 to 2; 0 is off).
    pub frequency_penalty: f32,
    /// OpenAI's `presence_penalty` (-2 to 2; 0 is off).
    pub presence_penalty: f32,
    /// vLLM's and llama.cpp's `repetition_penalty` (1 is off).
    pub repetition_penalty: f32,
    /// A DRY penalty's multiplier (`dry_multiplier`, as llama.cpp names it; 0 is off), with
    /// its base and allowed length.
    pub dry: Option<(f32, f32, u32)>,
}

/// A validated request (made only by [`crate::wire`]'s readers; a backend reads it, and a
/// new field never breaks a caller).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GenerationRequest {
    /// The prompt.
    pub prompt: PromptInput,
    /// OpenAI `tools`, as sent (the backend reads them into its registry).
    pub tools: Option<Value>,
    /// `tool_choice`.
    pub tool_choice: ToolChoiceRequest,
    /// Whether one response may carry several calls: the request's `parallel_tool_calls`,
    /// which defaults to true, except under a named `tool_choice`, where only an explicit
    /// `true` allows more than the named call.
    pub parallel_tool_calls: bool,
    /// The output constraint.
    pub constraint: OutputConstraint,
    /// Sampling.
    pub sampling: SamplingParams,
    /// Token limit (`None`: up to the context).
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Choices to generate.
    pub n: u32,
    /// Whether to stream server-sent events.
    pub stream: bool,
    /// Whether a streamed response ends with a usage chunk.
    pub include_usage: bool,
    /// Token log-probabilities with this many alternatives each (`None`: not asked for).
    pub logprobs: Option<u8>,
    /// Tools declared as custom tools: `tools` holds them as functions of one string
    /// argument, `input`, and their calls are answered in the custom form.
    pub custom_tools: Vec<String>,
    /// A custom tool that `tool_choice` names and whose input is a Lark grammar: the whole
    /// output is generated under that grammar and answered as one call to this tool.
    pub custom_call: Option<String>,
    /// Whether the next response may be steered from the conversation's earlier calls and
    /// results (the request's `steering` extension, default on; a server can turn it off
    /// for every request).
    pub steering: bool,
}

impl GenerationRequest {
    /// Whether preparing it compiles a grammar: it declares tools (other than under
    /// `tool_choice: none`) or constrains the output. A request that does not never waits
    /// behind one that does.
    #[must_use]
    pub fn compiles_constraint(&self) -> bool {
        (self.tools.is_some() && self.tool_choice != ToolChoiceRequest::None)
            || self.constraint != OutputConstraint::None
            || self.custom_call.is_some()
    }
}

/// What steering decided for one request: a one-line summary (header and log) and the
/// detail (the response's `proviso.steering` field).
#[derive(Debug, Clone, PartialEq)]
pub struct SteeringNote {
    /// One line: `answer; cause=results; rounds=1; calls=1`.
    pub summary: String,
    /// The decision as JSON.
    pub detail: Value,
}

/// A worker that could not be created: its context or batch slot, with what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot create a worker: {message}")]
#[non_exhaustive]
pub struct WorkerError {
    /// What went wrong.
    pub message: String,
}

impl WorkerError {
    /// A worker error saying `message`.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// What a text choice is: an answer, or one of the typed intents that are not answers.
/// A client that reads only `content` sees the question or the reason as text; one that
/// reads `proviso.reply` on the choice knows which it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Reply {
    /// An answer (the default, and what every call-free output of a plain chat is).
    #[default]
    Answer,
    /// A question back to the user: information the request lacks.
    Clarification,
    /// A statement that the request cannot be done with the tools at hand.
    Abort,
}

impl Reply {
    /// The reply's name on the wire.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answer => "answer",
            Self::Clarification => "clarification",
            Self::Abort => "abort",
        }
    }
}

/// Why a choice ended, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end (end of sequence, a stop sequence, a complete grammar).
    Stop,
    /// The token limit: the output is a fragment and holds no valid object.
    Length,
    /// The output is one or more tool calls that passed the gates.
    ToolCalls,
    /// The decoder stopped a degenerate loop: the output is a fragment and holds no valid
    /// object (retries with penalties were used up, or text had already streamed).
    Repetition,
}

impl FinishReason {
    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::Repetition => "repetition",
        }
    }
}

/// A new tool-call id: `call_` and a suffix unique over the server's lifetime (a counter)
/// and across restarts (the clock), so that a client that keeps every call of a long
/// conversation (openai-agents drops input items whose `call_id` it has seen) never sees
/// one twice.
#[must_use]
pub fn call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "call_{:012x}{:06x}",
        nanos & 0xffff_ffff_ffff,
        NEXT.fetch_add(1, Ordering::Relaxed) & 0xff_ffff
    )
}

/// An accepted tool call, ready for the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallOut {
    /// Its id.
    pub id: String,
    /// The function.
    pub name: String,
    /// Validated arguments, as JSON text.
    pub arguments: String,
}

/// Timings of one choice, for the metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timings {
    /// From the start of work to the first generated token.
    pub time_to_first_token: Option<Duration>,
    /// Each generated token's latency (forward pass and sampling).
    pub token_latencies: Vec<Duration>,
    /// Each mask computation.
    pub mask_times: Vec<Duration>,
}

/// One finished choice: [`ChoiceResult::new`], then the setters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChoiceResult {
    /// Its index.
    pub index: u32,
    /// The text (`None` when the choice is tool calls).
    pub content: Option<String>,
    /// Accepted calls.
    pub tool_calls: Vec<ToolCallOut>,
    /// Why it ended.
    pub finish_reason: FinishReason,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens (over every attempt).
    pub completion_tokens: u64,
    /// Timings.
    pub timings: Timings,
    /// Attempts rejected by a gate before this one, by gate name (`parse`, `schema`, ...).
    pub rejections: Vec<proviso_contract::Gate>,
    /// The text's token log-probabilities, when the request asked for them.
    pub logprobs: Option<Vec<TokenLogprobOut>>,
    /// What the text is, when it is not an answer.
    pub reply: Reply,
}

impl ChoiceResult {
    /// Choice `index` with its token counts, before its output is known: no text, no
    /// calls, finish reason `stop`, no timings, rejections or log-probabilities.
    #[must_use]
    pub fn new(index: u32, prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            index,
            content: None,
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            prompt_tokens,
            completion_tokens,
            timings: Timings::default(),
            rejections: Vec::new(),
            logprobs: None,
            reply: Reply::Answer,
        }
    }
}

proviso_macros::setters!(ChoiceResult {
    content: Option<String>,
    tool_calls: Vec<ToolCallOut>,
    finish_reason: FinishReason,
    timings: Timings,
    rejections: Vec<proviso_contract::Gate>,
    logprobs: Option<Vec<TokenLogprobOut>>,
    reply: Reply,
});

/// One generated token's log-probability on the wire, with its most likely alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobOut {
    /// The token's text (its bytes, read as UTF-8 with replacement).
    pub token: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability.
    pub logprob: f32,
    /// Alternatives: (text, bytes, log-probability), most likely first.
    pub top: Vec<(String, Vec<u8>, f32)>,
}

/// A streamed piece of a choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// More text.
    Content(String),
    /// A complete, accepted call (sent only after every gate passed).
    ToolCall {
        /// Position among the choice's calls.
        index: u32,
        /// The call.
        call: ToolCallOut,
    },
}

/// Where a worker sends streamed pieces.
pub trait Sink {
    /// Sends a piece of choice `choice`. `false` means the client is gone (or the request
    /// timed out): the worker should stop generating.
    fn send(&mut self, choice: u32, delta: Delta) -> bool;
    /// Whether the worker should stop.
    fn cancelled(&self) -> bool;
    /// Reports `tokens` more generated tokens (every attempt, as it ends, including one cut
    /// by cancellation), so that requests that end without a result still count what they
    /// computed.
    fn generated(&mut self, tokens: u64) {
        let _ = tokens;
    }
    /// Reports that generation has begun: the model has room for the request and its
    /// first token is out. Until then, a failure (no memory for the request) can still be
    /// answered with an error status instead of a stream. Called once or more; the
    /// default does nothing.
    fn started(&mut self) {}
}

/// A request the backend cannot serve, known before any generation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RejectedRequest {
    /// The parameter at fault.
    pub param: Option<String>,
    /// What is wrong, naming the keyword or tool.
    pub message: String,
    /// Whether proviso cannot enforce what was asked (400) rather than the request being
    /// invalid (422).
    pub unsupported: bool,
}

/// A failure while running a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Every attempt was rejected by a gate: nothing unchecked is returned.
    #[error(
        "the model's output was rejected by the {gate} gate ({code}) on every attempt: {message}"
    )]
    OutputRejected {
        /// The gate.
        gate: proviso_contract::Gate,
        /// Its code.
        code: proviso_contract::Code,
        /// Its message.
        message: String,
    },
    /// The upstream (in gateway mode) refused the request as a client error; its message is
    /// passed on with status 400.
    #[error("the upstream refused the request: {message}")]
    UpstreamRefused {
        /// The upstream's error message.
        message: String,
    },
    /// The request's own constraint failed while generating (a grammar that hits one of
    /// llguidance's limits only after some tokens): the request's fault, 400.
    #[error("the request's constraint failed during generation: {0}")]
    ConstraintFailed(String),
    /// The upstream (in gateway mode) failed: 502 for an answer that is not one, 503 when it
    /// is overloaded (forwarding its `Retry-After`), 504 when it did not answer in time.
    #[error("the upstream failed: {message}")]
    Upstream {
        /// What kind of failure.
        fault: UpstreamFault,
        /// Seconds the upstream asked to wait before retrying, if it said.
        retry_after: Option<u64>,
        /// What happened, for the log.
        message: String,
    },
    /// The client went away or the deadline passed.
    #[error("cancelled")]
    Cancelled,
    /// The model's shared memory (a batched context's KV cache) has no room for this
    /// request now: 503 with Retry-After. The message is logged, not sent.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// Something failed inside; the message is logged, not sent.
    #[error("internal error: {0}")]
    Internal(String),
}

/// How an upstream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamFault {
    /// It answered with something that is not an answer (a 5xx, HTML, a closed connection,
    /// a body over the size limit): 502.
    BadGateway,
    /// It is overloaded (503, 429): 503.
    Unavailable,
    /// It did not answer in time: 504.
    Timeout,
}

/// Generates. One backend serves every request; each worker thread owns a
/// [`Backend::Worker`] (for the local model: its own llama.cpp context).
pub trait Backend: Send + Sync + 'static {
    /// A prepared request, ready for a worker.
    type Job: Send + 'static;
    /// A worker's state.
    type Worker: Worker<Job = Self::Job>;
    /// The model id reported on the wire.
    fn model_id(&self) -> &str;
    /// Checks and compiles a request (tools, constraints) before it is queued, so that what
    /// cannot be enforced is refused at once.
    ///
    /// # Errors
    ///
    /// [`RejectedRequest`] naming the keyword, tool or parameter.
    fn prepare(&self, request: &GenerationRequest) -> Result<Self::Job, RejectedRequest>;
    /// What steering decided for a prepared request, reported in the response (the
    /// `proviso.steering` field and the `x-proviso-steering` header) and logged. `None`:
    /// the request was generated as sent.
    fn steering(&self, job: &Self::Job) -> Option<SteeringNote> {
        let _ = job;
        None
    }
    /// A new worker.
    ///
    /// # Errors
    ///
    /// [`WorkerError`] when the worker's resources (a context, a batch slot) cannot be
    /// created.
    fn worker(&self) -> Result<Self::Worker, WorkerError>;
}

/// Runs jobs, one at a time.
pub trait Worker: Send + 'static {
    /// The job type.
    type Job: Send + 'static;
    /// Runs `job`, streaming pieces to `sink`, and returns every choice.
    ///
    /// # Errors
    ///
    /// [`RunError`].
    fn run(&mut self, job: Self::Job, sink: &mut dyn Sink) -> Result<Vec<ChoiceResult>, RunError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_never_repeat_within_a_server_or_across_threads() {
        let ids: std::collections::BTreeSet<String> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..5_000).map(|_| call_id()).collect::<Vec<_>>()))
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        });
        assert_eq!(ids.len(), 20_000);
        assert!(ids
            .iter()
            .all(|id| id.starts_with("call_") && id.len() == 23));
    }
}
