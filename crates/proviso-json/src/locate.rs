//! Locating object keys in text that serde_json has already accepted up to the point of
//! interest.
//!
//! This is not a parser: it relies on the prefix being valid JSON, where a string token
//! followed (after whitespace) by `:` is always an object key. It exists because serde's
//! visitor API does not expose byte offsets, and a duplicate-key error must name both places.

/// Returns the byte offset of the opening quote of the `n`-th object key (0-based, in
/// document order), if the text has that many keys.
pub(crate) fn nth_key(input: &[u8], n: usize) -> Option<usize> {
    let mut seen = 0;
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < input.len() && input[i] != b'"' {
            // Skip the escaped character so that `\"` does not end the string.
            i += if input[i] == b'\\' { 2 } else { 1 };
        }
        i += 1;
        let mut j = i;
        while j < input.len() && matches!(input[j], b' ' | b'\t' | b'\n' | b'\r') {
            j += 1;
        }
        if input.get(j) == Some(&b':') {
            if seen == n {
                return Some(start);
            }
            seen += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::nth_key;

    #[test]
    fn finds_keys_in_document_order_and_skips_values_and_escapes() {
        let text = br#"{"a": "x:\"y", "b": {"c": 1}, "d" : 2}"#;
        assert_eq!(nth_key(text, 0), Some(1));
        assert_eq!(nth_key(text, 1), Some(15));
        assert_eq!(nth_key(text, 2), Some(21));
        assert_eq!(nth_key(text, 3), Some(30));
        assert_eq!(nth_key(text, 4), None);
    }
}
