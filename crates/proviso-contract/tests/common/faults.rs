//! The fault table (`faults.json`) read once, for every test that runs it: the contract's
//! own test, and the judge's, which runs each row through every entry point. A row is a
//! deliberately broken output; its input names the bytes, its `expect` the gate and code.

// Each including test uses its own part of this module.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use proviso_contract::{Contract, SourceStore, KA_ANSWER_V1};
use serde_json::{json, Value};

/// The table's rows.
pub(crate) fn cases() -> Vec<Value> {
    let table: Value = serde_json::from_str(include_str!("../faults.json")).unwrap();
    table["cases"].as_array().unwrap().clone()
}

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn sources() -> Arc<SourceStore> {
    let dir = root().join("corpora/travel-policy");
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    Arc::new(
        SourceStore::from_manifest(&manifest, |file| std::fs::read_to_string(dir.join(file)))
            .unwrap(),
    )
}

pub(crate) fn contract() -> Contract {
    let document: Value = serde_json::from_str(KA_ANSWER_V1).unwrap();
    Contract::from_document(&document)
        .unwrap()
        .sources(sources())
        .build()
        .unwrap()
}

pub(crate) fn answered() -> Value {
    let text = std::fs::read_to_string(root().join("examples/outputs/answered.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub(crate) fn envelope(content: &Value, finish_reason: &str) -> Vec<u8> {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason
        }]
    })
    .to_string()
    .into_bytes()
}

/// The bytes a case's input describes, and whether they are an envelope.
pub(crate) fn case_input(input: &Value) -> (Vec<u8>, bool) {
    if let Some(raw) = input.get("raw_envelope") {
        return (raw.to_string().into_bytes(), true);
    }
    if let Some(text) = input.get("text").and_then(Value::as_str) {
        let mut text = text.replace("{answered}", &answered().to_string());
        if let Some([from, to]) = input
            .get("replace")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            let (from, to) = (from.as_str().unwrap(), to.as_str().unwrap());
            assert!(text.contains(from), "`{from}` is not in the text");
            text = text.replace(from, to);
        }
        let cut = input.get("truncate").and_then(Value::as_u64).unwrap_or(0) as usize;
        text.truncate(text.len() - cut);
        return (text.into_bytes(), false);
    }
    let mut value = input.get("value").cloned().unwrap_or_else(answered);
    for (pointer, new) in input
        .get("set")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut value
        } else {
            value.pointer_mut(parent).unwrap()
        };
        target[key] = new.clone();
    }
    for pointer in input
        .get("remove")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = pointer.as_str().unwrap().trim_start_matches('/');
        assert!(
            value.as_object_mut().unwrap().shift_remove(key).is_some(),
            "{key} is absent"
        );
    }
    match input.get("envelope") {
        Some(finish) => {
            let mut bytes: Value =
                serde_json::from_slice(&envelope(&json!(value.to_string()), "stop")).unwrap();
            bytes["choices"][0]["finish_reason"] = finish.clone();
            (bytes.to_string().into_bytes(), true)
        }
        None => (value.to_string().into_bytes(), false),
    }
}
