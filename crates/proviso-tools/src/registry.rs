//! Tool declarations and the registry that holds them.
//!
//! A tool is declared once, as a [`ToolSpec`]: its name, a description written for the model,
//! a JSON Schema for its arguments, an intent class, argument policies and a cost. The
//! declaration can come from a typed Rust struct ([`ToolSpec::typed`]), from an OpenAI
//! `tools` array ([`Registry::from_openai`]) or from a BFCL function list
//! ([`Registry::from_bfcl`]). Everything else (the model-facing text, the grammar of each call
//! format, the validator) is derived from the [`Registry`], so they cannot drift apart.

use std::collections::BTreeMap;

use proviso_contract::{CompiledSchema, IntentClass, SchemaOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::ToolError;
use crate::policy::ArgumentPolicy;

/// One tool, declared once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    name: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    effects: Option<String>,
    parameters: Value,
    class: IntentClass,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    policies: Vec<ArgumentPolicy>,
    cost: u32,
}

impl ToolSpec {
    /// A tool whose arguments follow `parameters`, a JSON Schema for an object.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        class: IntentClass,
        parameters: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            effects: None,
            parameters,
            class,
            policies: Vec::new(),
            cost: 1,
        }
    }

    /// The same tool with its arguments held to `parameters` instead (a narrower schema, as
    /// a harness derives from what already ran).
    #[must_use]
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// A tool whose arguments are the typed struct `A`; its schema is derived with
    /// `schemars`, so the struct the tool function receives and the schema the model is held
    /// to are one declaration.
    #[must_use]
    pub fn typed<A: schemars::JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
        class: IntentClass,
    ) -> Self {
        let generator = schemars::generate::SchemaSettings::draft2020_12()
            .with(|s| s.inline_subschemas = true)
            .into_generator();
        let schema = generator.into_root_schema_for::<A>();
        let mut parameters = schema.to_value();
        normalize_schemars(&mut parameters);
        if let Value::Object(map) = &mut parameters {
            map.remove("$schema");
            map.remove("title");
        }
        Self::new(name, description, class, parameters)
    }

    /// Says, for the model, what happens when the tool runs (wanted and unwanted effects).
    #[must_use]
    pub fn effects(mut self, effects: impl Into<String>) -> Self {
        self.effects = Some(effects.into());
        self
    }

    /// Adds an argument policy.
    #[must_use]
    pub fn policy(mut self, policy: ArgumentPolicy) -> Self {
        self.policies.push(policy);
        self
    }

    /// Sets the cost, in the budget's cost units, of one call (1 by default).
    #[must_use]
    pub fn cost(mut self, cost: u32) -> Self {
        self.cost = cost;
        self
    }

    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description written for the model.
    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }

    /// What happens when the tool runs, if declared.
    #[must_use]
    pub fn effects_text(&self) -> Option<&str> {
        self.effects.as_deref()
    }

    /// The JSON Schema of the arguments object.
    #[must_use]
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The intent class.
    #[must_use]
    pub fn class(&self) -> IntentClass {
        self.class
    }

    /// The argument policies.
    #[must_use]
    pub fn policies(&self) -> &[ArgumentPolicy] {
        &self.policies
    }

    /// The cost of one call.
    #[must_use]
    pub fn call_cost(&self) -> u32 {
        self.cost
    }

    /// The argument names in declared order, each with whether it is required.
    #[must_use]
    pub fn arguments(&self) -> Vec<(&str, bool)> {
        let required: Vec<&str> = required_names(self.parameters.get("required")).collect();
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.keys()
                    .map(|k| (k.as_str(), required.contains(&k.as_str())))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The names in a JSON Schema's `required` list (pass the schema's `required` member); none
/// when it is absent or not a list of strings.
pub(crate) fn required_names(required: Option<&Value>) -> impl Iterator<Item = &str> {
    required
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// A declared tool with its compiled validator.
#[derive(Debug, Clone)]
pub struct Tool {
    spec: ToolSpec,
    schema: CompiledSchema,
    policies: Vec<crate::policy::CompiledPolicy>,
}

impl Tool {
    /// The declaration.
    #[must_use]
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The compiled argument schema.
    #[must_use]
    pub fn schema(&self) -> &CompiledSchema {
        &self.schema
    }

    pub(crate) fn compiled_policies(&self) -> &[crate::policy::CompiledPolicy] {
        &self.policies
    }
}

/// The tools an agent may propose calls to, in declared order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    tools: Vec<Tool>,
    index: BTreeMap<String, usize>,
}

/// The schema gate of tool calls reads the declared tools from the registry.
impl proviso_contract::ToolCatalog for Registry {
    fn declared(&self, name: &str) -> Option<(IntentClass, &CompiledSchema)> {
        self.get(name).map(|t| (t.spec.class(), &t.schema))
    }

    fn declared_names(&self) -> Vec<&str> {
        self.names()
    }
}

impl Registry {
    /// A registry of `specs`, each schema compiled (Draft 2020-12, formats asserted, unknown
    /// keywords refused).
    ///
    /// # Errors
    ///
    /// [`ToolError`] for an invalid name, a duplicate, a schema that is not an object schema
    /// or does not compile, or an invalid policy.
    pub fn new(specs: Vec<ToolSpec>) -> Result<Self, ToolError> {
        let mut registry = Self::default();
        for spec in specs {
            registry.add(spec)?;
        }
        Ok(registry)
    }

    /// This registry with each tool's parameter schema rewritten by `narrow`, which returns
    /// whether it changed anything; `None` when nothing changed (or the rewritten schemas do
    /// not compile). Steering uses it to narrow what a grammar lets the model write; the
    /// gates keep checking the declared registry.
    #[must_use]
    pub fn narrowed(&self, mut narrow: impl FnMut(&mut Value) -> bool) -> Option<Self> {
        let mut changed = false;
        let specs: Vec<ToolSpec> = self
            .iter()
            .map(|tool| {
                let spec = tool.spec().clone();
                let mut parameters = spec.parameters().clone();
                changed |= narrow(&mut parameters);
                spec.with_parameters(parameters)
            })
            .collect();
        if !changed {
            return None;
        }
        Self::new(specs).ok()
    }

    /// Adds one tool.
    ///
    /// # Errors
    ///
    /// As [`Registry::new`].
    pub fn add(&mut self, spec: ToolSpec) -> Result<(), ToolError> {
        if !valid_name(&spec.name) {
            return Err(ToolError::InvalidName { name: spec.name });
        }
        if self.index.contains_key(&spec.name) {
            return Err(ToolError::Duplicate { name: spec.name });
        }
        let is_object = spec.parameters.get("type").and_then(Value::as_str) == Some("object");
        if !is_object {
            return Err(ToolError::Declaration {
                tool: spec.name,
                pointer: "/parameters/type".into(),
                message: "a tool's parameters must be a JSON Schema with \"type\": \"object\""
                    .into(),
            });
        }
        let schema = CompiledSchema::compile(&spec.parameters, &SchemaOptions::default()).map_err(
            |source| ToolError::Schema {
                tool: spec.name.clone(),
                source,
            },
        )?;
        let policies = spec
            .policies
            .iter()
            .map(|p| p.compile(&spec.name))
            .collect::<Result<Vec<_>, _>>()?;
        self.index.insert(spec.name.clone(), self.tools.len());
        self.tools.push(Tool {
            spec,
            schema,
            policies,
        });
        Ok(())
    }

    /// The tool called `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tools in declared order.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter()
    }

    /// The tool names in declared order.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.spec.name.as_str()).collect()
    }

    /// Number of tools.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The intent class of `name`, if declared.
    #[must_use]
    pub fn class_of(&self, name: &str) -> Option<IntentClass> {
        self.get(name).map(|t| t.spec.class)
    }

    /// A registry from JSON in any accepted shape: an OpenAI `tools` array (or an object with
    /// a `tools` field), or a BFCL function list (objects with `name` and `parameters` whose
    /// type is `dict`).
    ///
    /// # Errors
    ///
    /// [`ToolError::Declaration`] for a shape that is neither, or any error of the readers.
    pub fn from_json(document: &Value) -> Result<Self, ToolError> {
        let list = match document {
            Value::Object(map) if map.contains_key("tools") => &map["tools"],
            other => other,
        };
        let Some(items) = list.as_array() else {
            return Err(declaration(
                "",
                "",
                "expected an array of tools (OpenAI `tools` or a BFCL function list)",
            ));
        };
        let looks_bfcl = items.iter().any(|t| {
            t.get("parameters")
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                == Some("dict")
        });
        if looks_bfcl {
            Self::from_bfcl(list)
        } else {
            Self::from_openai(list)
        }
    }

    /// A registry from an OpenAI `tools` array:
    /// `[{"type": "function", "function": {"name", "description", "parameters"}}]`.
    /// A proviso extension `x-proviso: {"class", "effects", "policies", "cost"}` on the
    /// function object declares what OpenAI's format cannot. A tool with no declared class is
    /// taken to be `mutate`: an effect nobody declared is assumed to change state.
    ///
    /// # Errors
    ///
    /// [`ToolError`] naming the pointer of anything malformed.
    pub fn from_openai(tools: &Value) -> Result<Self, ToolError> {
        let Some(items) = tools.as_array() else {
            return Err(declaration("", "", "OpenAI `tools` must be an array"));
        };
        let mut specs = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("/{i}");
            let kind = item.get("type").and_then(Value::as_str);
            if kind != Some("function") {
                return Err(declaration(
                    "",
                    &format!("{at}/type"),
                    "only tools of type \"function\" are supported",
                ));
            }
            let Some(function) = item.get("function").and_then(Value::as_object) else {
                return Err(declaration(
                    "",
                    &format!("{at}/function"),
                    "missing `function`",
                ));
            };
            specs.push(spec_from_function(
                function,
                &format!("{at}/function"),
                false,
            )?);
        }
        Self::new(specs)
    }

    /// A registry from a BFCL function list. BFCL's types are mapped to JSON Schema:
    /// `dict` → `object`, `float` → `number`, `tuple` → `array`, `any` → any value;
    /// `integer`, `string`, `boolean` and `array` keep their names. BFCL's `default` values are
    /// kept as annotations.
    ///
    /// # Errors
    ///
    /// [`ToolError`] for an unknown type name or a malformed function.
    pub fn from_bfcl(functions: &Value) -> Result<Self, ToolError> {
        let Some(items) = functions.as_array() else {
            return Err(declaration("", "", "a BFCL function list must be an array"));
        };
        let mut specs = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Some(function) = item.as_object() else {
                return Err(declaration(
                    "",
                    &format!("/{i}"),
                    "a function must be an object",
                ));
            };
            specs.push(spec_from_function(function, &format!("/{i}"), true)?);
        }
        Self::new(specs)
    }

    /// The registry as an OpenAI `tools` array (with the `x-proviso` extension), the form
    /// `proviso check --tools` and the server read back.
    #[must_use]
    pub fn to_openai(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| {
                    let spec = &t.spec;
                    let mut extension = json!({"class": spec.class, "cost": spec.cost});
                    if let Some(effects) = &spec.effects {
                        extension["effects"] = json!(effects);
                    }
                    if !spec.policies.is_empty() {
                        extension["policies"] = json!(spec.policies);
                    }
                    json!({"type": "function", "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": spec.parameters,
                        "x-proviso": extension,
                    }})
                })
                .collect(),
        )
    }
}

/// Names usable in every call format: letters, digits, `_`, `.` and `-`, at most 64 bytes,
/// not starting with a digit or punctuation (BFCL uses dotted names like `math.factorial`).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn declaration(tool: &str, pointer: &str, message: &str) -> ToolError {
    ToolError::Declaration {
        tool: tool.to_owned(),
        pointer: pointer.to_owned(),
        message: message.to_owned(),
    }
}

/// The `x-proviso` extension of a function declaration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Extension {
    class: Option<String>,
    effects: Option<String>,
    #[serde(default)]
    policies: Vec<ArgumentPolicy>,
    cost: Option<u32>,
}

fn spec_from_function(
    function: &Map<String, Value>,
    at: &str,
    bfcl: bool,
) -> Result<ToolSpec, ToolError> {
    let Some(name) = function.get("name").and_then(Value::as_str) else {
        return Err(declaration(
            "",
            &format!("{at}/name"),
            "missing string `name`",
        ));
    };
    let description = function
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parameters = match function.get("parameters") {
        // A function without parameters takes an empty object.
        None => json!({"type": "object", "properties": {}, "additionalProperties": false}),
        Some(p) if bfcl => bfcl_to_schema(p, name, &format!("{at}/parameters"))?,
        Some(p) => p.clone(),
    };
    let extension: Extension = match function.get("x-proviso") {
        None => Extension::default(),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|e| declaration(name, &format!("{at}/x-proviso"), &e.to_string()))?,
    };
    let class = match extension.class.as_deref() {
        None => IntentClass::Mutate,
        Some(text) => IntentClass::parse(text).ok_or_else(|| {
            declaration(
                name,
                &format!("{at}/x-proviso/class"),
                &format!("`{text}` is not one of read, compute, mutate, submit"),
            )
        })?,
    };
    let mut spec = ToolSpec::new(name, description, class, parameters);
    spec.effects = extension.effects;
    spec.policies = extension.policies;
    spec.cost = extension.cost.unwrap_or(1);
    Ok(spec)
}

/// Maps a BFCL parameter schema to JSON Schema 2020-12.
fn bfcl_to_schema(schema: &Value, tool: &str, at: &str) -> Result<Value, ToolError> {
    let Some(map) = schema.as_object() else {
        return Err(declaration(
            tool,
            at,
            "a parameter schema must be an object",
        ));
    };
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" => {
                let Some(name) = value.as_str() else {
                    return Err(declaration(
                        tool,
                        &format!("{at}/type"),
                        "type must be a string",
                    ));
                };
                match name {
                    "dict" | "object" => {
                        out.insert("type".into(), json!("object"));
                    }
                    "float" | "number" => {
                        out.insert("type".into(), json!("number"));
                    }
                    "tuple" | "array" => {
                        out.insert("type".into(), json!("array"));
                    }
                    "integer" | "string" | "boolean" => {
                        out.insert("type".into(), json!(name));
                    }
                    // `any` places no constraint.
                    "any" => {}
                    other => {
                        return Err(ToolError::UnsupportedType {
                            tool: tool.to_owned(),
                            pointer: format!("{at}/type"),
                            type_name: other.to_owned(),
                        })
                    }
                }
            }
            "properties" => {
                let Some(properties) = value.as_object() else {
                    return Err(declaration(
                        tool,
                        &format!("{at}/properties"),
                        "not an object",
                    ));
                };
                let mut mapped = Map::new();
                for (name, property) in properties {
                    mapped.insert(
                        name.clone(),
                        bfcl_to_schema(property, tool, &format!("{at}/properties/{name}"))?,
                    );
                }
                out.insert("properties".into(), Value::Object(mapped));
            }
            "items" => {
                out.insert(
                    "items".into(),
                    bfcl_to_schema(value, tool, &format!("{at}/items"))?,
                );
            }
            "additionalProperties" if value.is_object() => {
                out.insert(
                    key.clone(),
                    bfcl_to_schema(value, tool, &format!("{at}/additionalProperties"))?,
                );
            }
            // BFCL writes optional parameters' defaults and free-text format hints; both are
            // annotations for the model, kept under names that assert nothing.
            "default"
            | "description"
            | "enum"
            | "required"
            | "additionalProperties"
            | "minimum"
            | "maximum"
            | "minItems"
            | "maxItems"
            | "const"
            | "pattern" => {
                out.insert(key.clone(), value.clone());
            }
            "format" => {
                out.insert("x-bfcl-format".into(), value.clone());
            }
            other => {
                out.insert(format!("x-bfcl-{other}"), value.clone());
            }
        }
    }
    // BFCL's `float` accepts an integer literal too; JSON Schema's `number` already does.
    if out.get("type") == Some(&json!("object")) && !out.contains_key("properties") {
        out.insert("properties".into(), json!({}));
    }
    Ok(Value::Object(out))
}

/// schemars writes Rust's numeric widths as `format` (`uint32`, `double`, …), which are not
/// JSON Schema formats and which proviso's validator would refuse. They are replaced by the
/// bounds they stand for, so nothing the type promised is lost.
fn normalize_schemars(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let bounds: Option<(Option<f64>, Option<f64>)> =
                match map.get("format").and_then(Value::as_str) {
                    Some("int8") => Some((Some(-128.0), Some(127.0))),
                    Some("int16") => Some((Some(-32768.0), Some(32767.0))),
                    Some("int32") => Some((Some(-2_147_483_648.0), Some(2_147_483_647.0))),
                    Some("uint8") => Some((Some(0.0), Some(255.0))),
                    Some("uint16") => Some((Some(0.0), Some(65535.0))),
                    Some("uint32") => Some((Some(0.0), Some(4_294_967_295.0))),
                    Some("uint64" | "uint" | "uint128") => Some((Some(0.0), None)),
                    Some("int64" | "int" | "int128" | "float" | "double") => Some((None, None)),
                    _ => None,
                };
            if let Some((min, max)) = bounds {
                map.remove("format");
                let integral = map.get("type").and_then(Value::as_str) == Some("integer");
                #[allow(clippy::cast_possible_truncation)] // The bounds are integers.
                let number = |x: f64| {
                    if integral {
                        json!(x as i64)
                    } else {
                        json!(x)
                    }
                };
                if let Some(min) = min {
                    map.entry("minimum").or_insert_with(|| number(min));
                }
                if let Some(max) = max {
                    map.entry("maximum").or_insert_with(|| number(max));
                }
            }
            for value in map.values_mut() {
                normalize_schemars(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_schemars),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[allow(dead_code)] // Only the derived schema is inspected.
    struct Transfer {
        /// Account to pay from.
        from: String,
        /// Amount in cents.
        cents: u32,
        memo: Option<String>,
    }

    #[test]
    fn typed_schema_has_bounds_not_formats() {
        let spec = ToolSpec::typed::<Transfer>("transfer", "Pays.", IntentClass::Submit);
        let p = spec.parameters();
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["cents"]["minimum"], 0);
        assert_eq!(p["properties"]["cents"]["maximum"], 4_294_967_295_u64);
        assert!(p["properties"]["cents"].get("format").is_none());
        assert_eq!(
            p["properties"]["from"]["description"],
            "Account to pay from."
        );
        assert_eq!(
            spec.arguments(),
            vec![("from", true), ("cents", true), ("memo", false)]
        );
        Registry::new(vec![spec]).unwrap();
    }

    #[test]
    fn bfcl_types_are_mapped() {
        let registry = Registry::from_bfcl(&json!([{"name": "math.sum", "description": "Sum.",
            "parameters": {"type": "dict", "properties": {
                "numbers": {"type": "array", "items": {"type": "float"}},
                "pair": {"type": "tuple", "items": {"type": "integer"}},
                "anything": {"type": "any"},
                "decimal_places": {"type": "integer", "default": 2}},
            "required": ["numbers"]}}]))
        .unwrap();
        let tool = registry.get("math.sum").unwrap();
        let p = tool.spec().parameters();
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["numbers"]["items"]["type"], "number");
        assert_eq!(p["properties"]["pair"]["type"], "array");
        assert_eq!(p["properties"]["anything"], json!({}));
        assert!(tool.schema().is_valid(&json!({"numbers": [1, 2.5]})));
        assert!(!tool.schema().is_valid(&json!({"numbers": ["1"]})));
    }

    #[test]
    fn unknown_bfcl_type_is_named() {
        let error = Registry::from_bfcl(&json!([{"name": "f", "parameters": {"type": "dict",
            "properties": {"x": {"type": "complex"}}}}]))
        .unwrap_err();
        assert!(error.to_string().contains("complex"), "{error}");
    }

    #[test]
    fn openai_tools_with_extension() {
        let registry = Registry::from_json(&json!({"tools": [{"type": "function", "function": {
            "name": "get_arm", "description": "Reads an arm.",
            "parameters": {"type": "object", "properties": {"trial_id": {"type": "string"}},
                "required": ["trial_id"]},
            "x-proviso": {"class": "read", "cost": 2}}}]}))
        .unwrap();
        let spec = registry.get("get_arm").unwrap().spec();
        assert_eq!(spec.class(), IntentClass::Read);
        assert_eq!(spec.call_cost(), 2);
        let round = Registry::from_openai(&registry.to_openai()).unwrap();
        assert_eq!(round.get("get_arm").unwrap().spec(), spec);
    }

    #[test]
    fn undeclared_class_is_mutate_and_bad_names_fail() {
        let registry = Registry::from_openai(&json!([{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object"}}}]))
        .unwrap();
        assert_eq!(registry.class_of("f"), Some(IntentClass::Mutate));
        for bad in ["", "9x", "a b", "a\"b", "<tool_call>"] {
            let spec = ToolSpec::new(bad, "", IntentClass::Read, json!({"type": "object"}));
            assert!(matches!(
                Registry::new(vec![spec]),
                Err(ToolError::InvalidName { .. })
            ));
        }
        let spec = ToolSpec::new("f", "", IntentClass::Read, json!({"type": "string"}));
        assert!(Registry::new(vec![spec]).is_err());
    }
}
