//! Every call format's parser and the tool gates, on arbitrary text: they must never panic,
//! every verdict names a gate or carries an intent, and a pythonic call list that parses must
//! survive being written back and parsed again unchanged.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use proviso_contract::IntentClass;
use proviso_tools::format::pythonic;
use proviso_tools::{CallFormat, Finish, Policy, Registry, ToolGate, ToolSpec, Usage};

fn registry() -> &'static Arc<Registry> {
    static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Arc::new(
            Registry::new(vec![ToolSpec::new(
                "get_arm",
                "Reads an arm.",
                IntentClass::Read,
                serde_json::json!({"type": "object", "properties": {
                    "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                    "arm_label": {"type": "string"}},
                    "required": ["trial_id"], "additionalProperties": false}),
            )])
            .unwrap(),
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in CallFormat::ALL {
        let gate = ToolGate::new(registry().clone(), format, Policy::default());
        let verdict = gate.check(text, Finish::Stop, &Usage::default());
        assert!(verdict.accepted() || verdict.gate().is_some());
    }
    if let Ok(calls) = pythonic::parse_calls(text) {
        let written = format!(
            "[{}]",
            calls
                .iter()
                .map(|c| format!(
                    "{}({})",
                    c.name,
                    c.arguments
                        .iter()
                        .map(|(k, v)| format!("{k}={}", pythonic::literal(v)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let again = pythonic::parse_calls(&written).unwrap();
        assert_eq!(again, calls, "{written}");
    }
});
