//! The same contracts in other serving stacks' dialects: GBNF for llama.cpp's `grammar` field,
//! Lark for llguidance-based servers, and JSON Schema for vLLM's structured outputs and
//! OpenAI's strict mode. Each export refuses, by name, what the target cannot express.
//!
//! GBNF is produced by llama.cpp's own `json_schema_to_grammar` (passed in as a converter, so
//! this crate stays free of native code) after a check that the schema only uses keywords that
//! converter enforces; proviso adds the call-format framing around it.

use std::collections::BTreeSet;

use proviso_contract::assertion_keywords;
use serde_json::{json, Map, Value};

use crate::error::ToolError;
use crate::format::{CallFormat, Grammar, GrammarOptions, ToolChoice};
use crate::registry::Registry;

/// A schema a JSON Schema to GBNF converter could not convert. proviso does not convert
/// schemas to GBNF itself: the caller passes llama.cpp's own converter, so a llama.cpp
/// upstream reads the grammar its own code would have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct GbnfError {
    /// The converter's message.
    pub message: String,
}

impl GbnfError {
    /// A conversion failure with the converter's message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// An export dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// llama.cpp's GBNF.
    Gbnf,
    /// Lark, in llguidance's dialect (inline `%json` schemas).
    Lark,
    /// JSON Schema 2020-12, normalized.
    JsonSchema,
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gbnf" => Ok(Self::Gbnf),
            "lark" => Ok(Self::Lark),
            "json-schema" => Ok(Self::JsonSchema),
            other => Err(format!(
                "unknown dialect `{other}` (gbnf, lark, json-schema)"
            )),
        }
    }
}

/// Keywords llama.cpp's JSON-schema converter enforces. Anything else that asserts is refused
/// for GBNF, so a GBNF grammar never silently drops a constraint.
const GBNF_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
];

/// The `format`s llama.cpp's converter has rules for.
const GBNF_FORMATS: &[&str] = &["date", "time", "date-time", "uuid"];

/// Keywords OpenAI's strict mode does not support.
const STRICT_REFUSED: &[&str] = &[
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "allOf",
    "prefixItems",
];

fn unsupported(dialect: &'static str, what: String) -> ToolError {
    ToolError::ExportUnsupported { dialect, what }
}

/// Drops annotations and proviso's `x-` extensions everywhere, and writes the 2020-12 dialect
/// at the root.
#[must_use]
pub fn normalize(schema: &Value) -> Value {
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| !k.starts_with("x-") && *k != "$schema" && *k != "$comment")
                    .map(|(k, v)| {
                        // Property names are data, not keywords: keep them all.
                        if k == "properties" || k == "$defs" || k == "definitions" {
                            let inner = v
                                .as_object()
                                .map(|m| {
                                    m.iter()
                                        .map(|(n, s)| (n.clone(), strip(s)))
                                        .collect::<Map<_, _>>()
                                })
                                .map_or_else(|| v.clone(), Value::Object);
                            (k.clone(), inner)
                        } else {
                            (k.clone(), strip(v))
                        }
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    let mut out = strip(schema);
    if let Value::Object(map) = &mut out {
        let mut with_dialect = Map::new();
        with_dialect.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        with_dialect.extend(std::mem::take(map));
        *map = with_dialect;
    }
    out
}

/// Every `format` value used in a schema.
fn formats(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "format" {
                    if let Some(f) = v.as_str() {
                        out.insert(f.to_owned());
                    }
                }
                formats(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| formats(v, out)),
        _ => {}
    }
}

/// Checks that llama.cpp's converter enforces every keyword of `schema`.
///
/// # Errors
///
/// [`ToolError::FormatUnsupported`] naming the keywords.
pub fn check_gbnf(schema: &Value) -> Result<(), ToolError> {
    let refused: Vec<String> = assertion_keywords(schema)
        .into_iter()
        .filter(|k| !GBNF_KEYWORDS.contains(&k.as_str()))
        .collect();
    if !refused.is_empty() {
        return Err(unsupported(
            "gbnf",
            refused
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let mut used = BTreeSet::new();
    formats(schema, &mut used);
    let bad: Vec<String> = used
        .into_iter()
        .filter(|f| !GBNF_FORMATS.contains(&f.as_str()))
        .collect();
    if !bad.is_empty() {
        return Err(unsupported(
            "gbnf",
            bad.iter()
                .map(|f| format!("`format: {f}`"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    Ok(())
}

/// Checks OpenAI strict mode's rules: every object lists all its properties as required and
/// sets `additionalProperties: false`, and no unsupported keyword appears.
///
/// # Errors
///
/// [`ToolError::FormatUnsupported`] naming the keyword or the object at fault.
pub fn check_strict(schema: &Value) -> Result<(), ToolError> {
    let refused: Vec<String> = assertion_keywords(schema)
        .into_iter()
        .filter(|k| STRICT_REFUSED.contains(&k.as_str()))
        .collect();
    if !refused.is_empty() {
        return Err(unsupported(
            "strict json-schema",
            refused
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    fn walk(value: &Value, pointer: &str) -> Result<(), ToolError> {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get("properties") {
                    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                        return Err(unsupported(
                            "strict json-schema",
                            format!(
                                "an object without `additionalProperties: false` at {}",
                                if pointer.is_empty() { "/" } else { pointer }
                            ),
                        ));
                    }
                    let required: BTreeSet<&str> =
                        crate::registry::required_names(map.get("required")).collect();
                    if let Some(missing) =
                        properties.keys().find(|k| !required.contains(k.as_str()))
                    {
                        return Err(unsupported("strict json-schema", format!("optional property `{missing}` at {} (strict mode requires every property; make it nullable instead)", if pointer.is_empty() { "/" } else { pointer })));
                    }
                    for (name, schema) in properties {
                        walk(schema, &format!("{pointer}/properties/{name}"))?;
                    }
                }
                for (k, v) in map {
                    if k != "properties" {
                        walk(v, &format!("{pointer}/{k}"))?;
                    }
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{pointer}/{i}"))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(schema, "")
}

/// A schema exported to `dialect`. `gbnf` converts a checked schema with llama.cpp's own
/// converter.
///
/// # Errors
///
/// [`ToolError::FormatUnsupported`] naming what the dialect cannot express, or the
/// converter's error.
pub fn export_schema(
    schema: &Value,
    dialect: Dialect,
    strict: bool,
    to_gbnf: &dyn Fn(&Value) -> Result<String, GbnfError>,
) -> Result<String, ToolError> {
    let schema = normalize(schema);
    if strict {
        check_strict(&schema)?;
    }
    match dialect {
        Dialect::JsonSchema => Ok(serde_json::to_string_pretty(&schema).unwrap_or_default()),
        Dialect::Lark => {
            let mut inner = schema;
            if let Value::Object(map) = &mut inner {
                map.remove("$schema");
                map.insert("x-guidance".into(), crate::format::json_style());
            }
            Ok(format!(
                "start: %json {}\n",
                serde_json::to_string_pretty(&inner).unwrap_or_default()
            ))
        }
        Dialect::Gbnf => {
            check_gbnf(&schema)?;
            to_gbnf(&schema).map_err(|e| unsupported("gbnf", format!("llama.cpp's converter: {e}")))
        }
    }
}

/// Renames every rule of a GBNF grammar with `prefix`, so two grammars can be combined.
fn prefix_rules(gbnf: &str, prefix: &str) -> String {
    let names: BTreeSet<String> = gbnf
        .lines()
        .filter_map(|l| l.split_once("::=").map(|(n, _)| n.trim().to_owned()))
        .collect();
    let mut out = String::with_capacity(gbnf.len() + 64);
    for line in gbnf.lines() {
        let mut rewritten = String::with_capacity(line.len());
        let mut rest = line;
        // Rule references are identifiers outside string literals and character classes.
        let mut in_string = false;
        let mut in_class = false;
        while let Some(c) = rest.chars().next() {
            if in_string || in_class {
                rewritten.push(c);
                if c == '\\' {
                    if let Some(next) = rest[1..].chars().next() {
                        rewritten.push(next);
                        rest = &rest[1 + next.len_utf8()..];
                        continue;
                    }
                } else if (in_string && c == '"') || (in_class && c == ']') {
                    in_string = false;
                    in_class = false;
                }
                rest = &rest[c.len_utf8()..];
                continue;
            }
            if c == '"' {
                in_string = true;
            } else if c == '[' {
                in_class = true;
            }
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                let end = rest
                    .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'))
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                if names.contains(word) {
                    rewritten.push_str(prefix);
                }
                rewritten.push_str(word);
                rest = &rest[end..];
                continue;
            }
            rewritten.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out.push_str(&rewritten);
        out.push('\n');
    }
    out
}

/// A step's grammar for `registry` in `format`, exported to `dialect`.
///
/// # Errors
///
/// [`ToolError::FormatUnsupported`] naming what the dialect cannot express (the pythonic
/// format's regular-expression lexemes in GBNF or JSON Schema, for one).
pub fn export_tools(
    registry: &Registry,
    format: CallFormat,
    options: &GrammarOptions,
    dialect: Dialect,
    strict: bool,
    to_gbnf: &dyn Fn(&Value) -> Result<String, GbnfError>,
) -> Result<String, ToolError> {
    let grammar = format.grammar(registry, options)?;
    match (&grammar.grammar, dialect) {
        (Grammar::JsonSchema(schema), _) => export_schema(schema, dialect, strict, to_gbnf),
        (Grammar::Lark(lark), Dialect::Lark) => Ok(lark.clone()),
        (Grammar::Lark(_), Dialect::JsonSchema) => Err(unsupported(
            "json-schema",
            format!("the {format} format's grammar (it is not a JSON document; use --to lark, or the envelope or llama3 format)"),
        )),
        (Grammar::Lark(_), Dialect::Gbnf) => {
            if format != CallFormat::Hermes {
                return Err(unsupported(
                    "gbnf",
                    format!("the {format} format's regular-expression lexemes (use --to lark, or the hermes, envelope or llama3 format)"),
                ));
            }
            if options.answer.is_some() {
                return Err(unsupported("gbnf", "an answer schema next to hermes calls (use --to lark)".into()));
            }
            // Hermes: `<tool_call>` blocks around one JSON object per call, or free text.
            let mut embedder = crate::format::Embedder::default();
            let calls: Vec<Value> = registry
                .iter()
                .filter(|t| match &options.choice {
                    ToolChoice::Named(n) => n == t.spec().name(),
                    _ => true,
                })
                .map(|t| json!({"type": "object", "properties": {"name": {"const": t.spec().name()},
                    "arguments": embedder.embed(t.spec().name(), t.spec().parameters())},
                    "required": ["name", "arguments"], "additionalProperties": false}))
                .collect();
            let schema = normalize(&embedder.finish(json!({"anyOf": calls})));
            check_gbnf(&schema)?;
            let inner = to_gbnf(&schema).map_err(|e| unsupported("gbnf", format!("llama.cpp's converter: {e}")))?;
            let mut out = String::from("# proviso: hermes tool calls\n");
            let calls_rule = if options.max_calls <= 1 {
                "call".to_owned()
            } else {
                format!("call (\"\\n\" call){{0,{}}}", options.max_calls - 1)
            };
            match &options.choice {
                ToolChoice::Auto => out.push_str("root ::= calls | text\ntext ::= [^<\\x00-\\x20] [^\\x00]*\n"),
                _ => out.push_str("root ::= calls\n"),
            }
            out.push_str(&format!("calls ::= {calls_rule}\n"));
            out.push_str("call ::= \"<tool_call>\\n\" call-root \"\\n</tool_call>\"\n");
            out.push_str(&prefix_rules(&inner, "call-"));
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_gbnf(_: &Value) -> Result<String, GbnfError> {
        Ok("root ::= object\nobject ::= \"{\" space \"}\"\nspace ::= \" \"?\n".into())
    }

    #[test]
    fn gbnf_refuses_what_llama_cpp_cannot_enforce() {
        for (schema, named) in [
            (json!({"type": "array", "uniqueItems": true}), "uniqueItems"),
            (json!({"not": {"type": "string"}}), "not"),
            (
                json!({"type": "string", "format": "email"}),
                "format: email",
            ),
            (json!({"type": "number", "multipleOf": 2}), "multipleOf"),
        ] {
            let e = export_schema(&schema, Dialect::Gbnf, false, &no_gbnf).unwrap_err();
            assert!(e.to_string().contains(named), "{e}");
        }
        assert!(export_schema(
            &json!({"type": "string", "format": "date"}),
            Dialect::Gbnf,
            false,
            &no_gbnf
        )
        .is_ok());
    }

    #[test]
    fn strict_mode_rules() {
        let ok = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false});
        assert!(check_strict(&ok).is_ok());
        let open =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert!(check_strict(&open)
            .unwrap_err()
            .to_string()
            .contains("additionalProperties"));
        let optional = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert!(check_strict(&optional)
            .unwrap_err()
            .to_string()
            .contains("`a`"));
        assert!(check_strict(&json!({"type": "array", "uniqueItems": true}))
            .unwrap_err()
            .to_string()
            .contains("uniqueItems"));
    }

    #[test]
    fn normalize_keeps_property_names_and_drops_extensions() {
        let schema = json!({"type": "object", "x-proviso": {}, "properties": {"x-y": {"type": "string", "x-note": 1}}});
        let n = normalize(&schema);
        assert!(n.get("x-proviso").is_none());
        assert!(n["properties"].get("x-y").is_some());
        assert!(n["properties"]["x-y"].get("x-note").is_none());
        assert_eq!(n["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }

    #[test]
    fn prefixing_renames_references_not_literals() {
        let g =
            "root ::= object\nobject ::= \"{\" space \"object\" [a-z] \"}\"\nspace ::= \" \"?\n";
        let p = prefix_rules(g, "call-");
        assert!(p.contains("call-root ::= call-object"), "{p}");
        assert!(p.contains("\"object\""), "{p}");
        assert!(p.contains("call-space"), "{p}");
    }
}
