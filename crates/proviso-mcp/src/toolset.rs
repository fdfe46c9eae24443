//! MCP tools declared once: each listed tool becomes a [`ToolSpec`] in proviso's registry.

use std::collections::BTreeMap;
use std::path::Path;

use proviso_contract::IntentClass;
use proviso_decode::{CompileOptions, ConstraintSpec, TextChecker};
use proviso_tools::{
    ArgumentPolicy, CallFormat, Grammar, GrammarOptions, Policy, Registry, ToolSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use proviso_harness::{ToolFailure, Toolbox};
use proviso_tools::ToolError;

use crate::hub::{CallResult, Hub, Listing, McpTool};
use crate::McpError;

/// What a policy file may change about one tool (named `server__tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolOverride {
    /// The intent class, instead of the one the annotations give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<IntentClass>,
    /// Argument policies checked at the policy gate (for instance `path_within`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<ArgumentPolicy>,
    /// `false` leaves the tool out: the model is never shown it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A description to show instead of the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for ToolOverride {
    fn default() -> Self {
        Self {
            class: None,
            policies: Vec::new(),
            enabled: true,
            description: None,
        }
    }
}

/// A policy file: proviso's [`Policy`] (roles, grants, budget) plus per-tool overrides:
///
/// ```json
/// {"role": "editor",
///  "roles": {"editor": {"classes": ["read"], "tools": ["fs__write_file"]}},
///  "tools": {"fs__write_file": {"policies": [{"kind": "path_within", "argument": "path", "root": "/srv/out"}]}}}
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ToolPolicy {
    /// Who may call what, and the budget.
    pub policy: Policy,
    /// Per-tool overrides, by qualified name.
    pub tools: BTreeMap<String, ToolOverride>,
}

impl ToolPolicy {
    /// Reads a policy file.
    ///
    /// # Errors
    ///
    /// [`McpError::Config`] naming the file and the field.
    pub fn load(path: &Path) -> Result<Self, McpError> {
        let bad = |message: String| McpError::Config {
            message: format!("{}: {message}", path.display()),
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        let document: Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        Self::from_json(&document).map_err(|e| match e {
            McpError::Config { message } => bad(message),
            other => other,
        })
    }

    /// Reads a policy document.
    ///
    /// # Errors
    ///
    /// [`McpError::Config`] naming the field.
    pub fn from_json(document: &Value) -> Result<Self, McpError> {
        let bad = |message: String| McpError::Config { message };
        let Some(map) = document.as_object() else {
            return Err(bad("a policy must be a JSON object".into()));
        };
        let mut rest = map.clone();
        let tools = match rest.remove("tools") {
            None => BTreeMap::new(),
            Some(tools) => {
                serde_json::from_value(tools).map_err(|e| bad(format!("`tools`: {e}")))?
            }
        };
        let policy = Policy::from_json(&Value::Object(rest)).map_err(|e| bad(e.to_string()))?;
        Ok(Self { policy, tools })
    }
}

/// A tool left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Refused {
    /// The qualified name (or the server's tool name when no name could be made).
    pub tool: String,
    /// Why: a schema keyword the grammar cannot enforce, a name collision, …
    pub reason: String,
}

/// What a listing became.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Declared {
    /// The declarations, in listing order.
    pub specs: Vec<ToolSpec>,
    /// Tools left out, with why.
    pub refused: Vec<Refused>,
    /// The declarations as a registry (their schemas compiled once).
    pub registry: Registry,
    /// The tools behind the declarations.
    pub toolset: Toolset,
}

/// The declared MCP tools and where each call goes.
#[derive(Debug, Clone)]
pub struct Toolset {
    hub: Hub,
    routes: BTreeMap<String, (String, String)>,
}

/// The separator between a server's name and its tool's in a qualified name.
pub const SEPARATOR: &str = "__";

impl Toolset {
    /// Declares every tool of `listing` (from `hub`): one [`ToolSpec`] each, named
    /// `server__tool`, with the overrides of `policy`. A tool whose schema cannot be
    /// enforced, whose name cannot be made valid, or that collides is refused with why; an
    /// override that names no listed tool is refused too, so a typo is never silent.
    #[must_use]
    pub fn declare(hub: &Hub, listing: &Listing, policy: &ToolPolicy) -> Declared {
        let mut specs = Vec::new();
        let mut refused = Vec::new();
        let mut routes = BTreeMap::new();
        let mut registry = Registry::default();
        for tool in &listing.tools {
            let name = qualified(&tool.server, &tool.name);
            let over = policy.tools.get(&name).cloned().unwrap_or_default();
            if !over.enabled {
                continue;
            }
            let spec = match spec(tool, &name, &over) {
                Ok(spec) => spec,
                Err(reason) => {
                    refused.push(Refused { tool: name, reason });
                    continue;
                }
            };
            // Each tool alone must compile, into the registry and into a call grammar, so
            // that one bad tool leaves out only itself.
            let mut alone = Registry::default();
            let checked = alone
                .add(spec.clone())
                .map_err(|e| e.to_string())
                .and_then(|()| enforceable(&alone))
                .and_then(|()| registry.add(spec.clone()).map_err(|e| e.to_string()));
            match checked {
                Ok(()) => {
                    routes.insert(name, (tool.server.clone(), tool.name.clone()));
                    specs.push(spec);
                }
                Err(reason) => refused.push(Refused { tool: name, reason }),
            }
        }
        for name in policy.tools.keys() {
            if !listing
                .tools
                .iter()
                .any(|t| &qualified(&t.server, &t.name) == name)
            {
                refused.push(Refused {
                    tool: name.clone(),
                    reason: "the policy overrides a tool no server lists".into(),
                });
            }
        }
        Declared {
            specs,
            refused,
            registry,
            toolset: Self {
                hub: hub.clone(),
                routes,
            },
        }
    }

    /// Binds every declared tool of `specs` into `toolbox`: a call the gates admitted goes
    /// to its server, and what comes back is the tool's outcome. A result is
    /// `{"text": …}` (with `truncated` when it was cut), or `{"structured": …}` when the
    /// server sent structured content and no text; a result flagged `isError` is the failure `tool_error`;
    /// a server that fails is the failure named by [`McpError::kind`]. The toolbox's timeout
    /// is raised above the slowest server's, so the server's own timeout is the one that
    /// fires, with its typed outcome.
    ///
    /// # Errors
    ///
    /// [`ToolError`] when a name is taken in `toolbox`.
    pub fn bind(&self, mut toolbox: Toolbox, specs: &[ToolSpec]) -> Result<Toolbox, ToolError> {
        for spec in specs {
            let Some((server, tool)) = self.route(spec.name()) else {
                continue;
            };
            let (hub, server, tool) = (self.hub.clone(), server.to_owned(), tool.to_owned());
            toolbox = toolbox.bind(spec.clone(), move |arguments| {
                outcome(hub.call(&server, &tool, arguments))
            })?;
        }
        Ok(toolbox.timeout(self.hub.slowest() + std::time::Duration::from_secs(5)))
    }

    /// The hub the calls go to.
    #[must_use]
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The server and the server's tool name behind a qualified name.
    #[must_use]
    pub fn route(&self, qualified: &str) -> Option<(&str, &str)> {
        self.routes
            .get(qualified)
            .map(|(s, t)| (s.as_str(), t.as_str()))
    }

    /// The qualified names, in order.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.routes.keys().map(String::as_str).collect()
    }
}

/// A call's result as a tool outcome.
fn outcome(result: Result<CallResult, McpError>) -> Result<Value, ToolFailure> {
    match result {
        Err(error) => Err(ToolFailure::new(error.kind(), error.to_string())),
        Ok(result) if result.is_error => {
            let text = result.text();
            Err(ToolFailure::new(
                "tool_error",
                if text.is_empty() {
                    "the tool reported an error".to_owned()
                } else {
                    text
                },
            ))
        }
        Ok(result) => {
            let mut value = serde_json::Map::new();
            let text = result.text();
            // The spec has a server send its structured result as text too; shown twice, it
            // would only cost the model context. Structured content alone is passed on.
            match result.structured {
                Some(structured) if text.is_empty() => {
                    value.insert("structured".into(), structured);
                }
                _ => {
                    value.insert("text".into(), Value::from(text));
                }
            }
            if let Some(truncated) = result.truncated {
                value.insert(
                    "truncated".into(),
                    serde_json::to_value(truncated).unwrap_or(Value::Null),
                );
            }
            Ok(Value::Object(value))
        }
    }
}

/// Whether a call grammar over `registry` compiles in the decoder proviso runs (a schema
/// keyword it cannot enforce is named, never dropped). The check uses a byte-level
/// vocabulary, so it needs no model.
fn enforceable(registry: &Registry) -> Result<(), String> {
    let grammar = CallFormat::Envelope
        .grammar(registry, &GrammarOptions::default())
        .map_err(|e| e.to_string())?;
    let spec = match grammar.grammar {
        Grammar::JsonSchema(schema) => ConstraintSpec::JsonSchema(schema),
        Grammar::Lark(lark) => ConstraintSpec::Lark(lark),
    };
    TextChecker::new(&spec, &CompileOptions::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `server__tool`, with every character a tool name may not hold replaced by `_`, and at
/// most 64 bytes.
#[must_use]
pub fn qualified(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{server}{SEPARATOR}{tool}");
    name.truncate(64);
    name
}

/// The declaration of one listed tool.
fn spec(tool: &McpTool, name: &str, over: &ToolOverride) -> Result<ToolSpec, String> {
    let hint = |key: &str| tool.annotations.get(key).and_then(Value::as_bool);
    // A read-only hint makes a read; a destructive hint, or no hint at all, a mutation
    // (the spec's defaults: a tool is assumed to change things unless it says otherwise).
    let class = over.class.unwrap_or(if hint("readOnlyHint") == Some(true) {
        IntentClass::Read
    } else {
        IntentClass::Mutate
    });
    let mut effects = vec![format!(
        "MCP tool `{}` of server `{}`",
        tool.name, tool.server
    )];
    if hint("destructiveHint") == Some(true) {
        effects.push("destructive".into());
    }
    if hint("openWorldHint") != Some(false) {
        effects.push("may reach the world outside the server".into());
    }
    let mut parameters = tool.input_schema.clone();
    if !parameters.is_object() {
        return Err("its inputSchema is not a JSON object".into());
    }
    // An MCP schema may leave out `type` for a tool without arguments.
    if parameters.get("type").is_none() && parameters.get("properties").is_none() {
        parameters["type"] = Value::from("object");
    }
    if let Some(map) = parameters.as_object_mut() {
        // Annotations of the schema document itself, not constraints.
        map.remove("$schema");
    }
    let description = over
        .description
        .clone()
        .unwrap_or_else(|| tool.description.clone());
    let mut spec = ToolSpec::new(name, description, class, parameters).effects(effects.join("; "));
    for policy in &over.policies {
        spec = spec.policy(policy.clone());
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value, annotations: Value) -> McpTool {
        McpTool {
            server: "s".into(),
            name: name.into(),
            description: format!("the {name} tool"),
            input_schema: schema,
            annotations,
        }
    }

    #[test]
    fn declares_classes_from_hints_and_refuses_by_name() {
        let hub = Hub::new(crate::McpConfig::default(), crate::Limits::default()).unwrap();
        let listing = Listing {
            tools: vec![
                tool(
                    "read",
                    json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                    json!({"readOnlyHint": true}),
                ),
                tool(
                    "write",
                    json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                    Value::Null,
                ),
                tool(
                    "odd name!",
                    json!({"type": "object"}),
                    json!({"readOnlyHint": true, "openWorldHint": false}),
                ),
                tool(
                    "bad",
                    json!({"type": "object", "properties": {"x": {"type": "string"}}, "dependentSchemas": {"x": {"required": ["y"]}}}),
                    Value::Null,
                ),
            ],
            ..Listing::default()
        };
        let policy = ToolPolicy::from_json(&json!({"tools": {
            "s__write": {"policies": [{"kind": "pattern", "argument": "path", "pattern": "out/.*"}]},
            "s__missing": {"class": "read"}}}))
        .unwrap();
        let declared = Toolset::declare(&hub, &listing, &policy);
        let names: Vec<&str> = declared.specs.iter().map(ToolSpec::name).collect();
        assert_eq!(names, ["s__read", "s__write", "s__odd_name_"]);
        assert_eq!(declared.specs[0].class(), IntentClass::Read);
        assert_eq!(declared.specs[1].class(), IntentClass::Mutate);
        assert_eq!(declared.specs[1].policies().len(), 1);
        assert_eq!(
            declared.toolset.route("s__odd_name_"),
            Some(("s", "odd name!"))
        );
        let refused: Vec<(&str, &str)> = declared
            .refused
            .iter()
            .map(|r| (r.tool.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert_eq!(refused[0].0, "s__bad");
        assert!(
            refused[0].1.contains("dependentSchemas"),
            "{}",
            refused[0].1
        );
        assert_eq!(refused[1].0, "s__missing");
    }

    #[test]
    fn a_policy_file_is_a_policy_with_tools() {
        let policy = ToolPolicy::from_json(&json!({"role": "editor",
            "roles": {"editor": {"classes": ["read"], "tools": ["fs__write_file"]}},
            "tools": {"fs__write_file": {"policies": [{"kind": "path_within", "argument": "path", "root": "/srv/out"}]}}}))
        .unwrap();
        assert!(policy
            .policy
            .caller()
            .permits("fs__write_file", IntentClass::Mutate));
        assert!(ToolPolicy::from_json(&json!({"tools": {"x": {"clas": "read"}}})).is_err());
        assert!(ToolPolicy::from_json(&json!({"budget": {"max_step": 1}})).is_err());
    }
}
