//! Steering a structured output to its end.
//!
//! A small model that loops inside an open object, an unbounded array or a string is stopped
//! on repetition; regenerating it with penalties breaks exact loops but often drifts instead,
//! until the token limit cuts it. The grammar already knows every way the value may end; what
//! the sampler lacks is a preference for ending it. [`WrapUp`] supplies one: once a retried
//! output repeats itself again, or once only its reserve of the token budget is left, the
//! sampler prefers, among the tokens the grammar allows, those that close the string or
//! bracket being written, then those that open nothing new. A retry is also steered to close
//! once it is as long as the attempt that looped ([`WrapUp::after`]). The grammar still decides what
//! is allowed (a required property, a `minItems` or a pattern is still written out), so
//! the output stays valid; it just ends as soon as the grammar lets it.

/// When to steer an output to close (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WrapUp {
    /// Once no more than this many tokens of the budget remain, the output is steered to
    /// close, whether or not it repeats.
    pub reserve: usize,
    /// Once the output has this many tokens, it is steered to close (`None`: only the
    /// reserve and a repeated loop start it). A retry is given no more room than the attempt
    /// that looped: what it writes beyond that is drift.
    pub after: Option<usize>,
}

impl WrapUp {
    /// The reserve proviso keeps for a budget of `max_tokens`: a quarter of it, between 8 and
    /// 96 tokens (enough to close a few levels of nesting and write the required properties
    /// still missing).
    #[must_use]
    pub fn for_budget(max_tokens: usize) -> Self {
        Self {
            reserve: (max_tokens / 4).clamp(8, 96),
            after: None,
        }
    }

    /// This wrap-up, also started once the output has `tokens` tokens.
    #[must_use]
    pub fn after(self, tokens: usize) -> Self {
        Self {
            after: Some(tokens),
            ..self
        }
    }

    /// Whether an output with `written` tokens and `left` of its budget remaining is steered
    /// to close.
    pub(crate) fn starts(&self, written: usize, left: usize) -> bool {
        left <= self.reserve || self.after.is_some_and(|after| written >= after)
    }
}

/// Where a text stands in its brackets and double-quoted strings: enough of a JSON (or
/// pythonic call, or hermes-tagged JSON) lexer to tell which next piece closes something.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Nesting {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Nesting {
    /// The state after `bytes`.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' | b'(' => self.depth += 1,
            b'}' | b']' | b')' => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }

    /// How open the text would be after `piece`: twice the bracket depth, plus one inside a
    /// string. Among the tokens a grammar allows, the least open after the token is the one
    /// that moves the output furthest towards its end: `"}}` beats `"}`, which beats `"}, "`
    /// (it closes, then opens a new string), which beats another character of the string.
    pub(crate) fn openness_after(self, piece: &[u8]) -> usize {
        let mut after = self;
        after.feed(piece);
        after.depth * 2 + usize::from(after.in_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Nesting {
        let mut n = Nesting::default();
        n.feed(text.as_bytes());
        n
    }

    #[test]
    fn the_least_open_next_piece_closes_the_most() {
        let key = at(r#"{"a": {"b"#);
        assert_eq!(key.openness_after(b"\"}}"), 0);
        assert_eq!(key.openness_after(b"\"}"), 2);
        assert_eq!(key.openness_after(b"\"}, \""), 3);
        assert_eq!(key.openness_after(b"c"), 5);
        let value = at(r#"{"a": "#);
        assert!(value.openness_after(b"1") < value.openness_after(b"\""));
        assert!(value.openness_after(b"\"") < value.openness_after(b"{"));
        assert_eq!(at("[f(a=1").openness_after(b")]"), 0);
    }

    #[test]
    fn a_piece_that_closes_a_string_and_opens_the_next_one_is_no_progress() {
        // `", "` inside a list of strings ends one string and begins another: the list goes on.
        let list = at(r#"["a"#);
        assert_eq!(list.openness_after(b"\", \""), list.openness_after(b"b"));
        assert!(list.openness_after(b"\"]") < list.openness_after(b"b"));
    }

    #[test]
    fn escaped_quotes_and_brackets_in_strings_do_not_count() {
        assert_eq!(at(r#"{"a": "x\"#).openness_after(b"\""), 3);
        assert_eq!(at(r#"{"a": "x\\"#).openness_after(b"\""), 2);
        assert_eq!(at(r#"{"a": "{["#).openness_after(b"]"), 3);
    }

    #[test]
    fn the_reserve_is_a_bounded_quarter_of_the_budget() {
        assert_eq!(WrapUp::for_budget(600).reserve, 96);
        assert_eq!(WrapUp::for_budget(200).reserve, 50);
        assert_eq!(WrapUp::for_budget(16).reserve, 8);
    }
}
