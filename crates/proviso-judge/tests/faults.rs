//! The fault table (`proviso-contract/tests/faults.json`) through every entry point that
//! judges an output, with one expected gate and code per row:
//!
//! - the contract itself (`Contract::check_text`, `Contract::check_envelope`);
//! - the judge's local path (`Judge::local`, what the local model's backend calls on a
//!   finished output) and its upstream path (`Judge::envelope`, what the gateway calls on an
//!   upstream's response), under the response schema's contract;
//! - the same two paths under tools with the answer contract, with calls written in the
//!   text (`native: false`) and as an upstream's native `tool_calls` (`native: true`);
//! - the tool gate alone (`ToolGate::check` with the typed `Finish`, what the harness and
//!   the MCP service call, and `ToolGate::check_envelope`), for the transport rows, the only
//!   gate it owns for a text answer.
//!
//! A text row is also sent wrapped in an envelope that ended with `stop`, so the upstream
//! paths see every row. A cut or looped output is not a refusal on the judge's paths (the
//! server returns it as a fragment with its finish reason); it is read as the code the
//! contract gives it, `incomplete_response` or `repetition`.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proviso_contract::{Code, Finish, Gate, IntentClass, Verdict};
use proviso_judge::{Ended, Judge, Refusal};
use proviso_tools::{CallFormat, Policy, Registry, ToolChoice, ToolGate, ToolSpec, Usage};
use serde_json::{json, Value};

#[path = "../../proviso-contract/tests/common/faults.rs"]
mod faults;

/// One entry point's reading of a row: the gate and code, or `None` when it accepted.
type Reading = Option<(Gate, Code)>;

fn reading(verdict: &Verdict) -> Reading {
    verdict.rejection().map(|r| (r.gate(), r.code().clone()))
}

fn refusal(r: Result<(), Refusal>) -> Reading {
    r.err().map(|r| (r.gate, r.code))
}

fn ended(r: Result<Ended, Refusal>) -> Reading {
    match r {
        Err(r) => Some((r.gate, r.code)),
        Ok(Ended::Cut(_)) => Some((Gate::Transport, Code::IncompleteResponse)),
        Ok(Ended::Looped(_)) => Some((Gate::Transport, Code::Repetition)),
        Ok(Ended::Complete(_)) => None,
    }
}

fn gate() -> ToolGate {
    let registry = Registry::new(vec![ToolSpec::new(
        "lookup",
        "Looks a term up.",
        IntentClass::Read,
        json!({"type": "object", "properties": {"term": {"type": "string"}},
               "required": ["term"], "additionalProperties": false}),
    )])
    .unwrap();
    ToolGate::new(Arc::new(registry), CallFormat::Hermes, Policy::default())
}

fn tools(native: bool) -> Judge {
    Judge::Tools {
        gate: Box::new(gate()),
        native,
        answer: Some(Box::new(faults::contract())),
        choice: ToolChoice::Auto,
        parallel: true,
    }
}

fn id(i: usize) -> String {
    format!("call_{i}")
}

/// A text output as an upstream's envelope that ended naturally.
fn wrapped(text: &[u8]) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": String::from_utf8_lossy(text)}}]})
}

/// What each entry point makes of one row.
fn readings(input: &Value) -> Vec<(&'static str, Reading)> {
    let (bytes, is_envelope) = faults::case_input(input);
    let contract = Judge::Contract(Box::new(faults::contract()));
    let mut out = Vec::new();
    if is_envelope {
        let envelope: Value = serde_json::from_slice(&bytes).unwrap();
        out.push((
            "Contract::check_envelope",
            reading(&faults::contract().check_envelope(&bytes)),
        ));
        out.push((
            "Judge::envelope (contract)",
            ended(contract.envelope(&envelope, &mut id)),
        ));
        out.push((
            "Judge::envelope (tools)",
            ended(tools(false).envelope(&envelope, &mut id)),
        ));
        out.push((
            "Judge::envelope (native tools)",
            ended(tools(true).envelope(&envelope, &mut id)),
        ));
        // The tool gate alone owns only the transport gate of a text answer.
        if input.get("envelope").is_some() || input.get("raw_envelope").is_some() {
            let read = reading(&gate().check_envelope(&bytes, &Usage::default()));
            if read.as_ref().is_none_or(|(g, _)| *g == Gate::Transport) {
                out.push(("ToolGate::check_envelope", read));
            }
            // The harness and the MCP service hand the gate a typed end and the text.
            if let Some(reason) = input.get("envelope") {
                let finish = Finish::read(reason.as_str());
                let text = envelope["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                out.push((
                    "ToolGate::check",
                    reading(&gate().check(&text, finish, &Usage::default())),
                ));
            }
        }
    } else {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        out.push((
            "Contract::check_text",
            reading(&faults::contract().check_text(&bytes)),
        ));
        out.push((
            "Judge::local (contract)",
            refusal(contract.local(&text, &mut id).map(drop)),
        ));
        out.push((
            "Judge::local (tools)",
            refusal(tools(false).local(&text, &mut id).map(drop)),
        ));
        let envelope = wrapped(&bytes);
        out.push((
            "Contract::check_envelope (wrapped)",
            reading(&faults::contract().check_envelope(envelope.to_string().as_bytes())),
        ));
        out.push((
            "Judge::envelope (contract, wrapped)",
            ended(contract.envelope(&envelope, &mut id)),
        ));
        out.push((
            "Judge::envelope (tools, wrapped)",
            ended(tools(false).envelope(&envelope, &mut id)),
        ));
        out.push((
            "Judge::envelope (native tools, wrapped)",
            ended(tools(true).envelope(&envelope, &mut id)),
        ));
    }
    out
}

#[test]
fn every_row_of_the_fault_table_gets_one_code_from_every_entry_point() {
    let cases = faults::cases();
    assert!(cases.len() >= 20, "the table lost cases");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let want = (
            case["expect"]["gate"].clone(),
            case["expect"]["code"].as_str().unwrap().to_owned(),
        );
        let readings = readings(&case["input"]);
        assert!(readings.len() >= 2, "{name}: too few entry points");
        for (entry, reading) in readings {
            checked += 1;
            let got = reading.map(|(g, c)| (json!(g), c.as_str().to_owned()));
            if got.as_ref() != Some(&want) {
                failures.push(format!("{name}: {entry} gave {got:?}, not {want:?}"));
            }
        }
    }
    assert!(checked >= 4 * cases.len(), "only {checked} readings");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_reference_answer_passes_every_entry_point() {
    let answered = faults::answered().to_string();
    for (entry, reading) in readings(&json!({"text": answered})) {
        assert_eq!(reading, None, "{entry}");
    }
}
