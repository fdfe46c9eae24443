//! The local model behind proviso's OpenAI-compatible server: requests become grammars
//! (tools in a call format, response formats, guided constraints), every output passes the
//! gates, and only then is it returned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proviso_backend::{
    Backend, ChoiceResult, Delta, FinishReason, GenerationRequest, OutputConstraint, PromptInput,
    RejectedRequest, Reply, RunError, Sink, SteeringNote, Timings, TokenLogprobOut, ToolCallOut,
    Worker, WorkerError,
};
use proviso_decode::{
    CompileOptions, Compiled, ConstraintError, ConstraintSpec, Dry, Engine, EngineError,
    GenerateError, GenerateOptions, Generator, Message, Sampling, StopReason, TokenId,
};
use proviso_llama::{BatchOptions, Batcher, RunOptions};
use proviso_tools::steer::{self, Limits};
use proviso_tools::{
    instructions, write_call, CallFormat, Grammar, GrammarOptions, Grants, Policy, Registry,
    ToolChoice, ToolGate,
};
use serde_json::Value;

use crate::local::LocalModel;
use proviso_judge::{
    self as judge, call_arguments, contract, rejected_request as rejected, Judge, Judged,
};

/// How the local backend serves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalBackendConfig {
    /// The format the model writes tool calls in (hermes by default).
    pub call_format: CallFormat,
    /// Permissions and argument budgets applied to returned calls. The default permits every
    /// intent class: the client executes the calls and decides; argument policies declared in
    /// `x-proviso` still apply.
    pub policy: Policy,
    /// Each worker's context.
    pub run: RunOptions,
    /// Attempts per choice when a gate rejects the output (the grammar makes this rare).
    pub attempts: usize,
    /// Most calls in one response when `parallel_tool_calls` is true.
    pub max_parallel_calls: usize,
    /// Whether `tool_choice: auto` decides in two phases: the best call under the `required`
    /// grammar, judged against the conversation ([`proviso_tools::provenance::choose`]),
    /// then a text answer when the call is not supported by it. When false, the model
    /// chooses freely under one grammar, which a small model answers in text almost always.
    pub two_phase_auto: bool,
    /// When set, the workers are the slots of one batched context
    /// ([`proviso_llama::Batcher`]) and decode together, instead of each owning a context
    /// of `run.n_ctx` tokens. There should be as many slots as workers.
    pub batch: Option<BatchOptions>,
    /// Steering from the conversation ([`proviso_tools::steer::plan`]): each response's
    /// tool choice and grammar derived from the calls and results the request carries.
    /// `None` turns it off for every request; a request turns it off with `steering: false`.
    pub steering: Option<Limits>,
}

proviso_macros::setters!(LocalBackendConfig {
    steering: Option<Limits>,
    call_format: CallFormat,
    policy: Policy,
    run: RunOptions,
    attempts: usize,
    max_parallel_calls: usize,
    two_phase_auto: bool,
    batch: Option<BatchOptions>,
});

impl Default for LocalBackendConfig {
    fn default() -> Self {
        Self {
            call_format: CallFormat::Hermes,
            policy: Policy {
                role: "client".into(),
                roles: [(
                    "client".to_owned(),
                    Grants {
                        classes: vec![
                            proviso_contract::IntentClass::Read,
                            proviso_contract::IntentClass::Compute,
                            proviso_contract::IntentClass::Mutate,
                            proviso_contract::IntentClass::Submit,
                        ],
                        ..Grants::default()
                    },
                )]
                .into(),
                ..Policy::default()
            },
            run: RunOptions::default(),
            attempts: 2,
            max_parallel_calls: 4,
            two_phase_auto: true,
            batch: None,
            steering: Some(Limits::default()),
        }
    }
}

/// The local model as a server backend.
#[derive(Debug)]
pub struct LocalBackend {
    model: Arc<LocalModel>,
    id: String,
    config: LocalBackendConfig,
    /// The batched context, created with the first worker when `config.batch` is set.
    batcher: std::sync::OnceLock<Result<Batcher, String>>,
}

impl LocalBackend {
    /// A backend over `model`, reported on the wire as `id`.
    #[must_use]
    pub fn new(model: Arc<LocalModel>, id: impl Into<String>, config: LocalBackendConfig) -> Self {
        Self {
            model,
            id: id.into(),
            config,
            batcher: std::sync::OnceLock::new(),
        }
    }
}

/// A prepared request.
#[derive(Debug)]
pub struct LocalJob {
    prompt: Vec<TokenId>,
    compiled: Option<Compiled>,
    check: Judge,
    options: GenerateOptions,
    n: u32,
    /// For tool grammars: the byte that starts a call (output starting with it is buffered,
    /// anything else is streamed as content).
    call_start: Option<u8>,
    /// For tool grammars: how a step's calls are judged against the conversation.
    auto: Option<AutoPhase>,
    /// What steering from the conversation decided.
    steering: Option<SteeringNote>,
}

/// How a step's calls are judged against the conversation after generation: the second
/// half of a two-phase `auto` choice, and the fan-out of a step that leaves stated values
/// unused.
#[derive(Debug)]
struct AutoPhase {
    registry: Arc<Registry>,
    format: CallFormat,
    /// The conversation's user and tool turns, which the call's arguments must come from.
    conversation: String,
    /// Under a two-phase `auto`: the grammar of the text answer that replaces a call the
    /// conversation does not support.
    text_only: Option<Compiled>,
    /// Whether a step may hold several calls (and so may be fanned out).
    several_calls: bool,
    /// Under `required`, before any call of this turn: the grammar options a call is
    /// regenerated under, on the other tools, when the conversation cannot trace its
    /// arguments (an agent's output tool written before the lookup that would fill it).
    retarget: Option<GrammarOptions>,
}

fn constraint_error(param: &str, e: &ConstraintError) -> RejectedRequest {
    match e {
        ConstraintError::Unsupported { keywords } => rejected(
            param,
            format!(
                "the grammar cannot enforce schema keyword{} {}; proviso refuses rather than return output it did not enforce",
                if keywords.len() == 1 { "" } else { "s" },
                keywords.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ),
            true,
        ),
        other => rejected(param, other.to_string(), true),
    }
}

fn spec_of(grammar: &Grammar) -> ConstraintSpec {
    match grammar {
        Grammar::JsonSchema(schema) => ConstraintSpec::JsonSchema(schema.clone()),
        Grammar::Lark(lark) => ConstraintSpec::Lark(lark.clone()),
    }
}

impl LocalBackend {
    fn render(
        &self,
        request: &GenerationRequest,
        tool_text: Option<&str>,
    ) -> Result<Vec<TokenId>, RejectedRequest> {
        match &request.prompt {
            PromptInput::Text(text) => {
                let tokenizer = self.model.tokenizer();
                let mut tokens: Vec<TokenId> = tokenizer.bos().into_iter().collect();
                tokens.extend(tokenizer.tokenize(text.as_bytes(), false));
                Ok(tokens)
            }
            PromptInput::Chat(messages) => {
                let mut out = Vec::with_capacity(messages.len() + 1);
                for (i, m) in messages.iter().enumerate() {
                    let mut content = m.content.clone();
                    for call in &m.tool_calls {
                        let arguments = call_arguments(i, call)?;
                        if !content.is_empty() {
                            content.push('\n');
                        }
                        content.push_str(&write_call(
                            self.config.call_format,
                            &call.name,
                            &arguments,
                        ));
                    }
                    out.push(Message::new(m.role, content));
                }
                if let Some(text) = tool_text {
                    match out.first_mut() {
                        Some(first) if first.role == proviso_contract::Role::System => {
                            first.content = format!("{}\n\n{text}", first.content);
                        }
                        _ => out.insert(0, Message::system(text)),
                    }
                }
                self.model.prompt(&out).map_err(|e| {
                    rejected("messages", format!("the chat template failed: {e}"), false)
                })
            }
        }
    }

    fn options(
        &self,
        request: &GenerationRequest,
        prompt_len: usize,
    ) -> Result<GenerateOptions, RejectedRequest> {
        let capacity = self.config.run.n_ctx as usize;
        if prompt_len + 1 >= capacity {
            return Err(rejected(
                "messages",
                format!("the prompt has {prompt_len} tokens; the context holds {capacity}"),
                false,
            ));
        }
        let room = capacity - prompt_len - 1;
        let max_tokens = request.max_tokens.map_or(room, |m| (m as usize).min(room));
        let sampling = Sampling::greedy()
            .temperature(request.sampling.temperature)
            .top_p(request.sampling.top_p)
            .seed(request.sampling.seed.unwrap_or_else(|| {
                static NEXT: AtomicU64 = AtomicU64::new(0x5eed);
                NEXT.fetch_add(0x9e37_79b9, Ordering::Relaxed)
            }))
            .frequency_penalty(request.sampling.frequency_penalty)
            .presence_penalty(request.sampling.presence_penalty)
            .repetition_penalty(request.sampling.repetition_penalty)
            .dry(
                request
                    .sampling
                    .dry
                    .map(|(multiplier, base, allowed_length)| {
                        Dry::default()
                            .multiplier(multiplier)
                            .base(base)
                            .allowed_length(allowed_length as usize)
                    }),
            );
        Ok(GenerateOptions::default()
            .max_tokens(max_tokens)
            .sampling(sampling)
            .stop(request.stop.clone())
            .logprobs(request.logprobs.map(usize::from)))
    }
}

impl Backend for LocalBackend {
    type Job = LocalJob;
    type Worker = LocalWorker;

    fn model_id(&self) -> &str {
        &self.id
    }

    fn prepare(&self, request: &GenerationRequest) -> Result<LocalJob, RejectedRequest> {
        let compile = CompileOptions::default();
        // JSON mode with the answer's schema stated in the instructions: the schema is the
        // grammar, when it compiles (otherwise any object, as asked). Without tools, that
        // compiled schema is the request's grammar.
        let mut stated = judge::stated_schema(request).and_then(|schema| {
            let compiled = self
                .model
                .compile(&ConstraintSpec::JsonSchema(schema.clone()), &compile)
                .ok()?;
            Some((schema, compiled))
        });
        let answer_schema = match &stated {
            Some((schema, _)) => Some(schema.clone()),
            None => judge::answer_schema(request),
        };
        let schema_from_instructions = stated.is_some();
        let tools = judge::tools(request)?;
        let mut auto_text = None;
        let mut auto_registry = None;
        let mut steering = None;
        let mut avoid = Vec::new();
        let (spec, check, tool_text, call_start) = if let Some((registry, choice)) = tools {
            // The conversation is the run's state: calls already answered leave the grammar,
            // and a round of results is followed by an answer.
            let steered = judge::steered(
                request,
                self.config.steering.as_ref(),
                self.config.call_format,
                registry,
                choice,
                true,
            );
            let (registry, choice, retarget) = (steered.registry, steered.choice, steered.retarget);
            steering = steered.note;
            avoid = steered.avoid;
            if matches!(
                request.constraint,
                OutputConstraint::Regex(_)
                    | OutputConstraint::Choice(_)
                    | OutputConstraint::Lark(_)
            ) {
                return Err(rejected(
                    "tools",
                    "guided_* constraints cannot be combined with tools",
                    true,
                ));
            }
            let format = self.config.call_format;
            let requested_choice = choice.clone();
            let two_phase = self.config.two_phase_auto && choice == ToolChoice::Auto;
            let options = GrammarOptions::default()
                .choice(choice)
                .max_calls(if request.parallel_tool_calls {
                    self.config.max_parallel_calls
                } else {
                    1
                })
                .answer(answer_schema.clone());
            // The model reads the `auto` instructions either way; under two phases it first
            // writes under the `required` grammar.
            let text = instructions(&registry, format, &options);
            let first = options.clone().choice(if two_phase {
                ToolChoice::Required
            } else {
                options.choice.clone()
            });
            // Under two phases the call is written with numbers the conversation states
            // only: a call with any other number would be set aside as untraceable. The
            // gates check the declared schemas.
            let grounded = two_phase
                .then(|| {
                    proviso_tools::provenance::ground_numbers(
                        &registry,
                        &proviso_judge::conversation(request),
                    )
                })
                .flatten();
            let grammar = format
                .grammar(grounded.as_ref().unwrap_or(&registry), &first)
                .map_err(|e| rejected("tools", e.to_string(), true))?;
            if two_phase {
                let text_only = format
                    .grammar(&registry, &options.clone().choice(ToolChoice::None))
                    .map_err(|e| rejected("tools", e.to_string(), true))?;
                auto_text = Some(spec_of(&text_only.grammar));
            }
            let answer = match &answer_schema {
                Some(schema) => Some(Box::new(contract(schema, "response_format")?)),
                None => None,
            };
            let start = match format {
                CallFormat::Hermes => b'<',
                CallFormat::Llama3 | CallFormat::Envelope => b'{',
                CallFormat::Pythonic => b'[',
            };
            // When answers are JSON objects too, the first byte does not tell them apart.
            let call_start = (answer_schema.is_none() || start != b'{').then_some(start);
            let registry = Arc::new(registry);
            let several_calls = options.max_calls > 1 && format.call_separator().is_some();
            let retarget = retarget.then(|| first.clone());
            if two_phase || several_calls || retarget.is_some() {
                auto_registry = Some((Arc::clone(&registry), format, several_calls, retarget));
            }
            let gate = ToolGate::new(registry, format, self.config.policy.clone());
            (
                Some(spec_of(&grammar.grammar)),
                Judge::Tools {
                    gate: Box::new(gate),
                    native: false,
                    answer,
                    choice: requested_choice,
                    parallel: request.parallel_tool_calls,
                },
                Some(text),
                call_start,
            )
        } else {
            match &request.constraint {
                OutputConstraint::None => (None, Judge::Text, None, None),
                OutputConstraint::JsonObject => (
                    Some(ConstraintSpec::JsonSchema(
                        answer_schema
                            .clone()
                            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    )),
                    Judge::JsonObject,
                    None,
                    None,
                ),
                OutputConstraint::JsonSchema { schema, .. } => {
                    let contract = contract(schema, "response_format.json_schema.schema")?;
                    (
                        Some(ConstraintSpec::JsonSchema(schema.clone())),
                        Judge::Contract(Box::new(contract)),
                        None,
                        None,
                    )
                }
                OutputConstraint::Regex(r) => (
                    Some(ConstraintSpec::Regex(r.clone())),
                    Judge::pattern(r, "guided_regex")?,
                    None,
                    None,
                ),
                OutputConstraint::Choice(c) => (
                    Some(ConstraintSpec::Choice(c.clone())),
                    Judge::OneOf(c.clone()),
                    None,
                    None,
                ),
                OutputConstraint::Lark(l) => (
                    Some(ConstraintSpec::Lark(l.clone())),
                    Judge::Text,
                    None,
                    None,
                ),
            }
        };
        let param = match (&check, &request.constraint) {
            (Judge::Tools { .. }, _) => "tools",
            (_, OutputConstraint::JsonSchema { .. }) => "response_format.json_schema.schema",
            (_, OutputConstraint::Regex(_)) => "guided_regex",
            (_, OutputConstraint::Choice(_)) => "guided_choice",
            (_, OutputConstraint::Lark(_)) => "guided_grammar",
            _ => "response_format",
        };
        let json_mode = matches!(check, Judge::JsonObject);
        let compiled = match (&spec, stated.take()) {
            (Some(_), Some((_, compiled))) if json_mode => Some(compiled),
            (Some(spec), _) => Some(
                self.model
                    .compile(spec, &compile)
                    .map_err(|e| constraint_error(param, &e))?,
            ),
            (None, _) => None,
        };
        let auto = match auto_registry {
            Some((registry, format, several_calls, retarget)) => Some(AutoPhase {
                registry,
                format,
                several_calls,
                retarget,
                conversation: proviso_judge::conversation(request),
                text_only: match &auto_text {
                    Some(spec) => Some(
                        self.model
                            .compile(spec, &compile)
                            .map_err(|e| constraint_error(param, &e))?,
                    ),
                    None => None,
                },
            }),
            None => None,
        };
        if schema_from_instructions {
            let mut note = steering.unwrap_or_else(|| SteeringNote {
                summary: "answer".into(),
                detail: serde_json::json!({}),
            });
            note.summary.push_str("; json_schema=instructions");
            note.detail["json_schema"] = Value::from("instructions");
            steering = Some(note);
        }
        let prompt = self.render(request, tool_text.as_deref())?;
        let options = self.options(request, prompt.len())?.avoid(avoid);
        Ok(LocalJob {
            prompt,
            compiled,
            check,
            options,
            n: request.n,
            call_start,
            auto,
            steering,
        })
    }

    fn steering(&self, job: &LocalJob) -> Option<SteeringNote> {
        job.steering.clone()
    }

    fn worker(&self) -> Result<LocalWorker, WorkerError> {
        self.new_worker().map_err(WorkerError::new)
    }
}

impl LocalBackend {
    /// A worker on its own context, or on the next slot of the batched one.
    fn new_worker(&self) -> Result<LocalWorker, String> {
        let engine: Box<dyn Engine> = match self.config.batch {
            Some(options) => {
                let batcher = self
                    .batcher
                    .get_or_init(|| {
                        self.model
                            .model()
                            .batcher(options)
                            .map_err(|e| e.to_string())
                    })
                    .as_ref()
                    .map_err(Clone::clone)?;
                Box::new(batcher.slot().ok_or_else(|| {
                    format!(
                        "every one of the {} batch slots already has a worker",
                        options.slots
                    )
                })?)
            }
            None => Box::new(
                self.model
                    .engine(self.config.run)
                    .map_err(|e| e.to_string())?,
            ),
        };
        Ok(LocalWorker {
            model: Arc::clone(&self.model),
            generator: Generator::new(engine, self.model.tokenizer()),
            attempts: self.config.attempts.max(1),
        })
    }
}

/// One worker: its own llama.cpp context, or a slot of a batched one.
#[derive(Debug)]
pub struct LocalWorker {
    /// For grammars decided while generating (a call retargeted to the other tools).
    model: Arc<LocalModel>,
    generator: Generator<Box<dyn Engine>>,
    attempts: usize,
}

impl LocalWorker {
    /// A generation's token log-probabilities, with the tokens' text.
    fn logprobs(&self, generation: &proviso_decode::Generation) -> Vec<TokenLogprobOut> {
        let piece = |t: TokenId| self.generator.piece(t).to_vec();
        generation
            .logprobs
            .iter()
            .map(|t| {
                let bytes = piece(t.token);
                TokenLogprobOut {
                    token: String::from_utf8_lossy(&bytes).into_owned(),
                    bytes,
                    logprob: t.logprob,
                    top: t
                        .top
                        .iter()
                        .map(|&(token, logprob)| {
                            let bytes = piece(token);
                            (String::from_utf8_lossy(&bytes).into_owned(), bytes, logprob)
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// A step whose calls leave values the conversation states unused may be one call
    /// where the request asks for several: it is regenerated once with its own end, and any
    /// call written twice in a row, avoided; the longer step replaces it only when it passes
    /// the gates and fans the first calls out over those values
    /// ([`proviso_tools::provenance::fans_out`]). Returns the longer step's calls and the
    /// tokens spent.
    fn fan_out(
        &mut self,
        auto: &AutoPhase,
        job: &LocalJob,
        compiled: Option<&Compiled>,
        options: &GenerateOptions,
        text: &str,
        calls: &[(String, Value)],
    ) -> Option<(Vec<ToolCallOut>, u64)> {
        // Only a step that may hold several calls, judged by the tool gates, is fanned out.
        if !auto.several_calls || !matches!(job.check, Judge::Tools { .. }) {
            return None;
        }
        let avoid =
            proviso_tools::provenance::fan_out_avoid(auto.format, text, calls, &auto.conversation)?;
        let mut options = options.clone();
        options.avoid.extend(avoid);
        let (out, tokens) = self.calls_again(job, compiled, &options)?;
        proviso_tools::provenance::fans_out(
            &auto.registry,
            calls,
            &parsed(&out),
            &auto.conversation,
        )
        .then_some((out, tokens))
    }

    /// The same prompt generated again under `compiled`: the calls, when it ends naturally
    /// and its step passes the gates, and the tokens spent.
    fn calls_again(
        &mut self,
        job: &LocalJob,
        compiled: Option<&Compiled>,
        options: &GenerateOptions,
    ) -> Option<(Vec<ToolCallOut>, u64)> {
        let generation = self
            .generator
            .generate(&job.prompt, compiled, options)
            .ok()?;
        if !matches!(
            generation.stop_reason,
            StopReason::Stop | StopReason::GrammarComplete
        ) {
            return None;
        }
        match job
            .check
            .local(&generation.text(), &mut |_| proviso_backend::call_id())
        {
            Ok(Judged::Calls(out)) => Some((out, generation.tokens.len() as u64)),
            _ => None,
        }
    }

    /// A first call under `required` whose arguments the conversation cannot trace is
    /// written again on the tools it did not name; the new calls replace it only when they
    /// pass the gates and the conversation traces them. Returns them and the tokens spent.
    fn retarget(
        &mut self,
        auto: &AutoPhase,
        job: &LocalJob,
        options: &GenerateOptions,
        calls: &[(String, Value)],
    ) -> Option<(Vec<ToolCallOut>, u64)> {
        let grammar_options = auto.retarget.as_ref()?;
        if proviso_tools::provenance::choose(&auto.registry, calls, &auto.conversation)
            == proviso_tools::AutoChoice::Call
        {
            return None;
        }
        let others: Vec<proviso_tools::ToolSpec> = auto
            .registry
            .iter()
            .filter(|t| !calls.iter().any(|(name, _)| name == t.spec().name()))
            .map(|t| t.spec().clone())
            .collect();
        let others = Registry::new(others).ok().filter(|r| !r.is_empty())?;
        // The lookup's free-text values are held to the request's words (its numbers to
        // the numbers it states), as the call is then judged by them.
        let others = steer::ground_strings(&others, &auto.conversation, 4).unwrap_or(others);
        let others = proviso_tools::provenance::ground_numbers(&others, &auto.conversation)
            .unwrap_or(others);
        let grammar = auto.format.grammar(&others, grammar_options).ok()?;
        let compiled = self
            .model
            .compile(&spec_of(&grammar.grammar), &CompileOptions::default())
            .ok()?;
        let (out, tokens) = self.calls_again(job, Some(&compiled), options)?;
        (proviso_tools::provenance::choose(&auto.registry, &parsed(&out), &auto.conversation)
            == proviso_tools::AutoChoice::Call)
            .then_some((out, tokens))
    }
}

/// Accepted calls with their arguments read back (they were serialised from the gate's own
/// objects, so they always read).
fn parsed(calls: &[ToolCallOut]) -> Vec<(String, Value)> {
    calls
        .iter()
        .filter_map(|c| Some((c.name.clone(), serde_json::from_str(&c.arguments).ok()?)))
        .collect()
}

/// Streams text as it is generated, holding back what may start a call, and splitting only
/// at UTF-8 character boundaries.
struct Streamer<'a> {
    sink: &'a mut dyn Sink,
    choice: u32,
    call_start: Option<u8>,
    stream: bool,
    decided: Option<bool>,
    pending: Vec<u8>,
    sent_any: bool,
}

impl Streamer<'_> {
    fn push(&mut self, bytes: &[u8]) -> bool {
        if !self.sent_any && self.pending.is_empty() {
            self.sink.started();
        }
        if !self.stream {
            return !self.sink.cancelled();
        }
        self.pending.extend_from_slice(bytes);
        if self.decided.is_none() {
            match self.pending.iter().find(|b| !b.is_ascii_whitespace()) {
                // A call is sent only whole, after the gates: nothing of it streams.
                Some(&b) => self.decided = Some(self.call_start != Some(b)),
                None => return !self.sink.cancelled(),
            }
        }
        if self.decided != Some(true) {
            return !self.sink.cancelled();
        }
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid == 0 {
            return !self.sink.cancelled();
        }
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        self.sent_any = true;
        self.sink.send(self.choice, Delta::Content(text))
    }
}

impl Worker for LocalWorker {
    type Job = LocalJob;

    fn run(&mut self, job: LocalJob, sink: &mut dyn Sink) -> Result<Vec<ChoiceResult>, RunError> {
        let mut choices = Vec::with_capacity(job.n as usize);
        for index in 0..job.n {
            let mut rejections = Vec::new();
            let mut completion_tokens = 0;
            let mut attempt = 0;
            // The generation that stopped on repetition, whose retry runs against it.
            let mut looped: Option<usize> = None;
            // Under a two-phase `auto`, whether the first phase's call was set aside for a
            // text answer.
            let mut answering = false;
            loop {
                attempt += 1;
                let mut options = job.options.clone();
                if let Some(tokens) = looped {
                    options = options.against_repetition();
                    options.wrap_up = options.wrap_up.map(|w| w.after(tokens));
                }
                options.sampling.seed = options
                    .sampling
                    .seed
                    .wrapping_add(u64::from(index) * 7919 + attempt as u64);
                // Text streams only when nothing gates it after generation, or when the first
                // byte shows it is not a call; a JSON answer under a contract streams too,
                // because the grammar enforces the whole schema.
                // The first phase of a two-phase `auto` writes a call, which never streams; its
                // text answer streams as any other.
                let probing =
                    job.auto.as_ref().is_some_and(|a| a.text_only.is_some()) && !answering;
                let stream = !probing
                    && (!matches!(job.check, Judge::Tools { .. }) || job.call_start.is_some());
                let compiled = match &job.auto {
                    Some(auto) if answering => auto.text_only.as_ref(),
                    _ => job.compiled.as_ref(),
                };
                let mut streamer = Streamer {
                    sink,
                    choice: index,
                    call_start: job.call_start,
                    stream,
                    decided: None,
                    pending: Vec::new(),
                    sent_any: false,
                };
                let generation = self
                    .generator
                    .generate_streaming(&job.prompt, compiled, &options, &mut |b| streamer.push(b))
                    .map_err(|e| run_error(&e))?;
                let sent_any = streamer.sent_any;
                let generated = generation.tokens.len();
                completion_tokens += generated as u64;
                sink.generated(generated as u64);
                if generation.stop_reason == StopReason::Cancelled {
                    return Err(RunError::Cancelled);
                }
                let stats = &generation.stats;
                let timings = Timings {
                    time_to_first_token: stats
                        .forward_times
                        .first()
                        .map(|f| stats.prefill + *f)
                        .or(Some(stats.prefill)),
                    token_latencies: stats.forward_times.clone(),
                    mask_times: stats.mask_times.clone(),
                };
                let mut text = generation.text();
                let mut stop_reason = generation.stop_reason.clone();
                // A step cut or looping inside a later call keeps the complete calls written
                // before it (when nothing was streamed yet); the gates judge them as a step.
                if matches!(stop_reason, StopReason::Length | StopReason::Repetition) && !sent_any {
                    if let Some(calls) = job.check.complete_calls(&text) {
                        text = calls;
                        stop_reason = StopReason::GrammarComplete;
                    }
                }
                let base = ChoiceResult::new(index, job.prompt.len() as u64, completion_tokens)
                    .content(Some(text.clone()))
                    .timings(timings)
                    .rejections(rejections.clone())
                    .logprobs(options.logprobs.map(|_| self.logprobs(&generation)));
                // A first phase that could not finish a call (cut, or looping) does not decide
                // anything: the model answers in text instead.
                if probing && matches!(stop_reason, StopReason::Length | StopReason::Repetition) {
                    answering = true;
                    attempt = 0;
                    continue;
                }
                // A fragment cut by the token limit is returned as text, never as a call or
                // as a valid object.
                if stop_reason == StopReason::Length {
                    choices.push(base.finish_reason(FinishReason::Length));
                    break;
                }
                // A loop is retried with penalties against repetition while attempts remain
                // and nothing was streamed; otherwise the fragment is returned as text with
                // its own finish reason.
                if stop_reason == StopReason::Repetition {
                    if attempt < self.attempts && !sent_any {
                        rejections.push(proviso_contract::Gate::Transport);
                        looped = Some(generated);
                        continue;
                    }
                    choices.push(base.finish_reason(FinishReason::Repetition));
                    break;
                }
                let verdict = job
                    .check
                    .local(&text, &mut |_| proviso_backend::call_id())
                    .map(|judged| judge::choice(base, judged));
                let mut verdict = verdict;
                if let (Some(auto), Ok(choice)) = (&job.auto, &mut verdict) {
                    let calls = parsed(&choice.tool_calls);
                    if probing && !calls.is_empty() {
                        match proviso_tools::provenance::choose(
                            &auto.registry,
                            &calls,
                            &auto.conversation,
                        ) {
                            proviso_tools::AutoChoice::Call => {}
                            // The tool is the right one but the request does not give what
                            // it requires: ask for it, in words from the declarations,
                            // rather than call with invented values or answer without it.
                            proviso_tools::AutoChoice::AskFor { missing } => {
                                choice.tool_calls.clear();
                                choice.content = Some(proviso_tools::provenance::clarification(
                                    &auto.registry,
                                    &missing,
                                ));
                                choice.finish_reason = FinishReason::Stop;
                                choice.reply = Reply::Clarification;
                            }
                            _ => {
                                answering = true;
                                attempt = 0;
                                continue;
                            }
                        }
                    }
                    if choice.reply == Reply::Clarification {
                        // Asked: nothing to retarget or fan out.
                    } else if let Some((other, tokens)) =
                        self.retarget(auto, &job, &options, &calls)
                    {
                        completion_tokens += tokens;
                        sink.generated(tokens);
                        choice.tool_calls = other;
                        choice.completion_tokens = completion_tokens;
                    } else if let Some((longer, tokens)) =
                        self.fan_out(auto, &job, compiled, &options, &text, &calls)
                    {
                        completion_tokens += tokens;
                        sink.generated(tokens);
                        choice.tool_calls = longer;
                        choice.completion_tokens = completion_tokens;
                    }
                }
                match verdict {
                    Ok(choice) => {
                        judge::send(sink, index, &choice, false)?;
                        choices.push(choice);
                        break;
                    }
                    Err(refusal) => {
                        rejections.push(refusal.gate);
                        // Streamed text cannot be taken back: a rejection after streaming ends
                        // the request with an error rather than a second, different text.
                        if attempt >= self.attempts || sent_any {
                            return Err(judge::rejected(refusal));
                        }
                    }
                }
            }
        }
        Ok(choices)
    }
}

/// A generation failure as the server reports it: a batched context out of memory is
/// `Overloaded` (503, try again), anything else internal.
fn run_error(e: &GenerateError) -> RunError {
    match e {
        GenerateError::Engine(EngineError::Exhausted(message)) => {
            RunError::Overloaded(message.clone())
        }
        GenerateError::Constraint(message) => {
            RunError::ConstraintFailed(message.lines().next().unwrap_or(message).to_owned())
        }
        other => RunError::Internal(other.to_string()),
    }
}
