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
    Contract, Gate, GateStatus, Intent, NextStep, Output, Rejection, ToolCall, Verdict,
};
use proviso_tools::{
    instructions, CallFormat, CallGrammar, Finish, GrammarOptions, Policy, ToolError, ToolGate,
    Usage,
};
use serde::Serialize;
use serde_json::{json, Value};
use tracing::field::Empty;

use crate::toolbox::{ToolOutcome, Toolbox};

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Turn {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Turn {
    /// A message.
    #[must_use]
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: content.into(),
        }
    }
}

/// What the loop asks of the model for one step.
#[derive(Debug)]
pub struct ProposeRequest<'a> {
    /// The conversation so far.
    pub messages: &'a [Turn],
    /// The grammar the step must be generated under.
    pub grammar: &'a CallGrammar,
    /// Token limit for the step.
    pub max_tokens: usize,
    /// How many steps in a row were rejected just before this one (0 for a fresh step). A
    /// greedy proposer should sample on a retry: the same prompt prefix would otherwise yield
    /// the same rejected step.
    pub retry: u32,
}

/// What the model wrote for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// The raw text.
    pub text: String,
    /// Why generation stopped, as an OpenAI `finish_reason` (`stop`, `length`, …).
    pub finish_reason: String,
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
}

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
        }
    }
}

/// One executed call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutedCall {
    /// The step it was proposed in.
    pub step: u64,
    /// The accepted call.
    pub call: ToolCall,
    /// What running it came to.
    pub outcome: ToolOutcome,
    /// How long it ran.
    pub duration_ms: u64,
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
    /// A budget ran out.
    BudgetExhausted {
        /// Which (`step_budget_exhausted`, …).
        code: String,
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
            Self::FinalAnswer { .. } | Self::Clarification { .. } | Self::Abort { .. }
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
    pub transcript: Vec<Turn>,
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
    /// A final answer was checked against the answer contract.
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
            let options = GrammarOptions {
                choice: proviso_tools::ToolChoice::Required,
                ..config.grammar.clone()
            };
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
        let mut messages = vec![
            Turn::new("system", &self.system),
            Turn::new("user", question),
        ];
        let mut usage = Usage::default();
        let mut executed = Vec::new();
        let mut rejections: BTreeMap<String, u64> = BTreeMap::new();
        let mut in_a_row = 0_u32;
        let end = loop {
            usage.wall_ms = millis(started.elapsed());
            if let Some(end) = self.before_step(&usage) {
                break end;
            }
            usage.steps += 1;
            let step = usage.steps;
            let grammar = match &self.first_grammar {
                Some(first) if executed.is_empty() => first,
                _ => &self.grammar,
            };
            let (proposed, duration) =
                match self.generate(proposer, &messages, grammar, step, in_a_row) {
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
            let finish = Finish::from_reason(&proposed.finish_reason).unwrap_or(Finish::Stop);
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
            messages.push(Turn::new("assistant", &proposed.text));
            let rejection = match verdict.into_result() {
                Err(rejection) => Some(rejection),
                Ok(Intent::ToolRequest { calls, .. }) => {
                    in_a_row = 0;
                    for call in calls {
                        let done = self.dispatch(step, call, &mut usage);
                        observer.event(&Event::ToolResult {
                            step,
                            executed: &done,
                        });
                        messages.push(Turn::new(
                            "tool",
                            json!({"call_id": done.call.id(), "tool": done.call.name(), "outcome": done.outcome})
                                .to_string(),
                        ));
                        executed.push(done);
                    }
                    None
                }
                Ok(Intent::FinalAnswer { answer, .. }) => match self.check_answer(&answer) {
                    None => {
                        break RunEnd::FinalAnswer {
                            answer: answer.as_ref().clone(),
                        }
                    }
                    Some(verdict) => {
                        observer.event(&Event::AnswerVerdict {
                            step,
                            verdict: &verdict,
                        });
                        verdict.into_result().err()
                    }
                },
                Ok(Intent::Clarification { question, .. }) => {
                    break RunEnd::Clarification { question }
                }
                Ok(Intent::Abort { reason, .. }) => break RunEnd::Abort { reason },
                Ok(Intent::PlanUpdate { plan, .. }) => {
                    in_a_row = 0;
                    messages.push(Turn::new(
                        "tool",
                        json!({"plan_recorded": plan.len()}).to_string(),
                    ));
                    None
                }
                // Intents added later are not executable by this loop: refuse, never guess.
                Ok(other) => Some(Rejection::new(
                    Gate::Application,
                    "unsupported_intent",
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
                        code: rejection.code().to_owned(),
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
            messages.push(Turn::new("tool", observation(&rejection)));
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
        let budget = &self.config.policy.budget;
        let exhausted = |code: &str, message: String| {
            Some(RunEnd::BudgetExhausted {
                code: code.to_owned(),
                message,
            })
        };
        if budget.max_steps.is_some_and(|max| usage.steps >= max) {
            return exhausted(
                "step_budget_exhausted",
                format!(
                    "{} steps taken; the budget is {}",
                    usage.steps,
                    budget.max_steps.unwrap_or(0)
                ),
            );
        }
        if budget.max_tokens.is_some_and(|max| usage.tokens >= max) {
            return exhausted(
                "token_budget_exhausted",
                format!(
                    "{} tokens generated; the budget is {}",
                    usage.tokens,
                    budget.max_tokens.unwrap_or(0)
                ),
            );
        }
        if budget.max_wall_ms.is_some_and(|max| usage.wall_ms >= max) {
            return exhausted(
                "time_budget_exhausted",
                format!(
                    "{} ms elapsed; the budget is {} ms",
                    usage.wall_ms,
                    budget.max_wall_ms.unwrap_or(0)
                ),
            );
        }
        None
    }

    fn generate(
        &self,
        proposer: &mut dyn Proposer,
        messages: &[Turn],
        grammar: &CallGrammar,
        step: u64,
        retry: u32,
    ) -> Result<(Proposed, Duration), ProposerError> {
        let span = tracing::info_span!(
            "chat",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = proposer.model_name(),
            proviso.step = step,
            proviso.retry_count = retry,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            error.type = Empty,
            duration_ms = Empty,
        );
        let _entered = span.enter();
        let started = Instant::now();
        let result = proposer.propose(&ProposeRequest {
            messages,
            grammar,
            max_tokens: self.config.max_tokens_per_step,
            retry,
        });
        let duration = started.elapsed();
        span.record("duration_ms", millis(duration));
        match &result {
            Ok(p) => {
                span.record("gen_ai.usage.input_tokens", p.input_tokens);
                span.record("gen_ai.usage.output_tokens", p.output_tokens);
                span.record(
                    "gen_ai.response.finish_reasons",
                    format!("[\"{}\"]", p.finish_reason).as_str(),
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
        let (outcome, duration) = self.toolbox.execute(&call);
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

    /// `None` when the answer passes the answer contract (or there is none).
    fn check_answer(&self, answer: &Value) -> Option<Verdict> {
        let contract = self.config.answer_contract.as_ref()?;
        let verdict = contract.check(Output::Text(answer.to_string().as_bytes()));
        (!verdict.accepted()).then_some(verdict)
    }
}

/// Turns an accepted tool request that repeats an executed call into an application-gate
/// rejection.
fn refuse_repeats(verdict: Verdict, executed: &[ExecutedCall]) -> Verdict {
    let Some(Intent::ToolRequest { calls, .. }) = verdict.intent() else {
        return verdict;
    };
    let repeated = calls.iter().enumerate().find_map(|(i, call)| {
        executed
            .iter()
            .find(|e| e.call.name() == call.name() && e.call.arguments() == call.arguments())
            .map(|e| (i, e))
    });
    let Some((index, earlier)) = repeated else {
        return verdict;
    };
    let mut gates: Vec<(Gate, GateStatus)> = verdict
        .gates()
        .iter()
        .take_while(|(g, _)| *g != Gate::Application)
        .copied()
        .collect();
    gates.push((Gate::Application, GateStatus::Failed));
    let rejection = Rejection::new(
        Gate::Application,
        "repeated_call",
        format!(
            "`{}` with these arguments already ran in step {} ({}); its result is above. Use it, call something else, or answer",
            earlier.call.name(),
            earlier.step,
            earlier.call.id().unwrap_or_default()
        ),
        proviso_contract::Location::instance(format!("/calls/{index}")),
    );
    Verdict::from_parts(gates, Err(rejection))
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
        RunEnd::BudgetExhausted { .. } => "budget_exhausted",
        RunEnd::Rejected { .. } => "rejected",
        RunEnd::Refused { .. } => "refused",
        RunEnd::ModelFailed { .. } => "model_failed",
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
