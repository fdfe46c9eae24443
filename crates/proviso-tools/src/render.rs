//! The model-facing tool text, derived from the registry. It goes into the system message,
//! which the model's chat template then renders, so the model reads exactly the declarations
//! the grammar and the gates enforce.

use std::fmt::Write as _;

use proviso_contract::IntentClass;
use serde_json::{json, Map, Value};

use crate::format::{pythonic, CallFormat, GrammarOptions, ToolChoice};
use crate::registry::{Registry, ToolSpec};

fn class_text(class: IntentClass) -> &'static str {
    match class {
        IntentClass::Read => "reads data and changes nothing",
        IntentClass::Compute => "computes from its arguments and changes nothing",
        IntentClass::Mutate => "changes stored data",
        IntentClass::Submit => "sends something outside this system; it cannot be undone",
    }
}

fn type_text(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return format!(
            "one of {}",
            values
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut text = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any value".into(),
    };
    if let Some(items) = schema.get("items") {
        text = format!("{text} of {}", type_text(items));
    }
    for (key, label) in [
        ("pattern", "pattern"),
        ("format", "format"),
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("maxLength", "at most characters:"),
        ("maxItems", "at most items:"),
    ] {
        if let Some(v) = schema.get(key) {
            let shown = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let _ = write!(text, ", {label} {shown}");
        }
    }
    text
}

/// One tool's description for the model.
fn describe(spec: &ToolSpec, out: &mut String) {
    let _ = writeln!(out, "### {}", spec.name());
    if !spec.description().is_empty() {
        let _ = writeln!(out, "{}", spec.description().trim());
    }
    let _ = writeln!(out, "When it runs: it {}.", class_text(spec.class()));
    if let Some(effects) = spec.effects_text() {
        let _ = writeln!(out, "Effects: {}", effects.trim());
    }
    let properties = spec
        .parameters()
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if properties.is_empty() {
        let _ = writeln!(out, "Arguments: none.");
    } else {
        let _ = writeln!(out, "Arguments:");
        for (name, required) in spec.arguments() {
            let schema = &properties[name];
            let _ = write!(
                out,
                "- {name} ({}, {})",
                type_text(schema),
                if required { "required" } else { "optional" }
            );
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                let _ = write!(out, ": {}", d.trim());
            }
            out.push('\n');
        }
    }
    out.push('\n');
}

/// How a call to `spec` with `arguments` is written in `format`.
#[must_use]
pub fn write_call(format: CallFormat, name: &str, arguments: &Map<String, Value>) -> String {
    let args = Value::Object(arguments.clone());
    let json = |v: Value| {
        // The same fixed separators the grammar enforces.
        let mut text = serde_json::to_string(&v).unwrap_or_default();
        text = respace(&text);
        text
    };
    match format {
        CallFormat::Envelope => json(
            json!({"reasoning": "...", "intent": "tool_request", "tool": name, "arguments": args}),
        ),
        CallFormat::Hermes => format!(
            "<tool_call>\n{}\n</tool_call>",
            json(json!({"name": name, "arguments": args}))
        ),
        CallFormat::Llama3 => json(json!({"name": name, "parameters": args})),
        CallFormat::Pythonic => format!(
            "[{name}({})]",
            arguments
                .iter()
                .map(|(k, v)| format!("{k}={}", pythonic::literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Rewrites compact JSON with `", "` and `": "` separators (outside strings).
fn respace(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    for c in compact.chars() {
        out.push(c);
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ',' || c == ':' {
            out.push(' ');
        }
    }
    out
}

/// The system-message text that declares the tools and the call format to the model.
#[must_use]
pub fn instructions(registry: &Registry, format: CallFormat, options: &GrammarOptions) -> String {
    let mut out = String::new();
    if !matches!(options.choice, ToolChoice::None) {
        out.push_str("You can use these tools. A call that does not match its declaration is rejected before anything runs.\n\n");
        for tool in registry.iter() {
            if let ToolChoice::Named(n) = &options.choice {
                if n != tool.spec().name() {
                    continue;
                }
            }
            describe(tool.spec(), &mut out);
        }
    }
    // The example shows the shape only: a 135M model copies example values, so they must
    // not look like real arguments of a real tool.
    let example = (!matches!(options.choice, ToolChoice::None)).then(|| {
        let mut arguments = Map::new();
        arguments.insert("argument_name".into(), json!("value"));
        write_call(format, "tool_name", &arguments)
    });
    match format {
        CallFormat::Envelope => {
            out.push_str("Reply with one JSON object: first \"reasoning\" (short), then \"intent\", which is one of:\n");
            out.push_str("- \"tool_request\" with \"tool\" and \"arguments\", to run a tool;\n");
            out.push_str("- \"final_answer\" with \"answer\", when the tool results answer the question;\n");
            if options.allow_clarification {
                out.push_str("- \"clarification\" with \"question\", when the request is ambiguous;\n");
                out.push_str("- \"abort\" with \"reason\", when the request cannot or should not be done.\n");
            }
        }
        CallFormat::Hermes => out.push_str("To call a tool, write a JSON object with \"name\" and \"arguments\" between <tool_call> and </tool_call>. To answer, write plain text.\n"),
        CallFormat::Llama3 => out.push_str("To call a tool, reply with only a JSON object with \"name\" and \"parameters\". To answer, write plain text.\n"),
        CallFormat::Pythonic => out.push_str("To call a tool, reply with a Python list of calls with keyword arguments. To answer, write plain text.\n"),
    }
    if let Some(example) = example {
        let _ = writeln!(
            out,
            "The shape of a call (use a declared tool's name and arguments):\n{example}"
        );
    }
    out
}

/// Written here, beside [`write_call`], so that the formats do not depend on their rendering.
impl CallFormat {
    /// The text that identifies a call to `name` with `arguments` in this format, as its
    /// grammar makes the model write it (fixed separators; keys in the order given): the
    /// decoder can be told to avoid it, so a call that already ran is not written again.
    #[must_use]
    pub fn call_text(self, name: &str, arguments: &serde_json::Map<String, Value>) -> String {
        let written = write_call(self, name, arguments);
        match self {
            // The envelope writes `reasoning` and `intent` first: the call is the tail.
            Self::Envelope => written
                .find("\"tool\": ")
                .map_or_else(|| written.clone(), |at| written[at..].to_owned()),
            // A Hermes call without its tags; a pythonic call without the list brackets, so
            // it matches in either position of a parallel step.
            Self::Hermes => written
                .trim_start_matches("<tool_call>\n")
                .trim_end_matches("\n</tool_call>")
                .to_owned(),
            Self::Llama3 => written,
            Self::Pythonic => written
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn respace_keeps_strings() {
        assert_eq!(
            respace(r#"{"a":"x,y: \"z\"","b":[1,2]}"#),
            r#"{"a": "x,y: \"z\"", "b": [1, 2]}"#
        );
    }
}
