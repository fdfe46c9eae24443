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

/// Returns the byte offset where the value at RFC 6901 `pointer` starts, in text that is a
/// valid JSON document. The empty pointer is the whole document.
pub(crate) fn pointer(input: &[u8], pointer: &str) -> Option<usize> {
    let target: Vec<String> = if pointer.is_empty() {
        Vec::new()
    } else {
        pointer
            .strip_prefix('/')?
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect()
    };
    // The path of the value that starts at the next value token, and for each open
    // container whether it is an array (with its current index) or an object.
    enum Open {
        Array(usize),
        Object,
    }
    let mut open: Vec<Open> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut i = 0;
    let at_value_start = |path: &Vec<String>| *path == target;
    while i < input.len() {
        match input[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b':' => i += 1,
            b'{' | b'[' => {
                if at_value_start(&path) {
                    return Some(i);
                }
                if input[i] == b'[' {
                    open.push(Open::Array(0));
                    path.push("0".to_owned());
                } else {
                    open.push(Open::Object);
                    path.push(String::new());
                }
                i += 1;
            }
            b'}' | b']' => {
                open.pop();
                path.pop();
                i += 1;
            }
            b',' => {
                if let Some(Open::Array(index)) = open.last_mut() {
                    *index += 1;
                    if let Some(last) = path.last_mut() {
                        *last = index.to_string();
                    }
                }
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                let mut raw = Vec::new();
                while i < input.len() && input[i] != b'"' {
                    if input[i] == b'\\' {
                        raw.extend_from_slice(&input[i..(i + 2).min(input.len())]);
                        i += 2;
                    } else {
                        raw.push(input[i]);
                        i += 1;
                    }
                }
                i += 1;
                let mut j = i;
                while j < input.len() && matches!(input[j], b' ' | b'\t' | b'\n' | b'\r') {
                    j += 1;
                }
                if input.get(j) == Some(&b':') {
                    // An object key: decode its escapes through serde_json to compare.
                    let mut quoted = Vec::with_capacity(raw.len() + 2);
                    quoted.push(b'"');
                    quoted.extend_from_slice(&raw);
                    quoted.push(b'"');
                    let key: String = serde_json::from_slice(&quoted).ok()?;
                    if let Some(last) = path.last_mut() {
                        *last = key;
                    }
                } else if at_value_start(&path) {
                    return Some(start);
                }
            }
            _ => {
                // A number or a literal.
                if at_value_start(&path) {
                    return Some(i);
                }
                while i < input.len()
                    && !matches!(input[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    i += 1;
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod pointer_tests {
    use super::pointer;

    #[test]
    fn finds_values_by_pointer() {
        let text = br#"{"a": [10, {"b": "x", "c/d": null}], "e": 1}"#;
        assert_eq!(pointer(text, ""), Some(0));
        assert_eq!(pointer(text, "/a"), Some(6));
        assert_eq!(pointer(text, "/a/0"), Some(7));
        assert_eq!(pointer(text, "/a/1"), Some(11));
        assert_eq!(pointer(text, "/a/1/b"), Some(17));
        assert_eq!(pointer(text, "/a/1/c~1d"), Some(29));
        assert_eq!(pointer(text, "/e"), Some(42));
        assert_eq!(pointer(text, "/zzz"), None);
    }
}
