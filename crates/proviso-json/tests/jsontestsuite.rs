//! JSONTestSuite (`y_` must be accepted, `n_` rejected, `i_` decided here) run against the
//! strict parser. The data lives in `../shared/data/jsontestsuite/test_parsing` beside the
//! project; `PROVISO_SHARED` overrides the location of `shared/`.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;

use proviso_json::{parse, DuplicateKeys, ParseOptions};

fn suite_dir() -> PathBuf {
    let shared = std::env::var_os("PROVISO_SHARED").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        PathBuf::from,
    );
    let dir = shared.join("data/jsontestsuite/test_parsing");
    assert!(
        dir.is_dir(),
        "JSONTestSuite not found at {}; set PROVISO_SHARED to the shared/ folder",
        dir.display()
    );
    dir
}

fn cases(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<_> = std::fs::read_dir(suite_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    cases.sort();
    cases
}

/// RFC 8259 grammar mode: duplicate keys are grammatical, so they are kept (last wins) here.
fn grammar_only() -> ParseOptions {
    ParseOptions::default().duplicate_keys(DuplicateKeys::KeepLast)
}

#[test]
fn every_y_case_is_accepted() {
    let cases = cases("y_");
    assert_eq!(cases.len(), 95);
    let failed: Vec<_> = cases
        .iter()
        .filter_map(|(name, bytes)| {
            parse(bytes, &grammar_only())
                .err()
                .map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "rejected y_ cases:\n{}",
        failed.join("\n")
    );
}

/// At the contract boundary (the default options) duplicate keys are rejected: RFC 8259
/// leaves their meaning open, so two consumers could read different values. Exactly the two
/// `y_` cases with duplicate keys are affected, and they are rejected with `duplicate_key`.
#[test]
fn the_contract_default_differs_from_the_grammar_only_on_duplicate_keys() {
    let rejected: Vec<_> = cases("y_")
        .iter()
        .filter_map(|(name, bytes)| {
            parse(bytes, &ParseOptions::default())
                .err()
                .map(|e| (name.clone(), e.code()))
        })
        .collect();
    assert_eq!(
        rejected,
        vec![
            ("y_object_duplicated_key.json".to_owned(), "duplicate_key"),
            (
                "y_object_duplicated_key_and_value.json".to_owned(),
                "duplicate_key"
            ),
        ]
    );
}

#[test]
fn every_n_case_is_rejected() {
    let cases = cases("n_");
    assert_eq!(cases.len(), 188);
    let accepted: Vec<_> = cases
        .iter()
        .filter(|(_, bytes)| parse(bytes, &grammar_only()).is_ok())
        .map(|(name, _)| name.clone())
        .collect();
    assert!(accepted.is_empty(), "accepted n_ cases: {accepted:?}");
}

/// The decision for every implementation-defined case, with the code a rejection carries.
/// `None` means accepted. The reasoning: proviso sits at a contract boundary, so anything a
/// conforming producer may not send (invalid UTF-8, lone surrogates, a BOM, UTF-16) is
/// rejected, while numbers that are valid JSON grammar are accepted and kept exactly, since
/// their text is preserved and nothing is rounded.
const I_DECISIONS: &[(&str, Option<&str>)] = &[
    ("i_number_double_huge_neg_exp.json", None),
    ("i_number_huge_exp.json", None),
    ("i_number_neg_int_huge_exp.json", None),
    ("i_number_pos_double_huge_exp.json", None),
    ("i_number_real_neg_overflow.json", None),
    ("i_number_real_pos_overflow.json", None),
    ("i_number_real_underflow.json", None),
    ("i_number_too_big_neg_int.json", None),
    ("i_number_too_big_pos_int.json", None),
    ("i_number_very_big_negative_int.json", None),
    (
        "i_object_key_lone_2nd_surrogate.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_1st_surrogate_but_2nd_missing.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_1st_valid_surrogate_2nd_invalid.json",
        Some("lone_surrogate"),
    ),
    ("i_string_UTF-16LE_with_BOM.json", Some("invalid_utf8")),
    ("i_string_UTF-8_invalid_sequence.json", Some("invalid_utf8")),
    ("i_string_UTF8_surrogate_U+D800.json", Some("invalid_utf8")),
    (
        "i_string_incomplete_surrogate_and_escape_valid.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_incomplete_surrogate_pair.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_incomplete_surrogates_escape_valid.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_invalid_lonely_surrogate.json",
        Some("lone_surrogate"),
    ),
    ("i_string_invalid_surrogate.json", Some("lone_surrogate")),
    ("i_string_invalid_utf-8.json", Some("invalid_utf8")),
    (
        "i_string_inverted_surrogates_U+1D11E.json",
        Some("lone_surrogate"),
    ),
    ("i_string_iso_latin_1.json", Some("invalid_utf8")),
    (
        "i_string_lone_second_surrogate.json",
        Some("lone_surrogate"),
    ),
    (
        "i_string_lone_utf8_continuation_byte.json",
        Some("invalid_utf8"),
    ),
    ("i_string_not_in_unicode_range.json", Some("invalid_utf8")),
    (
        "i_string_overlong_sequence_2_bytes.json",
        Some("invalid_utf8"),
    ),
    (
        "i_string_overlong_sequence_6_bytes.json",
        Some("invalid_utf8"),
    ),
    (
        "i_string_overlong_sequence_6_bytes_null.json",
        Some("invalid_utf8"),
    ),
    ("i_string_truncated-utf-8.json", Some("invalid_utf8")),
    ("i_string_utf16BE_no_BOM.json", Some("invalid_utf8")),
    ("i_string_utf16LE_no_BOM.json", Some("invalid_utf8")),
    (
        "i_structure_500_nested_arrays.json",
        Some("nesting_too_deep"),
    ),
    (
        "i_structure_UTF-8_BOM_empty_object.json",
        Some("byte_order_mark"),
    ),
];

#[test]
fn every_i_case_matches_its_documented_decision() {
    let cases = cases("i_");
    assert_eq!(
        cases.len(),
        I_DECISIONS.len(),
        "an i_ case is missing from the decision table"
    );
    let mut wrong = Vec::new();
    for (name, bytes) in &cases {
        let expected = I_DECISIONS
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} has no documented decision"))
            .1;
        let got = parse(bytes, &ParseOptions::default())
            .err()
            .map(|e| e.code());
        if got != expected {
            wrong.push(format!("{name}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn huge_integers_keep_their_exact_value() {
    let value = parse(
        b"[-237462374673276894279832749832423479823246327846]",
        &ParseOptions::default(),
    )
    .unwrap();
    assert_eq!(
        value[0].to_string(),
        "-237462374673276894279832749832423479823246327846"
    );
}
