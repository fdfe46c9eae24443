//! The real sentence encoder (fetched into the cache on first use): what it is used for is
//! telling lines that say what a question asks in other words from lines about something
//! else, and its batching must not change what it says.

#![allow(clippy::unwrap_used)]

use proviso_embed::{dot, Encoder};

fn load() -> Encoder {
    let path = proviso_model::ensure(&proviso_model::ENCODER_MODEL, &mut |_| {}).unwrap();
    Encoder::from_zip(&path).unwrap()
}

#[test]
fn a_paraphrase_is_closer_than_a_line_about_something_else_and_batching_changes_nothing() {
    let encoder = load();
    let question = "How much is a day pass covering both zones?";
    let lines = [
        "An adult day ticket for Zones A and B costs £7.70.",
        "Dogs on a lead travel free; other pets must be in a closed carrier.",
        "Is my dog allowed on the tram?",
    ];
    let scores = encoder.similarities(question, &lines).unwrap();
    assert!(scores[0] > scores[1] + 0.2, "{scores:?}");
    // The pet rule is closer to a question about dogs than the fares are.
    let dog = encoder.similarities(lines[2], &lines[..2]).unwrap();
    assert!(dog[1] > dog[0], "{dog:?}");
    // Unit length: the dot product is the cosine, and a text is closest to itself.
    let vectors = encoder.embed(&lines).unwrap();
    for v in &vectors {
        assert!((dot(v, v) - 1.0).abs() < 1e-4);
    }
    // Encoded alone (no padding) or in a batch of longer texts, a text says the same.
    let fresh = load();
    let alone = fresh.embed(&[lines[2]]).unwrap();
    assert!(dot(&alone[0], &vectors[2]) > 0.9999);
}

#[test]
fn an_archive_without_the_model_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("proviso-embed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("empty.zip");
    std::fs::write(&path, b"not a zip").unwrap();
    let error = Encoder::from_zip(&path).unwrap_err().to_string();
    assert!(error.contains("empty.zip"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}
