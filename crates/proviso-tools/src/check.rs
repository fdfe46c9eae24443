//! The gates a proposed step passes before anything runs:
//!
//! ```text
//! transport/stop reason → parse (the call format) → schema (declared tool, arguments)
//!   → policy (argument policies) → permission (role) → budget
//! ```
//!
//! Every call of a step passes every gate before any call of the step may run, so a step
//! whose second call is refused runs nothing. The verdict has the same shape as a contract's.

use std::sync::Arc;

use proviso_contract::{
    judge_calls, CallKeys, Code, Gate, GateStatus, Intent, Location, NextStep, Progress, Rejection,
    ToolCall, Verdict, Violation,
};

use crate::format::{CallFormat, Proposal};
use crate::gated::GatedCall;
use crate::policy::{Policy, Usage};
use crate::registry::Registry;

/// Why an output ended: the contract crate's one reading of stop reasons.
pub use proviso_contract::Finish;

/// Checks proposed steps against one registry, call format and policy.
#[derive(Debug, Clone)]
pub struct ToolGate {
    registry: Arc<Registry>,
    format: CallFormat,
    policy: Policy,
}

impl ToolGate {
    /// A gate for `format` over `registry` under `policy`.
    #[must_use]
    pub fn new(registry: Arc<Registry>, format: CallFormat, policy: Policy) -> Self {
        Self {
            registry,
            format,
            policy,
        }
    }

    /// The registry.
    #[must_use]
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The call format.
    #[must_use]
    pub fn format(&self) -> CallFormat {
        self.format
    }

    /// The policy.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Checks one step the model wrote, given why it stopped and what the run has used so far
    /// (`usage.steps` counts this step). Accepted calls get ids `call_1`, `call_2`, … in
    /// written order; the harness may renumber them.
    #[must_use]
    pub fn check(&self, text: &str, finish: Finish, usage: &Usage) -> Verdict {
        self.check_step(text, finish, usage, 0)
    }

    /// As [`ToolGate::check`], numbering accepted calls `call_{step}_1`, `call_{step}_2`, …
    /// (or `call_1`, … for step 0), the ids the harness executes them under.
    #[must_use]
    pub fn check_step(&self, text: &str, finish: Finish, usage: &Usage, step: u64) -> Verdict {
        let mut progress = Progress::new();
        // Gate 1: transport. Only a natural end is parsed; every other end is a fragment.
        if let Some(rejection) = proviso_contract::transport_gate(finish, Some(finish.as_str()), "")
        {
            return progress.reject(rejection);
        }
        progress.pass(Gate::Transport);
        // Gate 2: parse, in the call format.
        let proposal = match self.format.parse(text, &self.registry) {
            Ok(p) => p,
            Err(rejection) => {
                if rejection.gate() != Gate::Parse {
                    progress.pass(Gate::Parse);
                }
                return progress.reject(rejection);
            }
        };
        progress.pass(Gate::Parse);
        self.numbered(proposal, usage, progress, step)
    }

    /// Checks a provider response envelope (an OpenAI chat completion or an Anthropic
    /// message): the transport gate judges its stop reason, then native tool calls are read
    /// from their channel (their argument text parsed strictly), or the message text is read
    /// in this gate's call format.
    #[must_use]
    pub fn check_envelope(&self, envelope: &[u8], usage: &Usage) -> Verdict {
        let mut progress = Progress::new();
        let value = match proviso_json::parse(envelope, &proviso_json::ParseOptions::default()) {
            Ok(v) => v,
            Err(e) => {
                return progress.reject(Rejection::new(
                    Gate::Transport,
                    Code::MalformedEnvelope,
                    format!("the envelope is not strict JSON: {e}"),
                    Location::at(e.position()),
                ))
            }
        };
        let payload = match proviso_contract::open_envelope(&value) {
            Ok(p) => p,
            Err(rejection) => return progress.reject(rejection.with_text_position(envelope)),
        };
        progress.pass(Gate::Transport);
        if payload.tool_calls.is_empty() {
            let text = payload.text.unwrap_or_default();
            let proposal = match self.format.parse(&text, &self.registry) {
                Ok(p) => p,
                Err(rejection) => {
                    if rejection.gate() != Gate::Parse {
                        progress.pass(Gate::Parse);
                    }
                    return progress.reject(rejection);
                }
            };
            progress.pass(Gate::Parse);
            return self.check_proposal(proposal, usage, progress);
        }
        let mut calls = Vec::with_capacity(payload.tool_calls.len());
        for call in payload.tool_calls {
            let arguments = match call.arguments {
                proviso_contract::TransportedArguments::Value(v) => v,
                proviso_contract::TransportedArguments::Text(text) => {
                    match proviso_json::parse(
                        text.as_bytes(),
                        &proviso_json::ParseOptions::default(),
                    ) {
                        Ok(v) => v,
                        Err(e) => {
                            return progress.reject(
                                Rejection::from_parse_error(&e).with_instance_path(&format!(
                                    "{}/function/arguments",
                                    call.pointer
                                )),
                            )
                        }
                    }
                }
            };
            calls.push(crate::format::ProposedCall {
                name: call.name,
                arguments,
                pointer: call.pointer,
            });
        }
        progress.pass(Gate::Parse);
        let rationale = payload.text.filter(|t| !t.trim().is_empty());
        self.check_proposal(
            Proposal {
                calls,
                other: None,
                rationale,
            },
            usage,
            progress,
        )
    }

    /// Runs the gates from schema on over a parsed proposal (the server uses this for calls
    /// that arrive already split out of a provider's response).
    #[must_use]
    pub fn check_proposal(&self, proposal: Proposal, usage: &Usage, progress: Progress) -> Verdict {
        self.numbered(proposal, usage, progress, 0)
    }

    fn numbered(
        &self,
        proposal: Proposal,
        usage: &Usage,
        mut progress: Progress,
        step: u64,
    ) -> Verdict {
        let Proposal {
            calls,
            other,
            rationale,
        } = proposal;
        if calls.is_empty() {
            for gate in [
                Gate::Schema,
                Gate::Application,
                Gate::Policy,
                Gate::Permission,
                Gate::Budget,
                Gate::Evidence,
            ] {
                progress.mark(
                    gate,
                    if gate == Gate::Schema {
                        GateStatus::Passed
                    } else {
                        GateStatus::NotApplicable
                    },
                );
            }
            let intent = other.unwrap_or_else(|| Intent::FinalAnswer {
                answer: Arc::new(serde_json::Value::String(String::new())),
                reasoning: rationale,
            });
            return progress.without_calls(intent);
        }
        // Gate 3, schema, runs in the contract crate: only it makes an accepted tool
        // request. The later gates run on the calls that passed it.
        let id = |i: usize| {
            if step == 0 {
                format!("call_{}", i + 1)
            } else {
                format!("call_{step}_{}", i + 1)
            }
        };
        let keys = CallKeys {
            name: self.name_key(),
            arguments: self.arguments_key(),
        };
        judge_calls(
            self.registry.as_ref(),
            keys,
            calls,
            progress,
            &id,
            rationale,
            |accepted, progress| self.later_gates(accepted, usage, progress),
        )
    }

    /// The gates after schema: argument policies, permission and budget, over calls that
    /// passed the schema gate (so each names a declared tool).
    fn later_gates(
        &self,
        accepted: &[(ToolCall, String)],
        usage: &Usage,
        progress: &mut Progress,
    ) -> Result<(), Rejection> {
        let accepted: Vec<(&crate::registry::Tool, &ToolCall, &str)> = accepted
            .iter()
            .filter_map(|(call, pointer)| {
                self.registry
                    .get(call.name())
                    .map(|tool| (tool, call, pointer.as_str()))
            })
            .collect();
        progress.mark(Gate::Application, GateStatus::NotApplicable);
        // Gate 4: argument policies.
        let mut violations = Vec::new();
        let mut any_policy = false;
        for (tool, call, pointer) in &accepted {
            for policy in tool.compiled_policies() {
                any_policy = true;
                policy.check(
                    call.arguments(),
                    &format!("{pointer}/{}", self.arguments_key()),
                    &mut violations,
                );
            }
        }
        if !violations.is_empty() {
            return Err(Rejection::from_violations(Gate::Policy, violations));
        }
        progress.mark(
            Gate::Policy,
            if any_policy {
                GateStatus::Passed
            } else {
                GateStatus::NotApplicable
            },
        );
        // Gate 5: permission.
        let role = self.policy.caller();
        let mut violations = Vec::new();
        for (tool, call, pointer) in &accepted {
            if !role.permits(call.name(), tool.spec().class()) {
                violations.push(Violation {
                    code: Code::PermissionDenied,
                    keyword: None,
                    message: format!(
                        "role `{}` may not call `{}` ({} class)",
                        self.policy.role,
                        call.name(),
                        tool.spec().class().as_str()
                    ),
                    location: Location::instance(format!("{pointer}/{}", self.name_key())),
                });
            }
        }
        if !violations.is_empty() {
            return Err(Rejection::from_violations(Gate::Permission, violations)
                .with_next_step(NextStep::Stop));
        }
        progress.pass(Gate::Permission);
        // Gate 6: budget.
        if let Some(rejection) = self.budget(&accepted, usage) {
            return Err(rejection);
        }
        progress.pass(Gate::Budget);
        progress.mark(Gate::Evidence, GateStatus::NotApplicable);
        Ok(())
    }

    /// Admits one call for execution: the per-call gates (declared tool of the declared
    /// class, schema, argument policies, permission) run again on it, and only a call that
    /// passes becomes a [`GatedCall`], the one kind a runner accepts. Calls from an accepted
    /// step always pass; a call assembled by hand passes only if it would have.
    ///
    /// # Errors
    ///
    /// The first gate the call fails, as a rejection naming it.
    pub fn admit(&self, call: &ToolCall) -> Result<GatedCall, Rejection> {
        let Some(tool) = self.registry.get(call.name()) else {
            return Err(Rejection::new(
                Gate::Schema,
                Code::UnknownTool,
                format!("`{}` is not a declared tool", call.name()),
                Location::instance("/name"),
            ));
        };
        if tool.spec().class() != call.intent_class() {
            return Err(Rejection::new(
                Gate::Schema,
                Code::IntentClassMismatch,
                format!(
                    "`{}` is declared {}, not {}",
                    call.name(),
                    tool.spec().class().as_str(),
                    call.intent_class().as_str()
                ),
                Location::instance("/name"),
            ));
        }
        let arguments = serde_json::Value::Object(call.arguments().clone());
        let violations = tool.schema().violations(&arguments);
        if !violations.is_empty() {
            return Err(Rejection::from_violations(Gate::Schema, violations));
        }
        let mut violations = Vec::new();
        for policy in tool.compiled_policies() {
            policy.check(call.arguments(), "", &mut violations);
        }
        if !violations.is_empty() {
            return Err(Rejection::from_violations(Gate::Policy, violations));
        }
        if !self
            .policy
            .caller()
            .permits(call.name(), tool.spec().class())
        {
            return Err(Rejection::new(
                Gate::Permission,
                Code::PermissionDenied,
                format!("role `{}` may not call `{}`", self.policy.role, call.name()),
                Location::instance("/name"),
            ));
        }
        Ok(GatedCall::new(call.clone()))
    }

    /// Where a call names its tool, in this format's instance paths.
    fn name_key(&self) -> &'static str {
        match self.format {
            CallFormat::Envelope => "tool",
            _ => "name",
        }
    }

    /// Where a call carries its arguments, in this format's instance paths.
    fn arguments_key(&self) -> &'static str {
        match self.format {
            CallFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }

    fn budget(
        &self,
        calls: &[(&crate::registry::Tool, &ToolCall, &str)],
        usage: &Usage,
    ) -> Option<Rejection> {
        let budget = &self.policy.budget;
        // A call written twice in one step runs once (the harness gives the copy the first
        // one's outcome), so it is counted and charged once: a model that repeats itself
        // within a step must not spend the run's budget on nothing.
        let mut distinct: Vec<&(&crate::registry::Tool, &ToolCall, &str)> = Vec::new();
        for call in calls {
            if !distinct
                .iter()
                .any(|d| d.1.name() == call.1.name() && d.1.arguments() == call.1.arguments())
            {
                distinct.push(call);
            }
        }
        let n = distinct.len() as u64;
        let cost: u64 = distinct
            .iter()
            .map(|(t, _, _)| u64::from(t.spec().call_cost()))
            .sum();
        let over = |code: Code, message: String| {
            Some(
                Rejection::new(Gate::Budget, code, message, Location::default())
                    .with_next_step(NextStep::Stop),
            )
        };
        if let Some(max) = budget.max_calls_per_step {
            if n > max {
                return Some(
                    Rejection::new(
                        Gate::Budget,
                        Code::TooManyCallsInStep,
                        format!("the step makes {n} calls; at most {max} are allowed in one step"),
                        Location::instance(
                            calls
                                .get(max as usize)
                                .map_or(String::new(), |c| c.2.to_owned()),
                        ),
                    )
                    .with_next_step(NextStep::Retry),
                );
            }
        }
        let after = Usage {
            tool_calls: usage.tool_calls + n,
            cost: usage.cost + cost,
            ..*usage
        };
        if let Some(exceeded) = budget.exceeded(&after) {
            return over(exceeded.code, exceeded.message);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proviso_contract::{Gate, IntentClass};
    use serde_json::json;

    use super::*;
    use crate::registry::ToolSpec;

    /// A registry of one read tool, `get_arm(id)`.
    fn get_arm() -> Registry {
        Registry::new(vec![ToolSpec::new(
            "get_arm",
            "Reads one arm.",
            IntentClass::Read,
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        )])
        .unwrap()
    }

    #[test]
    fn a_call_written_twice_in_one_step_is_counted_once() {
        let registry = get_arm();
        let mut policy = Policy::default();
        policy.budget.max_tool_calls = Some(3);
        policy.budget.max_calls_per_step = Some(1);
        let gate = ToolGate::new(Arc::new(registry), CallFormat::Pythonic, policy);
        let used = Usage {
            tool_calls: 2,
            ..Usage::default()
        };
        let twice = r#"[get_arm(id="A"), get_arm(id="A")]"#;
        let verdict = gate.check(twice, Finish::Stop, &used);
        assert!(
            verdict.accepted(),
            "{}",
            serde_json::to_string(&verdict).unwrap()
        );
        let two = r#"[get_arm(id="A"), get_arm(id="B")]"#;
        let verdict = gate.check(two, Finish::Stop, &used);
        assert_eq!(verdict.gate(), Some(Gate::Budget));
    }

    #[test]
    fn a_missing_or_unknown_stop_reason_is_never_a_normal_stop() {
        let registry = get_arm();
        let gate = ToolGate::new(Arc::new(registry), CallFormat::Pythonic, Policy::default());
        let call = r#"[get_arm(id="A")]"#;
        assert!(gate
            .check(call, Finish::read(Some("stop")), &Usage::default())
            .accepted());
        // One reading of stop reasons: a step the decoder ended and an envelope a provider
        // ended get the same code for the same reason.
        for (reason, code) in [
            (None, "missing_stop_reason"),
            (Some("eos_maybe"), "unknown_stop_reason"),
            (Some("cancelled"), "cancelled"),
            (Some("length"), "incomplete_response"),
            (Some("model_context_window_exceeded"), "incomplete_response"),
            (Some("pause_turn"), "incomplete_response"),
            (Some("repetition"), "repetition"),
            (Some("content_filter"), "content_filtered"),
        ] {
            let verdict = gate.check(call, Finish::read(reason), &Usage::default());
            let rejection = verdict.rejection().unwrap();
            assert_eq!(rejection.gate(), Gate::Transport, "{reason:?}");
            assert_eq!(rejection.code(), code, "{reason:?}");
            let envelope = serde_json::json!({"choices": [{"message": {"content": call},
                "finish_reason": reason}]});
            let verdict = gate.check_envelope(envelope.to_string().as_bytes(), &Usage::default());
            let rejection = verdict.rejection().unwrap();
            assert_eq!(rejection.gate(), Gate::Transport, "envelope {reason:?}");
            assert_eq!(rejection.code(), code, "envelope {reason:?}");
        }
    }
}
