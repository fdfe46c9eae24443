//! The step loop.
//!
//! ```text
//! prompt → constrained generation → gates → dispatch → observation → …
//! ```
//!
//! until a final answer, a clarification, an abort, an exhausted budget, too many rejected
//! steps in a row, or a failed model call ends the run. Each step's calls pass every gate
//! before any of them runs. A rejected step is shown to the model as a tool-role observation
//! naming the gate, and the model writes the step again, a bounded number of times.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proviso_contract::{
    Code, Contract, Gate, Intent, NextStep, Output, Progress, Question, Rejection, SourceDocument,
    SourceStore, ToolCall, Verdict,
};
use proviso_tools::{
    instructions, CallFormat, CallGrammar, Finish, GrammarOptions, Policy, ToolChoice, ToolError,
    ToolGate, Usage,
};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tracing::field::Empty;

use crate::steer::{self, FinishCause, Steering, StepPlan};

/// Most lines of one result shown and cited (a result's later lines are cut with a note).
const CITED_LINES_PER_RESULT: usize = 120;

/// Makes a successful text result (a string, or an object's `text`) a source of the run:
/// `tool#n`, version `v1`, in force, one line per line of text. The result the model sees
/// becomes that source's numbered lines (with the result's other members kept), so the
/// lines it may cite are exactly the ones the evidence gate checks against. Returns whether
/// the store grew.
fn cite_result(done: &mut ExecutedCall, index: usize, store: &mut SourceStore) -> bool {
    let ToolOutcome::Ok { result } = &mut done.outcome else {
        return false;
    };
    let (text, rest) = match result {
        Value::String(text) => (text.clone(), Map::new()),
        Value::Object(map) => match map.get("text").and_then(Value::as_str) {
            Some(text) => {
                let mut rest = map.clone();
                rest.remove("text");
                (text.to_owned(), rest)
            }
            None => return false,
        },
        _ => return false,
    };
    if text.trim().is_empty() {
        return false;
    }
    let source_id = format!("{}#{index}", done.call.name());
    let document = SourceDocument::new(&source_id, "v1", true, &text);
    let total = document
        .lines()
        .iter()
        .filter(|l| !l.trim().is_empty())
        .count();
    let lines: Vec<Value> = document
        .lines()
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .take(CITED_LINES_PER_RESULT)
        .map(|(i, l)| json!({"line": i + 1, "text": l}))
        .collect();
    if store.insert(document).is_err() {
        return false;
    }
    let mut cited = Map::new();
    cited.insert("source_id".into(), Value::from(source_id));
    cited.insert("version".into(), Value::from("v1"));
    if total > lines.len() {
        cited.insert("lines_not_shown".into(), Value::from(total - lines.len()));
    }
    cited.insert("lines".into(), Value::Array(lines));
    cited.extend(rest);
    *result = Value::Object(cited);
    true
}

/// Most observed lines a grounded answer grammar offers, the most relevant to the question
/// first: a small model chooses better among a few.
const CITABLE_LINES: usize = 1;
use crate::toolbox::{ExecutedCall, ToolFailure, ToolOutcome, Toolbox};
pub use proviso_contract::Message;

/// What the loop asks of the model for one step.
#[derive(Debug)]
#[non_exhaustive]
pub struct ProposeRequest<'a> {
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The grammar the step must be generated under.
    pub grammar: &'a CallGrammar,
    /// Token limit for the step.
    pub max_tokens: usize,
    /// How many steps in a row were rejected just before this one (0 for a fresh step). A
    /// greedy proposer should sample on a retry: the same prompt prefix would otherwise yield
    /// the same rejected step.
    pub retry: u32,
    /// Texts the output should not contain: calls that already ran, written as the call
    /// format writes them, which the grammar itself could not exclude. A proposer that can
    /// mask tokens steers away from them; one that cannot may ignore them (the gates still
    /// refuse a repeated call).
    pub avoid: &'a [String],
    /// The step before stopped on degenerate repetition: the proposer should turn on its
    /// penalties against repetition for this step.
    pub against_repetition: bool,
}

impl<'a> ProposeRequest<'a> {
    /// A fresh step: no retry, nothing to avoid.
    #[must_use]
    pub fn new(messages: &'a [Message], grammar: &'a CallGrammar, max_tokens: usize) -> Self {
        Self {
            messages,
            grammar,
            max_tokens,
            retry: 0,
            avoid: &[],
            against_repetition: false,
        }
    }

    /// Sets [`ProposeRequest::against_repetition`].
    #[must_use]
    pub fn against_repetition(mut self, on: bool) -> Self {
        self.against_repetition = on;
        self
    }

    /// Sets [`ProposeRequest::retry`].
    #[must_use]
    pub fn retry(mut self, retry: u32) -> Self {
        self.retry = retry;
        self
    }

    /// Sets [`ProposeRequest::avoid`].
    #[must_use]
    pub fn avoid(mut self, avoid: &'a [String]) -> Self {
        self.avoid = avoid;
        self
    }
}

/// What the model wrote for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// The raw text.
    pub text: String,
    /// Why generation stopped. A proposer reads its provider's spelling with
    /// [`Finish::read`], so a missing or unknown reason is [`Finish::Unknown`], never a stop.
    pub finish: Finish,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// A model call that failed for a technical reason (not a bad output).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProposerError {
    /// A stable code for `error.type`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A model the loop can ask for steps.
pub trait Proposer {
    /// Generates one step under `request.grammar`.
    ///
    /// # Errors
    ///
    /// [`ProposerError`] for a technical failure.
    fn propose(&mut self, request: &ProposeRequest<'_>) -> Result<Proposed, ProposerError>;

    /// The model's name, for `gen_ai.request.model`.
    fn model_name(&self) -> &str {
        "model"
    }
}

/// How an agent runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentConfig {
    /// The call format.
    pub format: CallFormat,
    /// Permissions and budgets.
    pub policy: Policy,
    /// What a step's grammar allows.
    pub grammar: GrammarOptions,
    /// The agent's own instructions, written before the derived tool text.
    pub system: String,
    /// Token limit per step.
    pub max_tokens_per_step: usize,
    /// Rejected steps in a row before the run ends with an error.
    pub max_consecutive_rejections: u32,
    /// Require a tool call (as `tool_choice: required` does) until one has run, so the model
    /// looks something up before it may answer.
    pub call_before_answer: bool,
    /// Refuse a call identical (same tool, same arguments) to one that already ran in this
    /// run, at the application gate: its result is already in the conversation, and a small
    /// model otherwise loops on it until the step budget ends the run.
    pub refuse_repeated_calls: bool,
    /// A contract every final answer must also pass (for instance an evidence gate over
    /// citations); the answer value is checked as JSON text.
    pub answer_contract: Option<Arc<Contract>>,
    /// Whether the text results of the evidence tools ([`Steering::evidence_tools`]) become
    /// citable lines: each such result is a source of the run (`tool#n`, version `v1`, in
    /// force) added to the answer contract's store for this run, and the model is shown it
    /// as numbered lines. Tools whose results are not documents known in advance (an MCP
    /// server's) can then ground an answer the evidence gate checks.
    pub cite_results: bool,
    /// How each step's grammar is narrowed from the run's state.
    pub steering: Steering,
}

proviso_macros::setters!(AgentConfig {
    format: CallFormat,
    policy: Policy,
    grammar: GrammarOptions,
    system: String,
    max_tokens_per_step: usize,
    max_consecutive_rejections: u32,
    call_before_answer: bool,
    refuse_repeated_calls: bool,
    answer_contract: Option<Arc<Contract>>,
    cite_results: bool,
    steering: Steering,
});

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            format: CallFormat::Envelope,
            policy: Policy::default(),
            grammar: GrammarOptions::default(),
            system: String::new(),
            max_tokens_per_step: 256,
            max_consecutive_rejections: 2,
            refuse_repeated_calls: true,
            call_before_answer: false,
            answer_contract: None,
            cite_results: false,
            steering: Steering::default(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunEnd {
    /// An accepted final answer.
    FinalAnswer {
        /// The answer.
        answer: Value,
    },
    /// The model asked the user a question.
    Clarification {
        /// The question.
        question: String,
    },
    /// The model declined to continue.
    Abort {
        /// Why.
        reason: String,
    },
    /// No line the tools returned answers the question, and there is nothing left to look
    /// up: the run says so instead of answering with an unrelated line.
    Abstained {
        /// The lookups that ran, as `tool {arguments}`.
        searched: Vec<String>,
        /// Why nothing answered.
        message: String,
    },
    /// A budget ran out.
    BudgetExhausted {
        /// Which ([`Code::StepBudgetExhausted`], …).
        code: Code,
        /// Details.
        message: String,
    },
    /// Too many rejected steps in a row: the run ends with the last rejection.
    Rejected {
        /// The last rejection.
        rejection: Rejection,
        /// Steps rejected in a row.
        attempts: u32,
    },
    /// The provider refused or filtered the output: not retried.
    Refused {
        /// The rejection.
        rejection: Rejection,
    },
    /// The model call failed for a technical reason.
    ModelFailed {
        /// The error.
        code: String,
        /// Details.
        message: String,
    },
}

impl RunEnd {
    /// Whether the run ended with an accepted final answer, clarification or abort.
    #[must_use]
    pub fn is_success(&self) -> bool {
        matches!(
            self,
            Self::FinalAnswer { .. }
                | Self::Clarification { .. }
                | Self::Abort { .. }
                | Self::Abstained { .. }
        )
    }
}

/// Counters over every run of an agent.
#[derive(Debug, Default)]
pub struct Counters {
    inner: Mutex<CounterSnapshot>,
}

/// The counters' values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CounterSnapshot {
    /// Model steps generated.
    pub steps: u64,
    /// Steps rejected at the parse gate.
    pub parse_failures: u64,
    /// Rejections by gate name.
    pub rejections: BTreeMap<String, u64>,
    /// Tool calls executed.
    pub tool_calls: u64,
    /// Tool calls that failed.
    pub tool_failures: u64,
    /// Tool calls that timed out.
    pub tool_timeouts: u64,
}

impl Counters {
    fn update(&self, f: impl FnOnce(&mut CounterSnapshot)) {
        if let Ok(mut c) = self.inner.lock() {
            f(&mut c);
        }
    }

    fn rejection(&self, gate: Gate) {
        self.update(|c| {
            if gate == Gate::Parse {
                c.parse_failures += 1;
            }
            *c.rejections.entry(gate.as_str().to_owned()).or_default() += 1;
        });
    }

    /// The current values.
    #[must_use]
    pub fn snapshot(&self) -> CounterSnapshot {
        self.inner.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// The record of one run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RunReport {
    /// How it ended.
    #[serde(flatten)]
    pub end: RunEnd,
    /// What it used.
    pub usage: Usage,
    /// Calls that ran, in order.
    pub executed: Vec<ExecutedCall>,
    /// Rejected steps, by gate.
    pub rejections: BTreeMap<String, u64>,
    /// The whole conversation, as the model saw it.
    #[serde(skip)]
    pub transcript: Vec<Message>,
}

/// Something that happened during a run, for printing and tracing.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The run started.
    Started {
        /// The question.
        question: &'a str,
        /// The call format.
        format: CallFormat,
        /// The tools.
        tools: Vec<&'a str>,
    },
    /// The harness derived the step's grammar from the run's state.
    StepPlanned {
        /// Step number (1-based).
        step: u64,
        /// What was decided.
        plan: &'a StepPlan,
    },
    /// The model wrote a step (raw, before any gate).
    ModelOutput {
        /// Step number (1-based).
        step: u64,
        /// The output.
        proposed: &'a Proposed,
        /// Generation time.
        duration: Duration,
    },
    /// The gates judged the step.
    Verdict {
        /// Step number.
        step: u64,
        /// The verdict (the parsed intent when accepted).
        verdict: &'a Verdict,
    },
    /// A final answer was checked against the answer contract (accepted or not).
    AnswerVerdict {
        /// Step number.
        step: u64,
        /// The verdict.
        verdict: &'a Verdict,
    },
    /// A call ran.
    ToolResult {
        /// Step number.
        step: u64,
        /// The execution.
        executed: &'a ExecutedCall,
    },
    /// The run ended.
    Finished {
        /// The report.
        report: &'a RunReport,
    },
}

/// Receives a run's events.
pub trait Observer {
    /// Called for each event, in order.
    fn event(&mut self, event: &Event<'_>);
}

impl Observer for () {
    fn event(&mut self, _: &Event<'_>) {}
}

impl<A: Observer, B: Observer> Observer for (A, B) {
    fn event(&mut self, event: &Event<'_>) {
        self.0.event(event);
        self.1.event(event);
    }
}

impl<T: Observer + ?Sized> Observer for &mut T {
    fn event(&mut self, event: &Event<'_>) {
        (**self).event(event);
    }
}

/// An agent: a toolbox, a call format, a policy, and the grammar and text derived from them.
#[derive(Debug)]
pub struct Agent {
    toolbox: Toolbox,
    config: AgentConfig,
    gate: ToolGate,
    grammar: CallGrammar,
    first_grammar: Option<CallGrammar>,
    system: String,
    counters: Arc<Counters>,
}

impl Agent {
    /// An agent over `toolbox`.
    ///
    /// # Errors
    ///
    /// [`ToolError`] when the call format cannot express a tool's arguments.
    pub fn new(toolbox: Toolbox, config: AgentConfig) -> Result<Self, ToolError> {
        let registry = toolbox.registry().clone();
        let grammar = config.format.grammar(&registry, &config.grammar)?;
        let tool_text = instructions(&registry, config.format, &config.grammar);
        let system = if config.system.is_empty() {
            tool_text
        } else {
            format!("{}\n\n{tool_text}", config.system.trim_end())
        };
        let first_grammar = if config.call_before_answer && !registry.is_empty() {
            let options = config
                .grammar
                .clone()
                .choice(proviso_tools::ToolChoice::Required);
            Some(config.format.grammar(&registry, &options)?)
        } else {
            None
        };
        let gate = ToolGate::new(registry, config.format, config.policy.clone());
        Ok(Self {
            toolbox,
            config,
            gate,
            grammar,
            first_grammar,
            system,
            counters: Arc::new(Counters::default()),
        })
    }

    /// The grammar each step is generated under.
    #[must_use]
    pub fn grammar(&self) -> &CallGrammar {
        &self.grammar
    }

    /// The system message (agent instructions plus the derived tool text).
    #[must_use]
    pub fn system_message(&self) -> &str {
        &self.system
    }

    /// The toolbox.
    #[must_use]
    pub fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// The gate steps pass.
    #[must_use]
    pub fn gate(&self) -> &ToolGate {
        &self.gate
    }

    /// Counters over every run of this agent.
    #[must_use]
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Runs the loop on `question`.
    pub fn run(
        &self,
        proposer: &mut dyn Proposer,
        question: &str,
        observer: &mut dyn Observer,
    ) -> RunReport {
        let started = Instant::now();
        let run_span = tracing::info_span!(
            "invoke_agent",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.request.model = proposer.model_name(),
            proviso.call_format = self.config.format.as_str(),
            proviso.run.end = Empty,
            duration_ms = Empty,
        );
        let _entered = run_span.enter();
        observer.event(&Event::Started {
            question,
            format: self.config.format,
            tools: self.toolbox.registry().names(),
        });
        // The question, read once against the answer's sources: what steering offers and what
        // the answer-relevance rule checks.
        // The answer contract of this run: the configured one, its store grown by the cited
        // results of this run's calls when results are cited.
        let mut contract = self.config.answer_contract.clone();
        let mut run_store: Option<SourceStore> = None;
        let mut asked: Option<Question> = contract
            .as_ref()
            .and_then(|c| c.source_store())
            .map(|store| Question::new(question, store));
        let mut messages = vec![Message::system(&self.system), Message::user(question)];
        let mut usage = Usage::default();
        let mut executed = Vec::new();
        let mut rejections: BTreeMap<String, u64> = BTreeMap::new();
        let mut in_a_row = 0_u32;
        let mut last_looped = false;
        let end = loop {
            usage.wall_ms = millis(started.elapsed());
            if let Some(end) = self.before_step(&usage) {
                break end;
            }
            usage.steps += 1;
            let step = usage.steps;
            let (planned, avoid, plan) = self.plan_step(
                question,
                asked.as_ref(),
                contract.as_ref(),
                step,
                &executed,
                &usage,
                in_a_row,
            );
            observer.event(&Event::StepPlanned { step, plan: &plan });
            if let Some(message) = &plan.abstain {
                break RunEnd::Abstained {
                    searched: executed
                        .iter()
                        .map(|e| steer::describe(e.call.name(), e.call.arguments()))
                        .collect(),
                    message: message.clone(),
                };
            }
            let grammar = match &planned {
                Some(g) => g,
                None => match &self.first_grammar {
                    Some(first) if executed.is_empty() => first,
                    _ => &self.grammar,
                },
            };
            let (proposed, duration) = match self.generate(
                proposer,
                &ProposeRequest::new(&messages, grammar, self.config.max_tokens_per_step)
                    .retry(in_a_row)
                    .avoid(&avoid)
                    .against_repetition(last_looped),
                &plan,
                step,
            ) {
                Ok(p) => p,
                Err(e) => {
                    break RunEnd::ModelFailed {
                        code: e.code,
                        message: e.message,
                    }
                }
            };
            self.counters.update(|c| c.steps += 1);
            usage.tokens += proposed.output_tokens;
            usage.wall_ms = millis(started.elapsed());
            observer.event(&Event::ModelOutput {
                step,
                proposed: &proposed,
                duration,
            });
            // A missing or unknown stop reason (`cancelled` too) is judged by the transport
            // gate, never read as a normal stop.
            let finish = proposed.finish;
            let verdict = self.gate.check_step(&proposed.text, finish, &usage, step);
            let verdict = if self.config.refuse_repeated_calls {
                refuse_repeats(verdict, &executed)
            } else {
                verdict
            };
            observer.event(&Event::Verdict {
                step,
                verdict: &verdict,
            });
            // A degenerate loop is kept out of the conversation: shown to the model, it
            // would prime the same loop. The step is retried with penalties instead.
            let looped = proposed.finish == Finish::Repetition;
            if !looped {
                messages.push(Message::assistant(&proposed.text));
            }
            last_looped = looped;
            let rejection = match verdict.into_result() {
                Err(rejection) => Some(rejection),
                Ok(Intent::ToolRequest { calls, .. }) => {
                    in_a_row = 0;
                    let first_of_step = executed.len();
                    for call in calls {
                        // A call written twice in one step runs once: the second gets the
                        // first one's outcome, so nothing runs twice.
                        let earlier = executed[first_of_step..].iter().find(|e: &&ExecutedCall| {
                            e.call.name() == call.name() && e.call.arguments() == call.arguments()
                        });
                        // The first call's id, when this one repeats it.
                        let same_as = earlier.and_then(|e| e.call.id().map(str::to_owned));
                        let done = match earlier {
                            Some(e) => ExecutedCall {
                                step,
                                call,
                                outcome: e.outcome.clone(),
                                duration_ms: 0,
                            },
                            None => {
                                let mut done = self.dispatch(step, call, &mut usage);
                                if let Some(base) = self.cites(&done) {
                                    let store = run_store.get_or_insert_with(|| {
                                        base.source_store()
                                            .map(|s| s.as_ref().clone())
                                            .unwrap_or_default()
                                    });
                                    if cite_result(&mut done, executed.len() + 1, store) {
                                        let grown = Arc::new(store.clone());
                                        asked = Some(Question::new(question, &grown));
                                        contract = Some(Arc::new(base.with_sources(grown)));
                                    }
                                }
                                done
                            }
                        };
                        observer.event(&Event::ToolResult {
                            step,
                            executed: &done,
                        });
                        // A call repeated within the step points at the first one's result
                        // instead of copying it into the conversation again.
                        let content = match same_as {
                            Some(first) => {
                                json!({"call_id": done.call.id(), "tool": done.call.name(), "same_result_as": first})
                            }
                            None => {
                                let outcome = steer::shown_outcome(&done.outcome, asked.as_ref());
                                json!({"call_id": done.call.id(), "tool": done.call.name(), "outcome": outcome})
                            }
                        };
                        messages.push(Message::tool(content.to_string()));
                        executed.push(done);
                    }
                    None
                }
                Ok(Intent::FinalAnswer { answer, .. }) => {
                    let Some(contract) = contract.as_ref() else {
                        break RunEnd::FinalAnswer {
                            answer: answer.as_ref().clone(),
                        };
                    };
                    let text = self.answer_text(&answer);
                    let verdict = match &asked {
                        Some(q) => contract.check_answer(Output::Text(text.as_bytes()), q),
                        None => contract.check(Output::Text(text.as_bytes())),
                    };
                    // An accepted answer's verdict is reported too: it is where the evidence
                    // gate ran, so a reader sees that gate pass, not only fail.
                    observer.event(&Event::AnswerVerdict {
                        step,
                        verdict: &verdict,
                    });
                    match verdict.into_result() {
                        // The contract parsed the text strictly: its value is the answer.
                        Ok(Intent::FinalAnswer { answer, .. }) => {
                            break RunEnd::FinalAnswer {
                                answer: answer.as_ref().clone(),
                            }
                        }
                        Ok(_) => {
                            break RunEnd::FinalAnswer {
                                answer: answer.as_ref().clone(),
                            }
                        }
                        Err(rejection) => Some(rejection),
                    }
                }
                Ok(Intent::Clarification { question, .. }) => {
                    break RunEnd::Clarification { question }
                }
                Ok(Intent::Abort { reason, .. }) => break RunEnd::Abort { reason },
                Ok(Intent::PlanUpdate { plan, .. }) => {
                    in_a_row = 0;
                    messages.push(Message::tool(
                        json!({"plan_recorded": plan.len()}).to_string(),
                    ));
                    None
                }
                // Intents added later are not executable by this loop: refuse, never guess.
                Ok(other) => Some(Rejection::new(
                    Gate::Application,
                    Code::UnsupportedIntent,
                    format!("the harness does not handle `{}` intents", other.kind()),
                    proviso_contract::Location::default(),
                )),
            };
            let Some(rejection) = rejection else {
                continue;
            };
            self.counters.rejection(rejection.gate());
            *rejections
                .entry(rejection.gate().as_str().to_owned())
                .or_default() += 1;
            match (rejection.gate(), rejection.next_step()) {
                (Gate::Budget, NextStep::Stop) => {
                    break RunEnd::BudgetExhausted {
                        code: rejection.code().clone(),
                        message: rejection.message().to_owned(),
                    }
                }
                (Gate::Transport, NextStep::Stop) => break RunEnd::Refused { rejection },
                _ => {}
            }
            in_a_row += 1;
            if in_a_row > self.config.max_consecutive_rejections {
                break RunEnd::Rejected {
                    rejection,
                    attempts: in_a_row,
                };
            }
            if !looped {
                messages.push(Message::tool(observation(&rejection)));
            }
        };
        usage.wall_ms = millis(started.elapsed());
        run_span.record("proviso.run.end", end_name(&end));
        run_span.record("duration_ms", usage.wall_ms);
        let report = RunReport {
            end,
            usage,
            executed,
            rejections,
            transcript: messages,
        };
        observer.event(&Event::Finished { report: &report });
        report
    }

    /// Budgets that end the run before the model is called again.
    fn before_step(&self, usage: &Usage) -> Option<RunEnd> {
        self.config
            .policy
            .budget
            .exceeded(&usage.next_step())
            .map(|exceeded| RunEnd::BudgetExhausted {
                code: exceeded.code,
                message: exceeded.message,
            })
    }

    /// The step's grammar from the run's state: `None` when the base grammar applies
    /// unchanged, with the texts to avoid and what was decided.
    #[allow(clippy::too_many_arguments)]
    fn plan_step(
        &self,
        question: &str,
        asked: Option<&Question>,
        contract: Option<&Arc<Contract>>,
        step: u64,
        executed: &[ExecutedCall],
        usage: &Usage,
        in_a_row: u32,
    ) -> (Option<CallGrammar>, Vec<String>, StepPlan) {
        let steering = &self.config.steering;
        let registry = self.toolbox.registry();
        let must_call_first = self.first_grammar.is_some() && executed.is_empty();
        let mut choice = if must_call_first {
            ToolChoice::Required
        } else {
            self.config.grammar.choice.clone()
        };
        let base_choice = choice.clone();
        // A choice that requires a call (declared, or until the first lookup) is never
        // turned into a finish.
        let may_finish = matches!(choice, ToolChoice::Auto);
        // The lines an answer could cite, when answers are grounded: evidence counts as
        // gathered only once there is something to cite.
        let candidates: Option<Vec<steer::Citable>> = match (
            steering.ground_answers,
            contract,
            &self.config.grammar.answer,
            asked,
        ) {
            (true, Some(contract), Some(_), Some(asked))
                if contract.evidence_policy().is_some() =>
            {
                contract.source_store().map(|store| {
                    let observed =
                        steer::observed_citations(executed, store, asked.asks_earlier_version());
                    steer::rank_citations(&observed, asked, store, CITABLE_LINES)
                })
            }
            _ => None,
        };
        let citable = candidates.as_ref().is_none_or(|c| !c.is_empty());
        let mut finish = None;
        let evidence = executed.iter().any(|e| {
            matches!(e.outcome, ToolOutcome::Ok { .. })
                && steering.evidence_tools.iter().any(|t| t == e.call.name())
        });
        // No line seen answers the question (nothing looked up yet, a lookup that failed, or
        // lines that answer something else): look again, differently (a call is required, and
        // the calls that ran are out of the grammar), or, when nothing is left to look up,
        // abstain. A grounded answer with no line to cite would cite an invented source.
        let unanswered = may_finish && !citable;
        let calls_spent = self
            .config
            .policy
            .budget
            .max_tool_calls
            .is_some_and(|max| usage.tool_calls >= max);
        if may_finish {
            if steering.finish_after_rejection && in_a_row > 0 && citable {
                finish = Some(FinishCause::Rejected);
            } else if steering.finish_on_last_step
                && self.config.policy.budget.max_steps == Some(step)
            {
                finish = Some(FinishCause::LastStep);
            } else if evidence && citable {
                finish = Some(FinishCause::Evidence);
            }
        }
        let mut plan = StepPlan::default();
        let abstain = |plan: &mut StepPlan, why: &str| {
            plan.abstain = Some(format!(
                "no line the lookups returned answers the question ({why})"
            ));
        };
        if unanswered && (calls_spent || finish == Some(FinishCause::LastStep)) {
            abstain(&mut plan, "the budget allows no further lookup");
            return (None, Vec::new(), plan);
        }
        let mut narrowed_registry = None;
        let mut avoid = Vec::new();
        // Arguments are grounded first, so that a grounded argument space that is now
        // finite has the calls that already ran taken out of it.
        let grounded_registry = if steering.ground_arguments && finish.is_none() {
            steer::ground_arguments(registry, question, executed, &steering.read_tools)
        } else {
            None
        };
        plan.grounded_arguments = grounded_registry.is_some();
        let registry = grounded_registry.as_ref().unwrap_or(registry);
        if finish.is_none() && steering.exclude_repeated_calls && !executed.is_empty() {
            let narrowed = steer::narrow(
                registry,
                self.config.format,
                executed,
                contract.and_then(|c| c.source_store()).map(AsRef::as_ref),
                &steering.read_tools,
            );
            let named_gone = match &choice {
                ToolChoice::Named(name) => narrowed.registry.get(name).is_none(),
                _ => false,
            };
            if narrowed.registry.is_empty() || named_gone {
                if unanswered {
                    abstain(&mut plan, "every possible lookup already ran");
                    return (None, Vec::new(), plan);
                }
                if may_finish {
                    finish = Some(FinishCause::ToolsExhausted);
                }
            } else {
                plan.excluded = narrowed.excluded;
                plan.exhausted = narrowed.exhausted;
                plan.avoided = narrowed.avoided;
                avoid = narrowed.avoid;
                if !plan.excluded.is_empty() || !plan.exhausted.is_empty() {
                    narrowed_registry = Some(narrowed.registry);
                }
            }
        }
        if finish.is_some() {
            plan.grounded_arguments = false;
        } else if unanswered {
            choice = ToolChoice::Required;
            // Read the best source not read yet, rather than let a small model pick among
            // many lookups.
            let store = contract.and_then(|c| c.source_store());
            if let (Some(asked), Some(store)) = (asked, store) {
                // When the documents are all there is to cite (no tool's result becomes a
                // source) and none holds a line that answers, no lookup can find one: the
                // run abstains now rather than read them one by one.
                if !self.config.cite_results && !steer::store_answers(asked, store) {
                    abstain(&mut plan, "no document holds a line that answers it");
                    return (None, Vec::new(), plan);
                }
                let read = steer::next_read(
                    registry,
                    self.toolbox.registry(),
                    &steering.read_tools,
                    executed,
                    store,
                    |s| steer::read_rank(asked, s),
                    asked.asks_earlier_version(),
                );
                if let Some((name, arguments)) = read {
                    if let Some(tool) = registry.get(&name) {
                        let spec = tool.spec().clone().with_parameters(
                            json!({"type": "object", "const": Value::Object(arguments.clone())}),
                        );
                        if let Ok(only) = proviso_tools::Registry::new(vec![spec]) {
                            plan.read = Some(steer::describe(&name, &arguments));
                            narrowed_registry = Some(only);
                            choice = ToolChoice::Named(name);
                            avoid.clear();
                        }
                    }
                }
            }
        }
        let mut options = self.config.grammar.clone();
        if finish.is_some() {
            choice = ToolChoice::None;
            avoid.clear();
            plan.avoided.clear();
            // With lines to cite, a step steered to finish answers: a small model otherwise
            // takes the abort it is offered with a meaningless reason.
            if candidates.as_ref().is_some_and(|c| !c.is_empty()) {
                options.allow_clarification = false;
            }
        }
        plan.finish = finish;
        plan.choice = steer::choice_name(&choice);
        options.choice = choice.clone();
        if !matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) {
            if let (Some(contract), Some(answer), Some(candidates)) =
                (contract, &self.config.grammar.answer, &candidates)
            {
                if let Some(grounded) = steer::grounded_answer(answer, contract, candidates) {
                    plan.citable_lines = Some(candidates.len());
                    options.answer = Some(grounded);
                }
            }
        }
        if plan.is_base() && choice == base_choice {
            return (None, avoid, plan);
        }
        let registry = narrowed_registry.as_ref().unwrap_or(registry);
        match self.config.format.grammar(registry, &options) {
            Ok(grammar) => (Some(grammar), avoid, plan),
            Err(error) => {
                // The base grammar still holds every declared constraint; the gates judge.
                tracing::warn!(%error, "a steered grammar could not be built; using the base grammar");
                (
                    None,
                    avoid,
                    StepPlan {
                        choice: steer::choice_name(&base_choice),
                        ..StepPlan::default()
                    },
                )
            }
        }
    }

    fn generate(
        &self,
        proposer: &mut dyn Proposer,
        request: &ProposeRequest<'_>,
        plan: &StepPlan,
        step: u64,
    ) -> Result<(Proposed, Duration), ProposerError> {
        let retry = request.retry;
        let span = tracing::info_span!(
            "chat",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = proposer.model_name(),
            proviso.step = step,
            proviso.retry_count = retry,
            proviso.step.tool_choice = plan.choice.as_str(),
            proviso.step.finish = plan.finish.map_or("", FinishCause::as_str),
            proviso.step.excluded_calls = plan.excluded.len() + plan.exhausted.len(),
            proviso.step.avoided_calls = plan.avoided.len(),
            proviso.step.citable_lines = plan.citable_lines.unwrap_or(0),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            error.type = Empty,
            duration_ms = Empty,
        );
        let _entered = span.enter();
        let started = Instant::now();
        let result = proposer.propose(request);
        let duration = started.elapsed();
        span.record("duration_ms", millis(duration));
        match &result {
            Ok(p) => {
                span.record("gen_ai.usage.input_tokens", p.input_tokens);
                span.record("gen_ai.usage.output_tokens", p.output_tokens);
                span.record(
                    "gen_ai.response.finish_reasons",
                    format!("[\"{}\"]", p.finish.as_str()).as_str(),
                );
            }
            Err(e) => {
                span.record("error.type", e.code.as_str());
            }
        }
        result.map(|p| (p, duration))
    }

    fn dispatch(&self, step: u64, call: ToolCall, usage: &mut Usage) -> ExecutedCall {
        let id = call.id().unwrap_or_default().to_owned();
        let arguments = Value::Object(call.arguments().clone()).to_string();
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.name(),
            gen_ai.tool.call.id = id.as_str(),
            gen_ai.tool.call.arguments = arguments.as_str(),
            proviso.intent_class = call.intent_class().as_str(),
            error.type = Empty,
            duration_ms = Empty,
        );
        let _entered = span.enter();
        // The toolbox runs only a call the gate admits. Calls of an accepted step always
        // are; a call that is not never runs and is reported as such.
        let (outcome, duration) = match self.gate.admit(&call) {
            Ok(gated) => self.toolbox.execute(&gated),
            Err(rejection) => (
                ToolOutcome::Failed {
                    failure: ToolFailure::new("not_admitted", rejection.message()),
                },
                Duration::ZERO,
            ),
        };
        span.record("duration_ms", millis(duration));
        if let Some(error) = outcome.error_type() {
            span.record("error.type", error);
        }
        usage.tool_calls += 1;
        usage.cost += self
            .toolbox
            .registry()
            .get(call.name())
            .map_or(1, |t| u64::from(t.spec().call_cost()));
        self.counters.update(|c| {
            c.tool_calls += 1;
            match outcome {
                ToolOutcome::Ok { .. } => {}
                ToolOutcome::Failed { .. } => c.tool_failures += 1,
                ToolOutcome::TimedOut { .. } => c.tool_timeouts += 1,
            }
        });
        ExecutedCall {
            step,
            call,
            outcome,
            duration_ms: millis(duration),
        }
    }

    /// The configured answer contract, when `done`'s result is to become citable lines.
    fn cites(&self, done: &ExecutedCall) -> Option<&Arc<Contract>> {
        let evidence = self
            .config
            .steering
            .evidence_tools
            .iter()
            .any(|t| t == done.call.name());
        if !(self.config.cite_results && evidence) {
            return None;
        }
        self.config
            .answer_contract
            .as_ref()
            .filter(|c| c.evidence_policy().is_some())
    }

    /// The answer as the answer contract reads it: a native format's answer is the whole
    /// text, which under an answer schema is a JSON document; the envelope's is a JSON value.
    fn answer_text(&self, answer: &Value) -> String {
        match answer {
            Value::String(text)
                if self.config.format != CallFormat::Envelope
                    && self.config.grammar.answer.is_some() =>
            {
                text.clone()
            }
            other => other.to_string(),
        }
    }
}

/// Turns an accepted tool request that repeats an executed call into an application-gate
/// rejection, unless the call may be tried again ([`steer::may_retry`]: it timed out once).
fn refuse_repeats(verdict: Verdict, executed: &[ExecutedCall]) -> Verdict {
    let Some(Intent::ToolRequest { calls, .. }) = verdict.intent() else {
        return verdict;
    };
    let repeated = calls.iter().enumerate().find_map(|(i, call)| {
        executed
            .iter()
            .find(|e| {
                e.call.name() == call.name()
                    && e.call.arguments() == call.arguments()
                    && !steer::may_retry(e, executed)
            })
            .map(|e| (i, e))
    });
    let Some((index, earlier)) = repeated else {
        return verdict;
    };
    let progress = Progress::before(&verdict, Gate::Application);
    let rejection = Rejection::new(
        Gate::Application,
        Code::RepeatedCall,
        format!(
            "`{}` with these arguments already ran in step {} ({}); its result is above. Use it, call something else, or answer",
            earlier.call.name(),
            earlier.step,
            earlier.call.id().unwrap_or_default()
        ),
        proviso_contract::Location::instance(format!("/calls/{index}")),
    );
    progress.reject(rejection)
}

/// The observation a rejected step leaves for the model: the gate, the code and the message,
/// as JSON in a tool-role turn, so it can never be confused with user text.
fn observation(rejection: &Rejection) -> String {
    json!({"rejected": {"gate": rejection.gate(), "code": rejection.code(),
        "message": rejection.message(), "location": rejection.location()},
        "instruction": "That step was not executed. Write the step again."})
    .to_string()
}

fn end_name(end: &RunEnd) -> &'static str {
    match end {
        RunEnd::FinalAnswer { .. } => "final_answer",
        RunEnd::Clarification { .. } => "clarification",
        RunEnd::Abort { .. } => "abort",
        RunEnd::Abstained { .. } => "abstained",
        RunEnd::BudgetExhausted { .. } => "budget_exhausted",
        RunEnd::Rejected { .. } => "rejected",
        RunEnd::Refused { .. } => "refused",
        RunEnd::ModelFailed { .. } => "model_failed",
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
