//! The whole gate pipeline on the two typical inputs, each next to a baseline measured in the
//! same run: `serde_json::from_slice::<Value>` of the same bytes, which is the least any
//! consumer of JSON pays. Results and ratios are recorded in BENCHMARKS.md.
//!
//! Run: `cargo bench -p proviso-contract --bench pipeline`

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use proviso_contract::{Contract, SourceDocument, SourceStore, KA_ANSWER_V1};
use serde_json::{json, Value};

/// An envelope contract with one declared tool, like a typical agent step.
fn tool_contract() -> Contract {
    Contract::from_document(&json!({
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "intent": {"const": "tool_request"},
            "tool": {"enum": ["search_trials", "get_arm", "get_document"]},
            "arguments": {"type": "object"}
        },
        "required": ["reasoning", "intent", "tool", "arguments"],
        "additionalProperties": false,
        "x-proviso": {
            "output": "envelope",
            "tools": {
                "get_arm": {"class": "read", "parameters": {
                    "type": "object",
                    "properties": {
                        "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                        "arm_label": {"type": "string", "maxLength": 64}
                    },
                    "required": ["trial_id"],
                    "additionalProperties": false
                }},
                "search_trials": {"class": "read"},
                "get_document": {"class": "read"}
            }
        }
    }))
    .unwrap()
    .build()
    .unwrap()
}

/// A 200-byte tool call.
fn tool_call() -> Vec<u8> {
    let text = json!({
        "reasoning": "The user asks which arms of the trial were terminated; read the arm first.",
        "intent": "tool_request",
        "tool": "get_arm",
        "arguments": {"trial_id": "NCT04123456", "arm_label": "Arm B: placebo"}
    })
    .to_string();
    text.into_bytes()
}

/// A ~20 KB cited answer over a synthetic 600-line policy, and its source store.
fn cited_answer() -> (Contract, Vec<u8>) {
    let lines: Vec<String> = (1..=600)
        .map(|i| format!("Clause {i}: the fictional lodging limit in zone {i} is {} yuan per room per night.", 500 + i))
        .collect();
    let mut store = SourceStore::new();
    store
        .insert(SourceDocument::new("policy", "v2", true, &lines.join("\n")))
        .unwrap();
    let citations: Vec<Value> = (0..80)
        .map(|k| {
            let start = 1 + k * 5;
            json!({
                "source_id": "policy", "version": "v2", "line_start": start, "line_end": start + 1,
                "quote": lines[start - 1..=start].join("\n")
            })
        })
        .collect();
    let answer = json!({
        "schema_version": "ka-answer-v1",
        "status": "answered",
        "answer": "The limit in zone 1 is 501 yuan per room per night.",
        "amount_yuan": 501,
        "citations": citations,
        "reason_code": null
    });
    let document: Value = serde_json::from_str(KA_ANSWER_V1).unwrap();
    let contract = Contract::from_document(&document)
        .unwrap()
        .sources(Arc::new(store))
        .build()
        .unwrap();
    (contract, answer.to_string().into_bytes())
}

fn pipeline(c: &mut Criterion) {
    let contract = tool_contract();
    let call = tool_call();
    assert!(contract.check_text(&call).accepted());
    let mut group = c.benchmark_group("tool_call_200B");
    group.throughput(Throughput::Elements(1));
    group.bench_function("serde_json_parse_baseline", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&call)).unwrap())
    });
    group.bench_function("verdict", |b| {
        b.iter(|| contract.check_text(black_box(&call)))
    });
    group.finish();

    let (contract, answer) = cited_answer();
    assert!(
        contract.check_text(&answer).accepted(),
        "{:?}",
        contract.check_text(&answer)
    );
    let mut group = c.benchmark_group("cited_answer_20KB");
    group.throughput(Throughput::Elements(1));
    group.bench_function("serde_json_parse_baseline", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&answer)).unwrap())
    });
    group.bench_function("verdict", |b| {
        b.iter(|| contract.check_text(black_box(&answer)))
    });
    group.finish();
    eprintln!(
        "tool call: {} bytes; cited answer: {} bytes",
        call.len(),
        answer.len()
    );
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
