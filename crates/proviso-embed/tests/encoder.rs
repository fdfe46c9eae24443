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
fn saved_embeddings_are_read_back_and_a_damaged_file_reads_as_none() {
    let dir = std::env::temp_dir().join(format!("proviso-embed-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("encoder.embeddings");
    let encoder = load();
    // Nothing encoded yet: nothing to save.
    assert!(!encoder.save(&path).unwrap());
    let lines = ["Dogs travel free.", "A day ticket costs £7.70."];
    let vectors = encoder.embed(&lines).unwrap();
    assert!(encoder.save(&path).unwrap());
    // Saved once: nothing new to save.
    assert!(!encoder.save(&path).unwrap());
    let fresh = load();
    assert_eq!(fresh.load(&path), 2);
    // Read back, the same vectors, and nothing new to save.
    assert_eq!(fresh.embed(&lines).unwrap(), vectors);
    assert!(!fresh.save(&path).unwrap());
    // A file cut short, or of another kind, reads as none.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert_eq!(load().load(&path), 0);
    std::fs::write(&path, b"not embeddings").unwrap();
    assert_eq!(load().load(&path), 0);
    assert_eq!(load().load(&dir.join("missing")), 0);
    std::fs::remove_dir_all(&dir).unwrap();
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

/// The BERT layers are proviso's own (`bert.rs`), written after candle-transformers' model:
/// on 300 lines of three document sets they gave the same embeddings, bit for bit, and these
/// coordinates were read from both.
#[test]
fn the_encoder_computes_what_the_reference_bert_does() {
    let encoder = load();
    let cases: [(&str, [f32; 6]); 2] = [
        (
            "How much is a day pass covering both zones?",
            [
                0.109_298_71,
                0.036_248_896,
                -0.000_615_275_2,
                0.042_495_154,
                0.003_649_037_8,
                -0.068_571_605,
            ],
        ),
        (
            "Dogs on a lead travel free; other pets must be in a closed carrier.",
            [
                0.040_057_268,
                -0.006_535_094,
                0.019_163_543,
                0.086_520_08,
                -0.028_025_666,
                0.075_706_735,
            ],
        ),
    ];
    for (text, expected) in cases {
        let vector = encoder.embed(&[text]).unwrap().remove(0);
        for (got, want) in vector.iter().zip(expected) {
            assert!((got - want).abs() < 1e-5, "{text}: {:?}", &vector[..6]);
        }
    }
}
