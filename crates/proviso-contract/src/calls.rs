//! The schema gate of tool calls, and the only way to an accepted tool request.
//!
//! A [`Verdict`] whose intent is a tool request cannot be assembled by hand: it comes out of
//! [`Contract::check`](crate::Contract::check) or out of [`judge_calls`], which runs every
//! call through the declared tool's argument schema before any later gate (policy,
//! permission, budget) gets to see it. A pipeline that makes no call accepts its other
//! intent with [`Progress::without_calls`], which refuses a tool request.

use serde_json::{Map, Value};

use crate::code::Code;
use crate::intent::{Intent, IntentClass, ToolCall};
use crate::rejection::{Gate, Location, Rejection, Violation};
use crate::schema::CompiledSchema;
use crate::verdict::{Progress, Verdict};

/// One call as a call format read it, before any schema check.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedCall {
    /// The tool name as written.
    pub name: String,
    /// The arguments as written (checked against the tool's schema by the schema gate).
    pub arguments: Value,
    /// JSON pointer of the call in the proposal (`/calls/0`, or empty for a lone envelope
    /// call).
    pub pointer: String,
}

/// What the schema gate of tool calls needs to know of the declared tools.
pub trait ToolCatalog {
    /// The intent class and argument schema of the tool `name`, if it is declared.
    fn declared(&self, name: &str) -> Option<(IntentClass, &CompiledSchema)>;

    /// The declared names, for the message of an unknown tool.
    fn declared_names(&self) -> Vec<&str>;
}

/// How a call format spells a call's name and arguments, so that an instance path points
/// into what the model wrote (`/calls/0/arguments/trial_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallKeys {
    /// The key of the tool's name (`name`, or `tool` in the envelope format).
    pub name: &'static str,
    /// The key of the arguments (`arguments`, or `parameters` in Llama 3's format).
    pub arguments: &'static str,
}

/// Runs the schema gate over `calls` (each must name a declared tool, and its arguments must
/// be an object valid under that tool's schema; every violation of every call is reported),
/// then the later gates in `later`, and accepts a tool request only if both pass.
///
/// `progress` holds the gates already passed (transport, parse). `id` names the accepted
/// call at each index. `later` receives the calls that passed the schema gate, each with its
/// pointer, and records the gates it runs in `progress`.
///
/// An empty `calls` is rejected (`empty_call_list`): a step without calls is accepted with
/// [`Progress::without_calls`].
pub fn judge_calls(
    catalog: &dyn ToolCatalog,
    keys: CallKeys,
    calls: Vec<ProposedCall>,
    mut progress: Progress,
    id: &dyn Fn(usize) -> String,
    rationale: Option<String>,
    later: impl FnOnce(&[(ToolCall, String)], &mut Progress) -> Result<(), Rejection>,
) -> Verdict {
    if calls.is_empty() {
        return progress.reject(Rejection::new(
            Gate::Parse,
            Code::EmptyCallList,
            "a tool request holds no call",
            Location::default(),
        ));
    }
    let mut violations = Vec::new();
    let mut accepted = Vec::with_capacity(calls.len());
    for (i, call) in calls.into_iter().enumerate() {
        let Some((class, schema)) = catalog.declared(&call.name) else {
            violations.push(unknown_tool(
                &call.name,
                &catalog.declared_names(),
                Location::instance(format!("{}/{}", call.pointer, keys.name)),
            ));
            continue;
        };
        let at = format!("{}/{}", call.pointer, keys.arguments);
        match checked_arguments(&call.name, Some(schema), call.arguments, &at) {
            Ok(arguments) => accepted.push((
                ToolCall::new(Some(id(i)), call.name, arguments, class),
                call.pointer,
            )),
            Err(found) => violations.extend(found),
        }
    }
    if !violations.is_empty() {
        return progress.reject(Rejection::from_violations(Gate::Schema, violations));
    }
    progress.pass(Gate::Schema);
    if let Err(rejection) = later(&accepted, &mut progress) {
        return progress.reject(rejection);
    }
    let calls = accepted.into_iter().map(|(call, _)| call).collect();
    progress.accept(Intent::ToolRequest { calls, rationale })
}

/// The schema gate's finding for a call to a tool that is not declared.
pub(crate) fn unknown_tool(name: &str, declared: &[&str], location: Location) -> Violation {
    Violation {
        code: Code::UnknownTool,
        keyword: None,
        message: format!(
            "`{name}` is not a declared tool (declared: {})",
            if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            }
        ),
        location,
    }
}

/// The schema gate on one call's arguments: an object valid under `schema` (when the tool
/// declares one), or every violation, located under `at` (the arguments' pointer).
pub(crate) fn checked_arguments(
    name: &str,
    schema: Option<&CompiledSchema>,
    arguments: Value,
    at: &str,
) -> Result<Map<String, Value>, Vec<Violation>> {
    if let Some(schema) = schema {
        let violations = schema.violations(&arguments);
        if !violations.is_empty() {
            return Err(violations
                .into_iter()
                .map(|mut v| {
                    v.location.instance_path = Some(format!(
                        "{at}{}",
                        v.location.instance_path.unwrap_or_default()
                    ));
                    v
                })
                .collect());
        }
    }
    match arguments {
        Value::Object(arguments) => Ok(arguments),
        _ => Err(vec![Violation {
            code: Code::TypeMismatch,
            keyword: Some("type".into()),
            message: format!("the arguments of `{name}` are not an object"),
            location: Location::instance(at),
        }]),
    }
}
