//! The strict parser must never panic, and whatever it accepts must be JSON that serde_json
//! accepts too and that round-trips through serialization.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proviso_json::{parse, DuplicateKeys, ParseOptions};

fuzz_target!(|data: &[u8]| {
    let strict = parse(data, &ParseOptions::default());
    let lenient = parse(
        data,
        &ParseOptions::default().duplicate_keys(DuplicateKeys::KeepLast),
    );
    if let Ok(value) = &strict {
        // Whatever the strict mode accepts, the grammar-only mode accepts identically.
        assert_eq!(lenient.as_ref().ok(), Some(value));
        let text = serde_json::to_string(value).unwrap();
        let again = parse(text.as_bytes(), &ParseOptions::default()).unwrap();
        assert_eq!(&again, value);
    }
    if let Err(e) = &strict {
        // Positions always lie inside the input (or just past its end).
        assert!(e.position().offset <= data.len());
        assert!(!e.code().is_empty());
    }
});
