//! Exact integer values of JSON numbers.
//!
//! JSON Schema counts `750.0` and `7.5e2` as integers, because it tests the mathematical
//! value. A consumer that stores an integer must get 750 from them, and must never get a
//! value from a number that only *approximates* an integer.

use serde_json::Number;

/// An integer read exactly from a JSON number's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExactInteger(pub i128);

/// Returns the exact integer value of `n`, or `None` when `n` has a fractional part or does
/// not fit in an `i128`. `750`, `750.0`, `7.5e2` and `75000e-2` all give 750.
#[must_use]
pub fn exact_integer(n: &Number) -> Option<ExactInteger> {
    let text = n.to_string();
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i64>().ok()?),
        None => (text.as_str(), 0),
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{int_part}{frac_part}");
    let mut exponent = exponent.checked_sub(i64::try_from(frac_part.len()).ok()?)?;
    // Drop trailing zeros while the exponent is negative: 75000e-2 is 750.
    while exponent < 0 && digits.ends_with('0') {
        digits.pop();
        exponent += 1;
    }
    if exponent < 0 {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(ExactInteger(0));
    }
    if digits.len() as i64 + exponent > 38 {
        return None;
    }
    let mut value: i128 = digits.parse().ok()?;
    for _ in 0..exponent {
        value = value.checked_mul(10)?;
    }
    Some(ExactInteger(if negative { -value } else { value }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn int(text: &str) -> Option<i128> {
        exact_integer(&Number::from_str(text).unwrap()).map(|i| i.0)
    }

    #[test]
    fn integral_values_in_every_spelling() {
        assert_eq!(int("750"), Some(750));
        assert_eq!(int("750.0"), Some(750));
        assert_eq!(int("7.5e2"), Some(750));
        assert_eq!(int("75000e-2"), Some(750));
        assert_eq!(int("-0"), Some(0));
        assert_eq!(int("-12E+1"), Some(-120));
        assert_eq!(
            int("123456789012345678901234567890"),
            Some(123_456_789_012_345_678_901_234_567_890)
        );
    }

    #[test]
    fn non_integers_and_overflow_are_none() {
        assert_eq!(int("750.5"), None);
        assert_eq!(int("1e-1"), None);
        assert_eq!(int("1e400"), None);
        assert_eq!(int("1234567890123456789012345678901234567890"), None);
    }
}
