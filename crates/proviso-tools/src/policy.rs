//! What a schema cannot say about a call: argument policies (declared with the tool),
//! permissions (which role may use which tools and intent classes) and budgets.

use std::collections::BTreeMap;

use proviso_contract::{IntentClass, Location, Violation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ToolError;
use proviso_contract::Code;

/// A rule on one argument, checked at the policy gate after the schema passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ArgumentPolicy {
    /// A relative path that must stay under `root`: no absolute path, no `..` component, no
    /// backslash, no NUL, no `~`. The check is lexical (contracts do no I/O); the tool that
    /// opens the path must still refuse symbolic links that leave the root.
    ConfinedPath {
        /// The argument (a name, or a JSON pointer into the arguments).
        argument: String,
        /// The root the path is relative to.
        root: String,
    },
    /// An absolute path that must lie inside the directory `root` (or be `root`): no `..`
    /// component, no NUL, no backslash, and, once `.` components and repeated slashes are
    /// read away, `root` as its leading components (`/srv/out2` is not inside `/srv/out`).
    /// The check is lexical too: the tool that opens the path must still refuse symbolic
    /// links that leave the directory.
    PathWithin {
        /// The argument (a name, or a JSON pointer into the arguments).
        argument: String,
        /// The absolute directory the path must stay in.
        root: String,
    },
    /// A string argument that must match `pattern` in full.
    Pattern {
        /// The argument.
        argument: String,
        /// A regular expression, matched against the whole value.
        pattern: String,
    },
    /// A numeric argument within `[min, max]`. A string holding a number is out of bounds,
    /// never converted.
    Range {
        /// The argument.
        argument: String,
        /// Inclusive lower bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        /// Inclusive upper bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
}

/// A policy ready to check.
#[derive(Debug, Clone)]
pub(crate) struct CompiledPolicy {
    pointer: String,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Path { root: String },
    Within { root: Vec<String> },
    Pattern { regex: regex::Regex, source: String },
    Range { min: Option<f64>, max: Option<f64> },
}

impl ArgumentPolicy {
    pub(crate) fn compile(&self, tool: &str) -> Result<CompiledPolicy, ToolError> {
        let (argument, rule) = match self {
            Self::ConfinedPath { argument, root } => (
                argument,
                Rule::Path {
                    root: root.trim_end_matches('/').to_owned(),
                },
            ),
            Self::PathWithin { argument, root } => {
                if !root.starts_with('/') || path_escape(root.trim_start_matches('/')).is_some() {
                    return Err(ToolError::Policy {
                        message: format!(
                            "tool `{tool}`: path_within policy on `{argument}` needs an absolute root without `..`, got {root:?}"
                        ),
                    });
                }
                (
                    argument,
                    Rule::Within {
                        root: components(root),
                    },
                )
            }
            Self::Pattern { argument, pattern } => {
                let regex = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    ToolError::Policy {
                        message: format!("tool `{tool}`: pattern policy on `{argument}`: {e}"),
                    }
                })?;
                (
                    argument,
                    Rule::Pattern {
                        regex,
                        source: pattern.clone(),
                    },
                )
            }
            Self::Range { argument, min, max } => {
                if let (Some(lo), Some(hi)) = (min, max) {
                    if lo > hi {
                        return Err(ToolError::Policy {
                            message: format!(
                                "tool `{tool}`: range policy on `{argument}` has min {lo} above max {hi}"
                            ),
                        });
                    }
                }
                (
                    argument,
                    Rule::Range {
                        min: *min,
                        max: *max,
                    },
                )
            }
        };
        let pointer = if argument.starts_with('/') {
            argument.clone()
        } else {
            format!("/{argument}")
        };
        Ok(CompiledPolicy { pointer, rule })
    }
}

impl CompiledPolicy {
    /// Checks the arguments; an absent optional argument passes.
    pub(crate) fn check(
        &self,
        arguments: &Map<String, Value>,
        base: &str,
        out: &mut Vec<Violation>,
    ) {
        let root = Value::Object(arguments.clone());
        let Some(value) = root.pointer(&self.pointer) else {
            return;
        };
        let at = format!("{base}{}", self.pointer);
        let mut fail = |code: Code, message: String| {
            out.push(Violation {
                code,
                keyword: None,
                message,
                location: Location::instance(at.clone()),
            });
        };
        match &self.rule {
            Rule::Path { root } => match value.as_str() {
                None => fail(
                    Code::PathNotString,
                    format!("{} must be a path string", self.pointer),
                ),
                Some(path) => {
                    if let Some(reason) = path_escape(path) {
                        fail(
                            Code::PathOutsideRoot,
                            format!("{path:?} is not confined to {root}/: {reason}"),
                        );
                    }
                }
            },
            Rule::Within { root } => match value.as_str() {
                None => fail(
                    Code::PathNotString,
                    format!("{} must be a path string", self.pointer),
                ),
                Some(path) => {
                    let shown = format!("/{}", root.join("/"));
                    let escape = if path.starts_with('/') {
                        path_escape(path.trim_start_matches('/'))
                    } else {
                        Some("the path is not absolute")
                    };
                    if let Some(reason) = escape {
                        fail(
                            Code::PathOutsideRoot,
                            format!("{path:?} is not inside {shown}: {reason}"),
                        );
                    } else if !components(path).starts_with(root) {
                        fail(
                            Code::PathOutsideRoot,
                            format!("{path:?} is not inside {shown}"),
                        );
                    }
                }
            },
            Rule::Pattern { regex, source } => match value.as_str() {
                Some(text) if regex.is_match(text) => {}
                Some(text) => fail(
                    Code::PolicyPatternMismatch,
                    format!("{text:?} does not match the required pattern {source}"),
                ),
                None => fail(
                    Code::PolicyPatternMismatch,
                    format!("{} must be a string", self.pointer),
                ),
            },
            Rule::Range { min, max } => match value.as_f64().filter(|_| value.is_number()) {
                None => fail(
                    Code::OutOfBounds,
                    format!("{} must be a number, got {value}", self.pointer),
                ),
                Some(x) => {
                    let low = min.is_some_and(|m| x < m);
                    let high = max.is_some_and(|m| x > m);
                    if low || high {
                        let bound =
                            |b: Option<f64>| b.map_or_else(|| "∞".to_owned(), |b| b.to_string());
                        fail(
                            Code::OutOfBounds,
                            format!(
                                "{value} is outside the allowed range [{}, {}]",
                                min.map_or_else(|| "-∞".to_owned(), |b| b.to_string()),
                                bound(*max)
                            ),
                        );
                    }
                }
            },
        }
    }
}

/// A path's components, with empty and `.` components read away.
fn components(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_owned)
        .collect()
}

/// Why `path` could leave its root, lexically; `None` when it cannot.
fn path_escape(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("the path is empty");
    }
    if path.contains('\0') {
        return Some("the path contains NUL");
    }
    if path.contains('\\') {
        return Some("the path contains a backslash");
    }
    if path.starts_with('/') {
        return Some("the path is absolute");
    }
    if path.starts_with('~') {
        return Some("the path starts with ~");
    }
    if path.split('/').any(|c| c == "..") {
        return Some("the path has a `..` component");
    }
    None
}

/// What one role may call. A call is permitted when its tool is listed in `tools` or its
/// class in `classes`, and the tool is not in `deny`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Tools this role may call whatever their class.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Intent classes this role may call.
    #[serde(default)]
    pub classes: Vec<IntentClass>,
    /// Tools this role may never call.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl Grants {
    /// Whether this role may call `tool` of `class`.
    #[must_use]
    pub fn permits(&self, tool: &str, class: IntentClass) -> bool {
        !self.deny.iter().any(|d| d == tool)
            && (self.tools.iter().any(|t| t == tool) || self.classes.contains(&class))
    }
}

/// Limits on a run. `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Model calls (steps) per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Tool calls per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Tool calls in one step (1 forbids parallel calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_step: Option<u64>,
    /// Generated tokens per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Wall time per run, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_ms: Option<u64>,
    /// Cost units per run (each tool declares its cost per call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<u64>,
}

/// A run-wide budget that usage went beyond: which, with its stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exceeded {
    /// The stable code ([`Code::StepBudgetExhausted`], [`Code::ToolCallBudgetExhausted`],
    /// [`Code::CostBudgetExhausted`], [`Code::TokenBudgetExhausted`],
    /// [`Code::TimeBudgetExhausted`]).
    pub code: Code,
    /// What was used against what was allowed.
    pub message: String,
}

impl Budget {
    /// The first run-wide limit `usage` goes beyond, if any. This is the one comparison both
    /// the budget gate (on the usage a proposed step would bring) and the harness (on
    /// [`Usage::next_step`], before calling the model again) make.
    #[must_use]
    pub fn exceeded(&self, usage: &Usage) -> Option<Exceeded> {
        let limits = [
            (
                self.max_tool_calls,
                usage.tool_calls,
                Code::ToolCallBudgetExhausted,
                "tool calls",
            ),
            (
                self.max_cost,
                usage.cost,
                Code::CostBudgetExhausted,
                "cost units",
            ),
            (
                self.max_steps,
                usage.steps,
                Code::StepBudgetExhausted,
                "steps",
            ),
            (
                self.max_tokens,
                usage.tokens,
                Code::TokenBudgetExhausted,
                "tokens",
            ),
            (
                self.max_wall_ms,
                usage.wall_ms,
                Code::TimeBudgetExhausted,
                "ms",
            ),
        ];
        limits.into_iter().find_map(|(max, used, code, unit)| {
            let max = max?;
            (used > max).then(|| Exceeded {
                code,
                message: format!("{used} {unit} would be used; the budget is {max} {unit}"),
            })
        })
    }
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Model calls made.
    #[serde(default)]
    pub steps: u64,
    /// Tool calls executed.
    #[serde(default)]
    pub tool_calls: u64,
    /// Tokens generated.
    #[serde(default)]
    pub tokens: u64,
    /// Wall time, in milliseconds.
    #[serde(default)]
    pub wall_ms: u64,
    /// Cost units spent.
    #[serde(default)]
    pub cost: u64,
}

impl Usage {
    /// The least the next step will use: one more step, one more token and one more
    /// millisecond. A budget that this exceeds leaves no room for another step.
    #[must_use]
    pub fn next_step(&self) -> Self {
        Self {
            steps: self.steps + 1,
            tokens: self.tokens + 1,
            wall_ms: self.wall_ms + 1,
            ..*self
        }
    }
}

/// Who is calling and within which limits: the input of the permission and budget gates.
///
/// The default grants the `default` role the `read` and `compute` classes only: a tool that
/// changes state or sends something out needs an explicit grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The caller's role.
    #[serde(default = "default_role")]
    pub role: String,
    /// Every role's grants.
    #[serde(default = "default_roles")]
    pub roles: BTreeMap<String, Grants>,
    /// The run's limits.
    #[serde(default)]
    pub budget: Budget,
    /// Usage so far, for checking one proposed call outside a run (`proviso check --tools`).
    #[serde(default)]
    pub usage: Usage,
}

fn default_role() -> String {
    "default".into()
}

fn default_roles() -> BTreeMap<String, Grants> {
    BTreeMap::from([(
        "default".to_owned(),
        Grants {
            classes: vec![IntentClass::Read, IntentClass::Compute],
            ..Grants::default()
        },
    )])
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            role: default_role(),
            roles: default_roles(),
            budget: Budget::default(),
            usage: Usage::default(),
        }
    }
}

impl Policy {
    /// Reads a policy document.
    ///
    /// # Errors
    ///
    /// [`ToolError::Policy`] naming the field, or an unknown role.
    pub fn from_json(document: &Value) -> Result<Self, ToolError> {
        let policy: Self =
            serde_json::from_value(document.clone()).map_err(|e| ToolError::Policy {
                message: format!("invalid policy: {e}"),
            })?;
        if !policy.roles.contains_key(&policy.role) {
            return Err(ToolError::Policy {
                message: format!(
                    "the policy's role `{}` is not among its roles ({})",
                    policy.role,
                    policy.roles.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        }
        Ok(policy)
    }

    /// The caller's role (a role that is not declared grants nothing).
    #[must_use]
    pub fn caller(&self) -> Grants {
        self.roles.get(&self.role).cloned().unwrap_or_default()
    }

    /// This policy for another role.
    #[must_use]
    pub fn with_role(mut self, role: &str) -> Self {
        role.clone_into(&mut self.role);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_escapes() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a\\b",
            "~/x",
            "a\0b",
        ] {
            assert!(path_escape(bad).is_some(), "{bad:?}");
        }
        for good in ["a", "a/b.txt", "a/./b", "..a", "a..b/c"] {
            assert!(path_escape(good).is_none(), "{good:?}");
        }
    }

    #[test]
    fn path_within_is_by_components() {
        let policy = ArgumentPolicy::PathWithin {
            argument: "path".into(),
            root: "/srv/out/".into(),
        }
        .compile("write")
        .unwrap();
        let args = |p: &str| json!({ "path": p }).as_object().unwrap().clone();
        for good in [
            "/srv/out",
            "/srv/out/a.txt",
            "//srv/./out/b/c",
            "/srv/out/..a",
        ] {
            let mut out = Vec::new();
            policy.check(&args(good), "", &mut out);
            assert!(out.is_empty(), "{good}: {out:?}");
        }
        for bad in [
            "/srv/out2/a",
            "/srv/out/../etc/passwd",
            "srv/out/a",
            "/etc/passwd",
            "/srv",
            "/srv/out/a\\b",
            "",
        ] {
            let mut out = Vec::new();
            policy.check(&args(bad), "", &mut out);
            assert_eq!(out.len(), 1, "{bad}");
            assert_eq!(out[0].code, "path_outside_root");
        }
        assert!(ArgumentPolicy::PathWithin {
            argument: "p".into(),
            root: "rel".into()
        }
        .compile("t")
        .is_err());
        assert!(ArgumentPolicy::PathWithin {
            argument: "p".into(),
            root: "/a/../b".into()
        }
        .compile("t")
        .is_err());
    }

    #[test]
    fn range_never_converts_strings() {
        let policy = ArgumentPolicy::Range {
            argument: "amount".into(),
            min: Some(0.0),
            max: Some(500.0),
        }
        .compile("pay")
        .unwrap();
        let mut out = Vec::new();
        let args = |v: Value| v.as_object().unwrap().clone();
        policy.check(&args(json!({"amount": 120})), "", &mut out);
        assert!(out.is_empty());
        policy.check(&args(json!({"amount": 750})), "/arguments", &mut out);
        policy.check(&args(json!({"amount": "120"})), "", &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].code, "out_of_bounds");
        assert_eq!(
            out[0].location.instance_path.as_deref(),
            Some("/arguments/amount")
        );
    }

    #[test]
    fn default_policy_needs_grants_for_side_effects() {
        let policy = Policy::default();
        assert!(policy.caller().permits("x", IntentClass::Read));
        assert!(!policy.caller().permits("x", IntentClass::Mutate));
        let policy = Policy::from_json(&json!({"role": "clerk", "roles": {
            "clerk": {"tools": ["file_note"], "classes": ["read"], "deny": ["get_secret"]}}}))
        .unwrap();
        let clerk = policy.caller();
        assert!(clerk.permits("file_note", IntentClass::Mutate));
        assert!(!clerk.permits("get_secret", IntentClass::Read));
        assert!(Policy::from_json(&json!({"role": "ghost"})).is_err());
        assert!(Policy::from_json(&json!({"rol": "x"})).is_err());
    }

    #[test]
    fn the_gate_and_the_harness_meet_at_the_same_limit() {
        let budget = Budget {
            max_steps: Some(2),
            max_tokens: Some(100),
            ..Budget::default()
        };
        // The gate judges a step with the usage it brings: the second step is within.
        let second = Usage {
            steps: 2,
            tokens: 100,
            ..Usage::default()
        };
        assert_eq!(budget.exceeded(&second), None);
        // The harness asks before a third step: there is no room left.
        let exceeded = budget.exceeded(&second.next_step()).unwrap();
        assert_eq!(exceeded.code, "step_budget_exhausted");
        let one_step = Usage {
            steps: 1,
            tokens: 100,
            ..Usage::default()
        };
        assert_eq!(
            budget.exceeded(&one_step.next_step()).unwrap().code,
            "token_budget_exhausted"
        );
        assert_eq!(
            Budget::default().exceeded(
                &Usage {
                    steps: u64::MAX - 1,
                    ..Usage::default()
                }
                .next_step()
            ),
            None
        );
    }
}
