//! The whole gate pipeline, as raw text and as an envelope, on the worked example's contract
//! with its sources: it must never panic, and a verdict is either an intent or a rejection
//! that names a gate.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use proviso_contract::{Contract, SourceDocument, SourceStore, KA_ANSWER_V1};

fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "travel-policy",
                "v2",
                true,
                "Fictional Beijing lodging policy; amounts are per room per night.\nEffective from 2026-01-01; replaces travel-v1.\nThe lodging limit is 750 yuan.\n",
            ))
            .unwrap();
        let document = serde_json::from_str(KA_ANSWER_V1).unwrap();
        Contract::from_document(&document)
            .unwrap()
            .sources(Arc::new(store))
            .build()
            .unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    for verdict in [contract().check_text(data), contract().check_envelope(data)] {
        match verdict.rejection() {
            Some(rejection) => assert!(!rejection.code().is_empty()),
            None => assert!(verdict.intent().is_some()),
        }
        serde_json::to_string(&verdict).unwrap();
    }
});
