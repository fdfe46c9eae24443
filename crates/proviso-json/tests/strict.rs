//! Each strictness rule of the parser, with the code and the position it reports.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use proviso_json::{parse_str, ParseErrorKind, ParseOptions};

fn code_at(text: &str) -> (&'static str, usize, usize) {
    let e = parse_str(text, &ParseOptions::default()).unwrap_err();
    (e.code(), e.position().line, e.position().column)
}

#[test]
fn codes_and_positions() {
    assert_eq!(code_at("{\"a\": 1"), ("unexpected_end", 1, 8));
    assert_eq!(code_at("{\"a\": NaN}"), ("invalid_number", 1, 7));
    assert_eq!(code_at("[-Infinity]"), ("invalid_number", 1, 2));
    assert_eq!(code_at("[+1]"), ("invalid_number", 1, 2));
    assert_eq!(code_at("[01]"), ("invalid_number", 1, 2));
    assert_eq!(code_at("{} {}"), ("trailing_content", 1, 4));
    assert_eq!(code_at("{}\nx"), ("trailing_content", 2, 1));
    assert_eq!(code_at("  \n "), ("empty_input", 2, 2));
    assert_eq!(code_at("[1,]"), ("syntax_error", 1, 4));
    assert_eq!(code_at("[\"\\ud800\"]"), ("lone_surrogate", 1, 9));
    assert_eq!(code_at("\u{feff}{}"), ("byte_order_mark", 1, 1));
}

#[test]
fn duplicate_keys_report_both_positions_and_the_object_pointer() {
    let text = "{\"outer\": [1, {\"k\": 1,\n  \"k\": 2}]}";
    let e = parse_str(text, &ParseOptions::default()).unwrap_err();
    let ParseErrorKind::DuplicateKey {
        key,
        pointer,
        first,
    } = e.kind()
    else {
        panic!("expected a duplicate key, got {e:?}")
    };
    assert_eq!(key, "k");
    assert_eq!(pointer, "/outer/1");
    assert_eq!((first.line, first.column), (1, 16));
    assert_eq!((e.position().line, e.position().column), (2, 3));
}

#[test]
fn size_and_depth_are_bounded() {
    let options = ParseOptions::default().max_bytes(8).max_depth(3);
    let e = parse_str("[1, 2, 3, 4]", &options).unwrap_err();
    assert_eq!(e.code(), "input_too_large");
    assert!(parse_str("[[[]]]", &options).is_ok());
    assert_eq!(
        parse_str("[[[[]]]]", &options).unwrap_err().code(),
        "nesting_too_deep"
    );
    assert_eq!(
        parse_str(&"[".repeat(100_000), &ParseOptions::default())
            .unwrap_err()
            .code(),
        "nesting_too_deep"
    );
}

#[test]
fn invalid_utf8_is_located() {
    let e = proviso_json::parse(b"[\"ab\xff\"]", &ParseOptions::default()).unwrap_err();
    assert_eq!((e.code(), e.position().column), ("invalid_utf8", 5));
}

#[test]
fn numbers_are_not_coerced() {
    let v = parse_str(
        r#"{"a": "750", "b": true, "c": 750.0}"#,
        &ParseOptions::default(),
    )
    .unwrap();
    assert!(v["a"].is_string());
    assert!(v["b"].is_boolean());
    assert_eq!(v["c"].to_string(), "750.0");
}
