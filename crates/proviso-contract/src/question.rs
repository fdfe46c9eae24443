//! The question an answer must answer, read once per run: what kind of fact it asks for, its
//! terms, the qualifiers that pick one member of a series (`Arm C`, `70 mg`, `week 16`), its
//! subject (the names that tell one source from another) and whether it asks about a
//! superseded version.
//!
//! The same reading serves two places, so that they cannot disagree: steering, which offers
//! only answer spans that answer the question ([`Question::spans`]), and the evidence gate's
//! answer-relevance rule ([`Question::judge`], code `off_question`), which rejects an answer
//! whose cited lines or text do not.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::code::Code;
use crate::evidence::{EvidencePolicy, SourceStore};
use crate::lexicon::{
    abbreviates, age_ranges_in_months, amounts, amounts_with_units, base_form, common_words,
    content_stems, content_words, converse_stems, corrected, counts_people, counts_places,
    date_ranges, dates_held, days_per, days_stated, is_calendar_word, is_common_word, is_duration,
    is_everyday_word, is_footnote_mark, is_function_word, is_heading, is_label, is_light_word,
    is_month_stem, is_weekday, is_year, length_ranges, locators, measure_ranges, measure_words,
    money_amounts, names_month, names_season, party_ranges, place_nouns, reading, release_ranges,
    season_stems, stated_age, stated_age_in_months, stated_dates, stated_lengths, stated_measures,
    stated_party, stated_releases, stated_years, states_age, states_extent, states_location,
    states_money, states_size, states_temperature, stem, times, unclipped, with_apostrophes,
    without_locators, without_locators_but, words, year_ranges, Day, CURRENCY_SIGNS, NUMBER_WORDS,
};
use crate::rejection::{Location, Violation};

/// The kind of fact a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AnswerKind {
    /// How many, how much, how long, a limit or a dose: the answer states an amount.
    Quantity,
    /// When, since or until when, what date: the answer states a time.
    Time,
    /// Who: the answer states a name.
    Person,
    /// Where, which city or country: the answer states a name.
    Place,
    /// Why: the answer states a cause, when the lines give one.
    Reason,
    /// A question answered yes or no, by a line that settles it.
    YesNo,
    /// What or which thing.
    Thing,
}

impl AnswerKind {
    /// The kind of fact `question` asks for.
    #[must_use]
    pub fn of(question: &str) -> Self {
        let q = asking_part(question).to_lowercase();
        let w = words(&q);
        let first = w.first().copied().unwrap_or("");
        let has = |k: &str| q.contains(k);
        let quantity = [
            "how many",
            "how much",
            "how long",
            "how often",
            "how old",
            "how far",
            "how large",
            "how big",
            "how wide",
            "how tall",
            "how deep",
            "how thick",
            "how heavy",
            "how fast",
            "how high",
            "how low",
            "within how",
            "by how",
            "what percentage",
            "what proportion",
            "what share",
            "what fraction",
            "number of",
        ];
        let time = [
            "what date",
            "which date",
            "what year",
            "which year",
            "what day",
            "which day",
            "what month",
            "which month",
            "what time",
            // "What hours is the cheap rate?": when in the day, not how many hours.
            "what hours",
            "which hours",
            "since when",
            "until when",
            "until what date",
            "by when",
            "how soon",
            "how late",
            "how early",
            "date of",
        ];
        // `What is the … limit`: a measure asked for by name (a plural `s` aside, so `fees`
        // is `fee`; whole words, so `allowed` is not `allowance`).
        let measure = [
            "limit",
            "cap",
            "amount",
            "maximum",
            "minimum",
            // "What's the shortest time I'm tied in for?": a length asked by its limit.
            "shortest",
            "longest",
            "dose",
            "cost",
            "price",
            "fee",
            "fine",
            "charge",
            "penalty",
            "deposit",
            "fare",
            "rent",
            "allowance",
            "rate",
            "deadline",
            "duration",
            "period",
            "length",
            "temperature",
            "pressure",
            "capacity",
            "size",
            "weight",
            "height",
            "distance",
            "number",
            "speed",
            "mileage",
            "discount",
            "surcharge",
            "excess",
            "tax",
        ];
        // "Can you post them, and what does that cost?", "can I claim it, and if so how
        // much?": a yes or no asked with what follows from it asks that; an amount stated
        // says yes as well.
        const YES_NO: [&str; 17] = [
            "is", "are", "am", "does", "do", "did", "can", "could", "was", "were", "has", "have",
            "will", "would", "should", "must", "may",
        ];
        if YES_NO.contains(&first) {
            let wh = ["what", "how", "when", "where", "who", "which"];
            // `… and what is it?`: an `and` with a question word after it, wherever it
            // is (`2 adults and 3 kids … is there a family price and what is it?`).
            let then = [", and ", " and if so", ", if so", " and, if so", " and "]
                .iter()
                .flat_map(|mark| q.match_indices(mark).map(|(i, _)| &q[i + mark.len()..]))
                .map(|rest| rest.trim_start_matches([',', ' ']))
                .map(|rest| {
                    rest.strip_prefix("if so")
                        .unwrap_or(rest)
                        .trim_start_matches([',', ' '])
                })
                .find(|rest| {
                    words(rest)
                        .first()
                        .is_some_and(|w| wh.contains(w) || w.starts_with("what"))
                });
            if let Some(rest) = then {
                let kind = Self::of(rest);
                if kind != Self::Thing && kind != Self::YesNo {
                    return kind;
                }
                // "Is there a family price and what is it?": `it` is the measure the
                // question names before.
                let referring = words(rest)
                    .iter()
                    .skip(1)
                    .all(|w| ["is", "are", "it", "that", "they", "s", "was", "be"].contains(w));
                if kind == Self::Thing
                    && referring
                    && w.iter().any(|t| measure.contains(&t.trim_end_matches('s')))
                {
                    return Self::Quantity;
                }
            }
        }
        // A question written as a noun phrase ("over 60s price for the spanish class?")
        // asks for what it names, as "what is the …" would.
        let phrase = !INTERROGATIVES.contains(&first) && !["why", "how"].contains(&first);
        let asks_what = ["what", "which"].contains(&first)
            || q.starts_with("what's")
            || w.get(1).is_some_and(|s| ["what", "which"].contains(s))
            || phrase;
        // "What do I pay for the water part?", "what would we owe?", "what am I paying
        // per unit?", "what will I be charged?": a sum.
        let pays = first == "what"
            && w.get(1).is_some_and(|a| {
                [
                    "do", "does", "did", "will", "would", "should", "must", "am", "are", "is",
                ]
                .contains(a)
            })
            && w.iter()
                .skip(2)
                .take(3)
                .any(|v| ["pay", "paying", "owe", "owing", "charged", "billed"].contains(v));
        // "What's the most I can get?", "the least we'd pay", "the most the fund could give
        // us": the most of what someone does is an amount, whatever the verb.
        let utmost = w.windows(3).any(|p| {
            p[0] == "the"
                && ["most", "least"].contains(&p[1])
                && [
                    "i", "we", "you", "they", "he", "she", "someone", "anyone", "one", "the", "a",
                    "my", "our", "your", "their",
                ]
                .contains(&p[2])
        });
        // "What's the last date I can report it?", "closing date for entries?": a date
        // asked by what it is the date of. (Not `dates`: those are all a line lists,
        // which an answer of one time would cut.)
        // So is "what was the cut-off time …": a time asked by what it is the time of.
        // (Not "the shortest time I'm tied in for": a length asked by its limit.)
        let limited = w
            .iter()
            .any(|t| ["shortest", "longest", "minimum", "maximum", "most", "least"].contains(t));
        let dated = asks_what
            && w.iter()
                .take(6)
                .any(|t| *t == "date" || (*t == "time" && !limited));
        if first == "when" || time.iter().any(|k| has(k)) || dated {
            Self::Time
        } else if pays
            || utmost
            || quantity.iter().any(|k| has(k))
            || (asks_what && w.iter().any(|t| measure.contains(&t.trim_end_matches('s'))))
        {
            Self::Quantity
        } else if ["who", "whom", "whose"].contains(&first)
            || has("which person")
            // "Which insurance company covers me?": an organisation is named, as a person is.
            || w.windows(3).any(|p| {
                ["which", "what"].contains(&p[0])
                    && ORGANISATIONS.iter().any(|o| p[1] == *o || p[2] == *o)
            })
        {
            Self::Person
        } else if ["where", "whereabouts"].contains(&first)
            || w.windows(2).any(|p| {
                ["which", "what"].contains(&p[0])
                    && ["citie", "city", "count", "place", "locat", "regio", "addre"]
                        .contains(&stem(p[1]).as_str())
            })
        {
            Self::Place
        } else if first == "why" || has("what reason") || has("what caused") {
            Self::Reason
        } else if YES_NO.contains(&first) {
            Self::YesNo
        } else {
            Self::Thing
        }
    }

    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quantity => "quantity",
            Self::Time => "time",
            Self::Person => "person",
            Self::Place => "place",
            Self::Reason => "reason",
            Self::YesNo => "yes_no",
            Self::Thing => "thing",
        }
    }

    /// Whether the answer must state a token of this kind (an amount, a time, a name).
    fn needs_token(self) -> bool {
        matches!(
            self,
            Self::Quantity | Self::Time | Self::Person | Self::Place
        )
    }
}

/// A qualifier of a question: what picks one member of a series the sources describe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "qualifier", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Qualifier {
    /// A labelled member: `Arm C`, `week 16`, `phase 3` (the head's stem, the label).
    Label {
        /// The stem of the word before the label.
        head: String,
        /// The label, lower case.
        value: String,
    },
    /// An amount with its unit: `70 mg`, `40-week` (the number, the unit's stem).
    Amount {
        /// The number as written.
        value: String,
        /// The stem of the unit.
        unit: String,
    },
}

impl Qualifier {
    /// Every qualifier-shaped pair in `text`, read over whitespace tokens so that an id
    /// (`VELA-2`, `PASI-75`) is never a label: a word and a capital letter or a short
    /// number (`Arm C`, `week 16`), and a number and its unit (`70 mg`, `40-week`).
    fn all_in(text: &str) -> Vec<Self> {
        let raw: Vec<&str> = text.split_whitespace().collect();
        let tokens: Vec<&str> = text
            .split_whitespace()
            .map(|t| {
                t.trim_matches(|c: char| (!c.is_alphanumeric() && c != '-') || is_footnote_mark(c))
            })
            .map(|t| t.trim_matches('-'))
            .collect();
        let word = |s: &str| {
            s.chars().count() >= 2 && s.chars().all(char::is_alphabetic) && !is_function_word(s)
        };
        let number =
            |s: &str| !s.is_empty() && s.len() <= 6 && s.chars().all(|c| c.is_ascii_digit());
        let mut out = Vec::new();
        for (i, a) in tokens.iter().enumerate() {
            let b = tokens.get(i + 1).copied().unwrap_or("");
            // One reading of a letter label ([`is_label`]): `Arm A`, `Phase I`, but not the
            // pronoun in "the most plots I can have".
            let letter = is_label(&tokens, i + 1);
            // `our 3 kids (6, 9 and 12)`: numbers in brackets after a noun say what its
            // members are (their ages), not which member.
            let bracketed = raw.get(i + 1).is_some_and(|r| r.starts_with('('));
            // `Saturday 27 December` and `March 3` are dates, which [`Question::date_fits`]
            // reads; a day of a month is no member of a series.
            let dated = (is_weekday(a) || names_month(a))
                && b.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d));
            if word(a) && !bracketed && !dated && (letter || (number(b) && b.len() <= 3)) {
                out.push(Self::Label {
                    head: stem(a),
                    value: b.to_lowercase(),
                });
            }
            // `70 mg`, or `40-week` written as one token.
            let (value, unit) = match a.split_once('-') {
                Some((n, u)) if number(n) && word(u) => (n, u),
                _ => (*a, b),
            };
            // `the 2024 terms` is a year's, which [`Question::year_fits`] reads.
            if number(value) && word(unit) && !is_year(value) {
                out.push(Self::Amount {
                    value: value.trim_start_matches('0').to_owned(),
                    unit: stem(unit),
                });
            }
        }
        out
    }

    /// Whether two qualifiers are members of the same series (same head, or same unit).
    fn same_series(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Label { head: a, .. }, Self::Label { head: b, .. }) => a == b,
            (Self::Amount { unit: a, .. }, Self::Amount { unit: b, .. }) => a == b,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Label { head, value } => format!("`{head}… {value}`"),
            Self::Amount { value, unit } => format!("`{value} {unit}…`"),
        }
    }
}

/// `question` without the courtesies around it (`Good afternoon.`, `Hi team,`, `Thanks
/// in advance!`), which ask nothing: their words are no term a line must state.
fn without_courtesies(question: &str) -> String {
    static OPENING: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static CLOSING: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let opening = OPENING.get_or_init(|| {
        regex::Regex::new(
            r"(?i)^\s*(hi|hello|hey|hiya|greetings|good (morning|afternoon|evening|day))( (there|all|everyone|team|folks))?\s*[,.!:;\u{2013}\u{2014}-]+\s+",
        )
        .expect("a valid pattern")
    });
    let closing = CLOSING.get_or_init(|| {
        regex::Regex::new(
            r"(?i)([.?!])\s+(many )?(thanks|thank you|cheers)( (so much|very much|in advance|a lot))?\s*[.!]*\s*$",
        )
        .expect("a valid pattern")
    });
    let rest = opening.replace(question, "");
    let rest = closing.replace(&rest, "$1");
    if words(&rest).is_empty() {
        question.to_owned()
    } else {
        rest.into_owned()
    }
}

/// `question` with each day of the year it names by a holiday's name (`Boxing Day`,
/// `Christmas Eve`) written as its date (`26 December`), unless the sources write the name
/// themselves (`written`): a page says `closed on 25 and 26 December`, and the name is
/// otherwise no word a line states. Only holidays on a fixed date.
fn with_named_days(question: &str, written: &dyn Fn(&str) -> bool) -> String {
    const NAMED: [(&str, &str); 5] = [
        (r"christmas\s+eve", "24 December"),
        (r"christmas\s+day", "25 December"),
        (r"boxing\s+day", "26 December"),
        (r"new\s+year'?\u{2019}?s?\s+eve", "31 December"),
        (r"new\s+year'?\u{2019}?s?\s+day", "1 January"),
    ];
    // Compiled once: every question is read through them.
    static PATTERNS: std::sync::OnceLock<Vec<(regex::Regex, &str)>> = std::sync::OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        NAMED
            .iter()
            .map(|(name, date)| {
                let pattern = format!(r"(?i)\b{name}\b");
                (regex::Regex::new(&pattern).expect("a valid pattern"), *date)
            })
            .collect()
    });
    let mut out = question.to_owned();
    for (pattern, date) in patterns {
        let Some(found) = pattern.find(&out) else {
            continue;
        };
        if written(&found.as_str().to_lowercase()) {
            continue;
        }
        out = pattern.replace_all(&out, *date).into_owned();
    }
    out
}

/// Units of a length of time, as a question writes them.
const TIME_UNIT_STEMS: [&str; 15] = [
    "second", "seconds", "minute", "minutes", "min", "hour", "hours", "day", "days", "week",
    "weeks", "month", "months", "year", "years",
];

/// Units a count is written with (`240 miles`, `3 hours`): a question counting one asks
/// for a number stated with it.
const MEASURE_UNITS: [&str; 22] = [
    "miles",
    "kilometres",
    "kilometers",
    "km",
    "metres",
    "meters",
    "feet",
    "inches",
    "litres",
    "liters",
    "kilograms",
    "kg",
    "kilos",
    "grams",
    "hours",
    "minutes",
    "seconds",
    "days",
    "weeks",
    "months",
    "years",
    "nights",
];

/// The members of the series of `asked`'s labels that `text` lists ([`listed_labels`]).
fn listed_members<'a>(
    text: &'a str,
    asked: &'a [Qualifier],
) -> impl Iterator<Item = Qualifier> + 'a {
    asked.iter().flat_map(move |q| match q {
        Qualifier::Label { head, .. } => listed_labels(text, head)
            .into_iter()
            .map(|value| Qualifier::Label {
                head: head.clone(),
                value,
            })
            .collect(),
        Qualifier::Amount { .. } => Vec::new(),
    })
}

/// Whether a record's field past the first, which names its row, has a key and trimmed
/// value meeting `meets` (`dist: Castlegate` in a station's record).
fn any_field_past_row(line: &str, meets: impl Fn(&str, &str) -> bool) -> bool {
    record_fields(line).is_some_and(|fields| {
        fields
            .iter()
            .skip(1)
            .any(|f| f.split_once(": ").is_some_and(|(k, v)| meets(k, v.trim())))
    })
}

/// The labels `text` lists after a word whose stem is `head`: the values of a field keyed
/// by it (`Group: C, D, E`), or a run of them after the word itself (`Groups A to E`,
/// `Groups A–C`, `groups B and C`), lower case, a range of letters expanded.
fn listed_labels(text: &str, head: &str) -> Vec<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')'))
        .filter(|t| !t.is_empty())
        .collect();
    let short = |t: &str| {
        let t = t.trim_matches(|c: char| !c.is_alphanumeric() || is_footnote_mark(c));
        (!t.is_empty()
            && t.chars().count() <= 3
            && t.chars().all(char::is_alphanumeric)
            && t.chars()
                .next()
                .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit()))
        .then(|| t.to_owned())
    };
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if stem(t.trim_matches(|c: char| !c.is_alphanumeric())) != head {
            continue;
        }
        let mut j = i + 1;
        let mut previous: Option<String> = None;
        let mut run: Vec<String> = Vec::new();
        while let Some(&t) = tokens.get(j) {
            let lower = t.to_lowercase();
            // `A to E`, `A–E`: every letter between.
            let dashed = t
                .split_once(['-', '\u{2013}'])
                .and_then(|(a, b)| Some((short(a)?, short(b)?)));
            if let Some((a, b)) = dashed {
                run.extend(letters_between(&a, &b));
                previous = Some(b);
            } else if ["and", "or", "&", "to"].contains(&lower.as_str()) {
                if lower == "to" {
                    if let (Some(a), Some(b)) =
                        (previous.clone(), tokens.get(j + 1).and_then(|t| short(t)))
                    {
                        run.extend(letters_between(&a, &b));
                        previous = Some(b);
                        j += 2;
                        continue;
                    }
                }
            } else if let Some(label) = short(t) {
                run.push(label.clone());
                previous = Some(label);
            } else if let Some(k) = (j..tokens.len().min(j + 2)).find(|&k| {
                // `Full Fibre 150 and Full Fibre 500`: the head again, after a connector.
                tokens
                    .get(j - 1)
                    .is_some_and(|c| ["and", "or", "&"].contains(&c.to_lowercase().as_str()))
                    && stem(tokens[k].trim_matches(|c: char| !c.is_alphanumeric())) == head
            }) {
                j = k + 1;
                continue;
            } else {
                break;
            }
            j += 1;
        }
        // A single value is what a label already reads (`Group: B`, `Arm B: …`).
        if run.len() >= 2 {
            out.extend(run.into_iter().map(|l| l.to_lowercase()));
        }
    }
    out.dedup();
    out
}

/// The single letters from `a` to `b` (`A`, `E`: A, B, C, D, E); the two alone when they
/// are not single letters in order.
fn letters_between(a: &str, b: &str) -> Vec<String> {
    let (a_chars, b_chars): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    match (a_chars.as_slice(), b_chars.as_slice()) {
        (&[x], &[y]) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() && x < y => {
            (x..=y).map(|c| c.to_string()).collect()
        }
        _ => vec![a.to_owned(), b.to_owned()],
    }
}

/// A form of contact a question asks for, which an answer states in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Contact {
    /// An email address: it has an `@`.
    Email,
    /// A phone number: six digits or more, maybe spaced.
    Phone,
    /// A web address: `www.`, `http`, or a dotted domain.
    Web,
    /// A postcode: an outward code of letters and digits (`ZQ2`, `SW1A`) and an inward
    /// code of a digit and two letters (`5HC`), as a record writes it under any key (`pc`).
    Postcode,
}

impl Contact {
    /// The contact `question` (lower case) asks for: "what's the email address", "what
    /// number do I ring", "the website"; `None` for a yes or no ("can I email them?").
    fn asked(question: &str, kind: AnswerKind) -> Option<Self> {
        if kind == AnswerKind::YesNo {
            return None;
        }
        let w = words(question);
        let has = |x: &str| w.contains(&x);
        if has("email") || w.windows(2).any(|p| p == ["e", "mail"]) {
            Some(Self::Email)
        } else if has("website") || has("url") || w.windows(2).any(|p| p == ["web", "address"]) {
            Some(Self::Web)
        } else if has("postcode") || has("postcodes") || w.windows(2).any(|p| p == ["post", "code"])
        {
            Some(Self::Postcode)
        } else if (has("number") || has("numbers"))
            && ["phone", "telephone", "ring", "call", "text", "dial"]
                .iter()
                .any(|x| has(x))
        {
            Some(Self::Phone)
        } else {
            None
        }
    }

    /// Whether `text` states a contact of this form.
    fn stated(self, text: &str) -> bool {
        match self {
            Self::Email => text.contains('@'),
            Self::Phone => {
                let mut run = 0;
                text.chars().any(|c| {
                    if c.is_ascii_digit() {
                        run += 1;
                    } else if !matches!(c, ' ' | '-' | '(' | ')' | '+') {
                        run = 0;
                    }
                    run >= 6
                })
            }
            Self::Postcode => {
                let tokens: Vec<&str> = text
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .filter(|t| !t.is_empty())
                    .collect();
                tokens.windows(2).any(|p| {
                    let outward = (2..=4).contains(&p[0].len())
                        && p[0].starts_with(|c: char| c.is_ascii_uppercase())
                        && p[0].chars().any(|c| c.is_ascii_digit())
                        && p[0]
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
                    let inward = p[1].len() == 3
                        && p[1].starts_with(|c: char| c.is_ascii_digit())
                        && p[1].chars().skip(1).all(|c| c.is_ascii_uppercase());
                    outward && inward
                })
            }
            Self::Web => {
                let lower = text.to_lowercase();
                lower.contains("www.")
                    || lower.contains("http")
                    || locators(text).iter().any(|l| {
                        l.contains('.')
                            && [".com", ".org", ".net", ".uk", ".gov", ".io", ".co", ".eu"]
                                .iter()
                                .any(|d| l.to_lowercase().contains(d))
                    })
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Email => "an email address",
            Self::Phone => "a phone number",
            Self::Web => "a web address",
            Self::Postcode => "a postcode",
        }
    }

    /// The stems of the words that name this form of contact (`phone`, `number`), which a
    /// line states by stating a contact of the form, under whatever key (`tel`, `pc`).
    fn naming_stems(self) -> Vec<String> {
        let named: &[&str] = match self {
            // `contact` is what a number or an address is for ("What number do I ring to
            // get hold of a ranger?" reads `contact`).
            Self::Email => &["email", "mail", "address", "contact"],
            Self::Phone => &[
                "contact",
                "phone",
                "telephone",
                "number",
                "ring",
                "call",
                "dial",
                "direct",
            ],
            Self::Web => &["website", "web", "url", "address", "site"],
            Self::Postcode => &["postcode", "post", "code"],
        };
        named.iter().map(|w| stem(w)).collect()
    }
}

/// What an amount measures, when a question asks for one of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Measure {
    /// A sum of money (`how much does it cost`, `what is the fee`).
    Money,
    /// A sum saved (`how much do students save`, `what discount`): money, or a share of a
    /// price (`30% off`, `half`).
    Saving,
    /// A length of time or space (`how long`, `how far`).
    Extent,
    /// A size: a length, area, volume or weight (`the largest`, `how big`), which a length
    /// of time is not.
    Size,
    /// A temperature (`what temperature`, `how warm`): degrees, which a length (`25 m`) or a
    /// count is not.
    Temperature,
    /// An age (`how old`, `what age`): a number of years, months or weeks written as an
    /// age (`10 weeks of age`, `aged 16`, `under 18s`), which another length of time (`12
    /// months after the second injection`) is not.
    Age,
}

impl Measure {
    /// The measure `question` (lower case) asks for, if it names one.
    fn asked(question: &str) -> Option<Self> {
        // Whole words, a plural `s` aside: `allowed` is not `allowance`.
        const MONEY: [&str; 18] = [
            "owe",
            "spend",
            "expense",
            "deposit",
            "fare",
            "salary",
            "compensation",
            "wage",
            "allowance",
            "budget",
            "refund",
            "cost",
            "fee",
            "fine",
            "price",
            "charge",
            "penalty",
            "rent",
        ];
        // `How much is a new card?`: "how much" with a verb right after asks a price.
        const PRICED: [&str; 8] = ["is", "are", "does", "do", "will", "would", "did", "was"];
        const EXTENT: [&str; 5] = ["period", "duration", "length", "longest", "shortest"];
        const SIZE: [&str; 9] = [
            "largest",
            "biggest",
            "smallest",
            "tallest",
            "widest",
            "heaviest",
            "dimension",
            "weight",
            "weigh",
        ];
        const SIZE_ASKED: [&str; 6] = ["big", "large", "heavy", "tall", "wide", "thick"];
        // "The largest number of people", "how big a group": a count, not a size.
        const COUNTED: [&str; 7] = [
            "number", "amount", "people", "group", "many", "much", "party",
        ];
        // Words of a sum taken off a price, which a share of it (`30%`) states as well.
        const SAVED: [&str; 7] = [
            "save",
            "saving",
            "savings",
            "discount",
            "discounted",
            "reduction",
            "cheaper",
        ];
        // "How warm is the water?", "what temperature": degrees, asked before anything
        // else a temperature might be said with.
        const WARMTH: [&str; 5] = ["warm", "hot", "cold", "cool", "heated"];
        let tokens = words(question);
        // "How old does a puppy have to be", "what age can a child join", "the minimum
        // age": an age, asked before the length of time it is written with.
        if tokens.windows(2).any(|w| {
            (w[0] == "how" && w[1] == "old")
                || (["what", "which", "minimum", "maximum", "youngest", "lowest"].contains(&w[0])
                    && ["age", "ages"].contains(&w[1]))
                || (w[0] == "age"
                    && ["limit", "limits", "restriction", "restrictions"].contains(&w[1]))
        }) {
            return Some(Self::Age);
        }
        if tokens
            .iter()
            .any(|w| ["temperature", "temperatures", "degrees"].contains(w))
            || tokens
                .windows(2)
                .any(|w| w[0] == "how" && WARMTH.contains(&w[1]))
        {
            return Some(Self::Temperature);
        }
        // "How long can I keep switching on one fare": the length asked for comes before
        // what it is asked about.
        let extent = (question.contains("how long") && !question.contains("how long ago"))
            || question.contains("how far");
        if extent {
            return Some(Self::Extent);
        }
        // "How much of the hire charge do we get back?": a share of a sum, which a
        // percentage states as well as money does.
        if tokens
            .windows(3)
            .any(|w| w[0] == "how" && w[1] == "much" && w[2] == "of")
        {
            return Some(Self::Saving);
        }
        let how_much_is = tokens
            .windows(3)
            .any(|w| w[0] == "how" && w[1] == "much" && PRICED.contains(&w[2]));
        // "What's the most I'd have to pay?": a limit of what is paid is a sum.
        let most_paid = tokens
            .iter()
            .any(|w| ["most", "maximum", "max", "least", "minimum"].contains(w))
            && tokens.iter().any(|w| ["pay", "paid", "pays"].contains(w));
        if how_much_is
            || most_paid
            || tokens
                .iter()
                .any(|w| MONEY.contains(&w.trim_end_matches('s')))
        {
            if tokens.iter().any(|w| SAVED.contains(w)) {
                Some(Self::Saving)
            } else {
                Some(Self::Money)
            }
        } else if !tokens.iter().any(|w| COUNTED.contains(w))
            && (tokens
                .iter()
                .any(|w| SIZE.contains(&w.trim_end_matches('s')))
                || tokens
                    .windows(2)
                    .any(|w| w[0] == "how" && SIZE_ASKED.contains(&w[1])))
        {
            Some(Self::Size)
        } else if tokens
            .iter()
            .any(|w| EXTENT.contains(&w.trim_end_matches('s')))
        {
            Some(Self::Extent)
        } else {
            None
        }
    }

    fn stated(self, text: &str) -> bool {
        match self {
            // `A deposit of 20% of the total price`: a share of a sum is a sum.
            Self::Money => states_money(text) || states_share_of_sum(text),
            Self::Saving => {
                let lower = text.to_lowercase();
                states_money(text)
                    || text.contains('%')
                    || words(&lower)
                        .iter()
                        .any(|w| ["percent", "half", "quarter", "third"].contains(w))
            }
            Self::Extent => states_extent(text),
            Self::Size => states_size(text),
            Self::Temperature => states_temperature(text),
            Self::Age => states_age(text),
        }
    }
}

/// Whether `text` states a share of a sum of money (`20% of the total price`, `10 per cent
/// of the annual fee`): a sum, though written without a currency.
fn states_share_of_sum(text: &str) -> bool {
    static SHARE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    SHARE
        .get_or_init(|| {
            regex::Regex::new(
                r"(?i)\b\d+(?:\.\d+)?\s?(?:%|per\s?cent|percent)\s+of\s+(?:the\s+|your\s+|its\s+|their\s+|each\s+)?(?:[a-z-]+\s+){0,2}(?:price|prices|cost|costs|fee|fees|rent|fare|fares|charge|charges|bill|amount|balance|total|sum)\b",
            )
            .expect("a valid pattern")
        })
        .is_match(text)
}

/// The longest span preferred as an answer to a question not asking for an amount, a time
/// or a name (in bytes).
const LONG_SPAN: usize = 240;

/// At most how many lines state a word, rare in English, that the question asks about, for
/// a line that does not state it to be about something else (`ferret` in "what does it cost
/// to get a ferret neutered?" against `Microchip implant during neutering`). Measured on the
/// development sets (before a source could state the word for all its lines): 3 and 6 alike,
/// 12 cost three right answers more.
const RARE_LINES: usize = 6;

/// Words that name a superseded version.
const EARLIER: &[&str] = &[
    "earlier",
    "previous",
    "prior",
    "old",
    "older",
    "original",
    "superseded",
    "former",
    "outdated",
    "replaced",
    "expired",
];

/// Words that pick one end of a series, each with its synonyms: a question that asks for
/// one (`the first visit`) is not answered by a line that states another and not it (`the
/// last visit`).
const CONTRASTS: &[&[&[&str]]] = &[
    &[&["first", "initial"], &["last", "final"]],
    &[&["next", "upcoming"], &["previous", "last", "prior"]],
    &[&["primary"], &["secondary"]],
    &[&["maximum", "max"], &["minimum", "min"]],
    &[&["earliest"], &["latest"]],
    &[&["highest"], &["lowest"]],
    &[&["largest", "biggest"], &["smallest"]],
    &[&["longest"], &["shortest"]],
    &[&["upper"], &["lower"]],
    // Dimensions: "how wide" is not answered by a length.
    &[
        &["wide", "wider", "widest", "width"],
        &["long", "longer", "length"],
        &["tall", "taller", "tallest", "height"],
        &["deep", "deeper", "deepest", "depth"],
        &["heavy", "heavier", "heaviest", "weight"],
    ],
];

/// Words that ask for a limit ("the most I can be charged", "the longest loan").
const LIMIT_ASKED: &[&str] = &[
    "most", "maximum", "max", "least", "minimum", "min", "limit", "cap", "longest", "shortest",
    "largest", "biggest", "smallest", "highest", "lowest", "latest", "earliest", "oldest",
    "newest", "fewest",
];

/// Words that mark a clause stating a limit.
const LIMIT_MARKS: &[&str] = &[
    "maximum", "max", "minimum", "min", "most", "least", "limit", "limited", "cap", "capped", "up",
    "exceed", "longest", "shortest", "latest", "earliest",
];

/// Verbs that say what something is taken to be, before `as` (`counts as`, `treated as`,
/// `regarded as`): a line may say it with any of them, or with `is`.
const REGARD_VERBS: &[&str] = &["count", "treat", "regard", "consider", "class", "deem"];

/// Words that mark a clause giving a cause.
const REASON_MARKS: &[&str] = &[
    "reason",
    "because",
    "due",
    "owing",
    "since",
    "following",
    "result",
    "caused",
    "stopped",
    "therefore",
];

/// A question, read for what its answer must state.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    text: String,
    kind: AnswerKind,
    terms: Vec<String>,
    qualifiers: Vec<Qualifier>,
    ids: Vec<String>,
    names: Vec<(String, f64)>,
    /// What the question asks beyond its subject, the answer's type and an id's kind: the
    /// words an answer must state one of (see [`Question::misses`]).
    beyond: Vec<String>,
    /// Two words asked beyond the subject that make one name, as stems, the modifier
    /// first (`car`, `trailer` in "hire a car trailer"), whose second word, which says
    /// what it is, no source states.
    compounds: Vec<(String, String)>,
    /// The sides of an `A or B` question, each as the stems of its words in order.
    alternatives: Vec<Vec<String>>,
    /// The amounts and times the question itself states, which an answer must go beyond.
    asked_amounts: Vec<String>,
    asked_times: Vec<String>,
    /// What "how many" counts, as the stems of the noun phrase after it (`interlibrary
    /// loan requests`); empty when the question does not say, or counts `things`.
    counted: Vec<String>,
    /// Whether the question asks for a point in time ("since when", "what date"), which a
    /// length of time does not answer.
    point: bool,
    /// Whether the question asks for a time of day ("until what time"), which a date or a
    /// month does not answer.
    clock: bool,
    /// Whether the question asks for a limit (`most`, `maximum`, `longest`).
    asks_limit: bool,
    /// The verb a yes-or-no question asks about ("Can I *renew* …"), as a stem: an answer
    /// that does not state it does not settle the question.
    predicate: Option<String>,
    /// What a `when` question asks to happen ("When does the pool *reopen*", "When are
    /// charges next *going up*"), as a stem: a line that gives a time for something else
    /// (the opening hours) does not say when this happens.
    event: Option<Vec<String>>,
    /// Whether the question asks its event with `be` and a verb in `-ing` (`When are the
    /// charges going up`), where the event read is surely a verb ([`asks_progressive`]).
    progressive: bool,
    /// Which end of a range of dates a `when` question asks for: `Some(true)` for its end
    /// ("when does the work *finish*"), `Some(false)` for its start ("when does it
    /// *begin*").
    range_side: Option<bool>,
    /// Whether the question asks whether one may ("Can I …", "May we …").
    permission: bool,
    /// The age the question states (`I'm 22`, `my 8-year-old`), in years: a line that
    /// states ages leaving it out is about other people.
    age: Option<u32>,
    /// How many people the question is about (`a group of 25`): a line that states ranges
    /// of a count of people leaving it out is about other groups.
    party: Option<u32>,
    /// The lengths of time the question states (`due to arrive in 10 days`, `here two
    /// years`), in days: a line that states ranges of a length leaving them out is about
    /// other cases.
    lengths: Vec<u32>,
    /// The days of the week the question names (`on a Saturday night`): a line that states
    /// other days is about them.
    days: Option<[bool; 7]>,
    /// The words the question names its days with (`weekend`, `weekday`), which a line
    /// writing them holds as it means them.
    day_words: Vec<&'static str>,
    /// What an amount asked for measures, when the question says: a sum of money, or a
    /// length of time or space.
    measure: Option<Measure>,
    earlier: bool,
    /// The proper names the question writes (`Northgate`, `DSMB`), lower case, that few
    /// lines state: a cited line must state each of them, or its source's title must.
    proper: Vec<String>,
    /// The word after a proper name that is part of it, lower case (`park` for
    /// `larchfield` in `Larchfield Park`): what kind of thing it names.
    #[serde(skip)]
    heads: BTreeMap<String, String>,
    /// For a proper name the question writes in a run of capitalised words (`EV Night`),
    /// the run's words, lower case.
    #[serde(skip)]
    runs: BTreeMap<String, Vec<String>>,
    /// For a proper name, what the record about it says it is in a key and a short value
    /// (`zone 1` for `portugal`), as lower-case words.
    #[serde(skip)]
    kinds: BTreeMap<String, Vec<Vec<String>>>,
    /// Proper names the question writes that no source states: nothing here can answer it.
    unstated: Vec<String>,
    /// What the question asks beyond its subject that no source states, in a rare word, or
    /// in any word of what a `what is the …` question asks for: no line answers it.
    unheard: Vec<String>,
    /// What the question asks in a word only a few lines state: a line that does not state
    /// it (itself, or through its section, title, the line it refers to or its source's other
    /// lines) does not answer.
    /// Each as it is matched ([`rare_forms`]), as written, and the sources that state it.
    rare: Vec<(String, String, BTreeSet<String>)>,
    /// Qualifiers the question asks about that no source states, of a series they do
    /// state (`Arm F` beside arms A to C): no line answers for them.
    absent: Vec<Qualifier>,
    /// Per key of the sources' records (`tier` of `Tier: Pro; Devices: 5`), the values of
    /// it the question names, when the sources' records give it more than one: a record
    /// keyed by another value (`Tier: Home`) is about another member of the series.
    members: BTreeMap<String, Series>,
    /// The releases the question states (`we still run 2.9.3`), as
    /// [`crate::lexicon::stated_releases`] orders them.
    releases: Vec<u32>,
    /// The measures the question states as a number and a unit (`18kg`, `150g/km`), as
    /// [`crate::lexicon::stated_measures`] reads them.
    measures: Vec<(String, f64)>,
    /// The years the question states (`in 2024`).
    years: Vec<u32>,
    /// The dates the question states (`the week of 13th October 2025`, `in June`).
    dates: Vec<Day>,
    /// The form of contact the question asks for (`what's the email address`).
    contact: Option<Contact>,
    /// Each source's title (its first line), lower case.
    #[serde(skip)]
    titles: BTreeMap<String, String>,
    /// Each source's text, lower case, when the question names a day or a month.
    #[serde(skip)]
    dated: BTreeMap<String, String>,
    /// The footnotes of each line that carries their marks (`£6.80 ¹`), by line.
    #[serde(skip)]
    footnoted: BTreeMap<String, String>,
    /// The lines that carry each footnote's mark, by source and footnote: what the note is
    /// about.
    #[serde(skip)]
    marked_by: BTreeMap<(String, String), String>,
    /// What the asker says does not hold of them ([`denied_words`]).
    #[serde(skip)]
    denied: BTreeSet<String>,
    /// What the sources abbreviate, by abbreviation: `WET` for `Wetherstow` where a page
    /// writes `Wetherstow (WET)` or a record `id: WET; name: … Wetherstow`
    /// ([`abbreviations`]).
    #[serde(skip)]
    abbreviations: BTreeMap<String, String>,
    /// The code the question asks the meaning of ("what does AHP mean?", "what does CTR
    /// stand for?") and what the sources say it stands for: a line that states both
    /// answers it, whatever else the question says of where the asker saw it.
    defines: Option<(String, String)>,
    /// The periods the question asks a rate for (`per year`: [`rate_periods`]).
    periods: BTreeSet<&'static str>,
    /// Whether what the question asks beyond its subject includes a limit (`latest`, and
    /// for a time `last`): a line stating a limit states it.
    limit_beyond: bool,
    /// The kind of thing asked for, as stems (`trial` in "which trial", `kind` and `drug` in
    /// "what kind of drug"): it describes the answer, which need not say it.
    answer_type: Vec<String>,
    /// The whole noun phrase after `which` or `what`, as stems (`mobile` and `network` in
    /// "which mobile network"): a record's field of that name states the kind asked for.
    answer_phrase: Vec<String>,
    /// The kind of thing a `which` or `what` question asks for in the plural (`arm` in
    /// "which arms were terminated"): an answer may name several.
    listed: Option<String>,
    /// Whether the question asks for a title or a name (`What is the study called?`), which
    /// a heading states.
    asks_title: bool,
    /// The verb the asker does, as a stem (`giv` in "how much notice did I have to give?"),
    /// when the question asks what the asker (`I`, `we`) must or may do.
    asker_verb: Option<String>,
    /// Per source and line text, the line that opens its section, lower case
    /// ([`SourceDocument::section`](crate::SourceDocument::section)).
    #[serde(skip)]
    sections: BTreeMap<(String, String), String>,
    /// Per source and line text, the line before it when it refers back to it (`It will be
    /// out of service …` after `We are refurbishing Lift 2 …`), lower case.
    #[serde(skip)]
    antecedents: BTreeMap<(String, String), String>,
    /// Per source (all its versions): its stems and its lower-cased text, for
    /// [`Question::on_subject`]; read once, kept only when the question has a subject.
    #[serde(skip)]
    sources: BTreeMap<String, (BTreeSet<String>, String)>,
}

impl EvidencePolicy {
    /// Checks `answer` against `store` as the answer to `question`, when there is one: a
    /// superseded version may then be cited if the question asks about one, and the
    /// answer-relevance rule ([`Question::judge`]) applies once the citations and claims
    /// hold.
    #[must_use]
    pub fn check_for(
        &self,
        answer: &serde_json::Value,
        store: &SourceStore,
        question: Option<&Question>,
    ) -> Vec<Violation> {
        let superseded_ok = question.is_some_and(Question::asks_earlier_version);
        let checked = self.check_citations(answer, store, superseded_ok);
        let mut violations = checked.violations;
        if let (Some(question), true) = (question, violations.is_empty()) {
            let cited: Vec<(&str, &str, &str)> = checked
                .cited
                .iter()
                .map(|(s, v, q)| (s.as_str(), v.as_str(), q.as_str()))
                .collect();
            violations.extend(question.judge(
                &checked.text,
                &cited,
                store,
                self.citations_pointer(),
            ));
        }
        violations
    }
}

impl Question {
    /// Reads `question` against the sources of `store`: qualifiers are kept only when some
    /// source states them (a `650-yuan room` is the asker's, not a member of a series), and
    /// the subject is the question's ids and the words few sources' titles and texts state.
    #[must_use]
    pub fn new(question: &str, store: &SourceStore) -> Self {
        let as_asked = question;
        // A path or a URL in the question says where to look: its pieces are neither what is
        // asked nor names a line must state.
        // Every line, lower case, read once.
        let all_lines: Vec<String> = store
            .documents()
            .flat_map(|d| d.lines().iter())
            .map(|l| l.to_lowercase())
            .collect();
        // Every word the sources write: a word cut short (`dorm`) that they write whole
        // (`dormitory`) is read whole, and a misspelling is read as theirs.
        // And the words they write in lower case: what a misspelt word is read as (a name,
        // `Potter`, is no correction of `pottery`).
        let mut known: BTreeSet<String> = BTreeSet::new();
        let mut lowercase: BTreeSet<String> = BTreeSet::new();
        for line in store.documents().flat_map(|d| d.lines().iter()) {
            for word in words(line) {
                if word.chars().all(char::is_lowercase) {
                    lowercase.insert(word.to_owned());
                }
                known.insert(word.to_lowercase());
            }
        }
        // Whether a line writes `text` (lower case): a dotted name the sources write
        // (`server.port`) is asked about, not a place to look.
        let written = |text: &str| all_lines.iter().any(|l| l.contains(text));
        let question = &with_named_days(&without_courtesies(question), &written);
        let question = &without_locators_but(
            &corrected(&unclipped(&with_apostrophes(question), &known), &lowercase),
            |locator| !locator.contains('/') && written(&locator.to_lowercase()),
        );
        // What kind of answer the question asks for, read once.
        let answer_kind = AnswerKind::of(question);
        let mut terms: Vec<String> = Vec::new();
        for s in content_stems(question) {
            if !terms.contains(&s) {
                terms.push(s);
            }
        }
        let lower = question.to_lowercase();
        // Per source, over all its versions: its stems, its title's stems, its lower text.
        let mut sources: BTreeMap<&str, (BTreeSet<String>, BTreeSet<String>, String)> =
            BTreeMap::new();
        let mut superseded: Vec<&str> = Vec::new();
        // Each source's title (its first line), lower case.
        let mut titles: BTreeMap<String, String> = BTreeMap::new();
        let mut footnoted: BTreeMap<String, String> = BTreeMap::new();
        let mut marked_by: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut sections: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut antecedents: BTreeMap<(String, String), String> = BTreeMap::new();
        // Records that others refer to by their id (`id: pl; name: Pellinghurst Surgery`):
        // what names each, by its id.
        let referred = referred_records(store);
        let abbreviations = abbreviations(store, &referred);
        // The measures the question states as a number and a unit, read once.
        let measures = stated_measures(question);
        // "Who do I contact about …", "who should I speak to": the asker wants whoever the
        // sources name for it, not someone who does it.
        let contacting = answer_kind == AnswerKind::Person
            && words(&asking_part(question).to_lowercase())
                .iter()
                .any(|w| {
                    [
                        "contact", "ask", "speak", "talk", "ring", "phone", "email", "write",
                    ]
                    .contains(w)
                });
        for d in store.documents() {
            // A line is read with its section's heading, and with the line before it when
            // it refers back to it (`They must sleep in a private room`).
            // A record has no title or section, but its file's name says what its records
            // are (each line of `storage-backends.jsonl` is a storage backend's).
            let named = d
                .title()
                .is_none()
                .then(|| d.source_id().replace(['-', '_', '.'], " "));
            let about = d.about();
            // The document's footnotes, by their mark: a line that opens with one.
            let notes: BTreeMap<char, &str> = d
                .lines()
                .iter()
                .filter_map(|l| {
                    let mark = l.chars().next().filter(|c| is_footnote_mark(*c))?;
                    Some((mark, l.as_str()))
                })
                .collect();
            for ((line, section), (_, before)) in d.sections().zip(d.antecedents()) {
                if let Some(before) = before {
                    antecedents
                        .entry((d.source_id().to_owned(), line.to_owned()))
                        .or_insert_with(|| before.to_lowercase());
                }
                // A cell's footnote mark (`£6.80 ¹`) reads the cell with its footnote (`¹
                // The Child tier is £6.80 a month only when …`).
                let noted: Vec<&str> = line
                    .chars()
                    .skip(1)
                    .filter(|c| is_footnote_mark(*c))
                    .filter_map(|c| notes.get(&c).copied())
                    .collect();
                // Only for the conditions it states: its words would make any row of the
                // table answer for what its footnote is about.
                if !noted.is_empty() {
                    footnoted.insert(line.to_owned(), noted.join(" "));
                }
                for note in &noted {
                    let about = marked_by
                        .entry((d.source_id().to_owned(), (*note).to_owned()))
                        .or_default();
                    about.push_str(line);
                    about.push('\n');
                }
                let signed = is_signature(line);
                let context = match (section.or(named.as_deref()), before) {
                    (Some(s), Some(b)) => format!("{s} {b}"),
                    (Some(s), None) => s.to_owned(),
                    (None, Some(b)) => b.to_owned(),
                    (None, None) if signed => String::new(),
                    (None, None) => continue,
                };
                // A record that refers to another by its id (`clinic: pl`) is about what
                // that one names (`Pellinghurst Surgery`).
                let context = match refers_to(line, &referred) {
                    Some(names) => format!("{context} {names}"),
                    None => context,
                };
                // Who signs a notice (`Rhiannon Vesey, Project Liaison Officer`) is who to
                // ask about all of it: what it is about is the signature's context too, and
                // for "who do I contact about …", everything the notice says.
                // A signature is the notice's signing: "who signed it?" is answered there.
                let context = match about.as_deref().filter(|_| signed) {
                    Some(_) if contacting => {
                        format!("{context} signed {}", d.lines().join(" "))
                    }
                    Some(about) => format!("{context} signed {about}"),
                    None => context,
                };
                // Read with what its abbreviations stand for (`KIL–PVN` names Portvane).
                sections
                    .entry((d.source_id().to_owned(), line.to_owned()))
                    .or_insert_with(|| unabbreviate(&context, &abbreviations).to_lowercase());
            }
            let entry = sources.entry(d.source_id()).or_default();
            for line in d.lines() {
                let lower = line.to_lowercase();
                entry.0.extend(content_stems(line));
                entry.2.push_str(&lower);
                entry.2.push('\n');
            }
            if let Some(title) = d.about() {
                entry.1.extend(content_stems(&title));
                // What the heading says the document applies to names what each of its
                // lines speaks of, as its title does.
                let title = match d.scope() {
                    Some(scope) => format!("{title} {scope}"),
                    None => title,
                };
                titles.insert(
                    d.source_id().to_owned(),
                    unabbreviate(&title, &abbreviations).to_lowercase(),
                );
            }
            if !d.in_force() {
                superseded.push(d.version());
            }
        }
        let members = members_named(
            &lower,
            store
                .documents()
                .flat_map(|d| d.lines().iter())
                .map(String::as_str),
        );
        let mut qualifiers: Vec<Qualifier> = Vec::new();
        let mut absent: Vec<Qualifier> = Vec::new();
        // A length of time the asker states outside the asking part ("it's a 90 minute
        // slot. Do I pay up front?", "I've been on it 2 years") is their situation, which
        // a range (`longer than 45 minutes`) or a rule for any length holds: no line need
        // state it.
        let part = asking_part(question);
        let in_part = Qualifier::all_in(part);
        let asked: Vec<Qualifier> = Qualifier::all_in(question)
            .into_iter()
            .filter(|q| match q {
                Qualifier::Amount { unit, .. } => {
                    in_part.contains(q) || !TIME_UNIT_STEMS.iter().any(|u| stem(u) == *unit)
                }
                // "It wasn't sorted at stage 1. Who looks at it at stage 2?": a member of a
                // series named before the asking part, which names another member of the
                // same series, is where the asker has been, not what is asked.
                Qualifier::Label { head, value } => {
                    in_part.contains(q)
                        || !in_part.iter().any(|p| {
                            matches!(p, Qualifier::Label { head: h, value: v }
                                if h == head && v != value)
                        })
                }
            })
            .collect();
        if !asked.is_empty() {
            // Every qualifier the sources state, read once.
            let mut stated: Vec<Qualifier> = store
                .documents()
                .flat_map(|d| d.lines().iter().flat_map(|l| Qualifier::all_in(l)))
                .collect();
            // A field listing its series (`Group: C, D, E`) states each member.
            for l in store.documents().flat_map(|d| d.lines().iter()) {
                for member in listed_members(l, &asked) {
                    if !stated.contains(&member) {
                        stated.push(member);
                    }
                }
            }
            // A list keyed by bare labels under a heading that names its series states
            // each member: `4: repository locked` under `EXIT STATUS` states `status 4`.
            for d in store.documents() {
                for (line, section) in d.sections() {
                    let (Some(label), Some(section)) = (bare_label(line), section) else {
                        continue;
                    };
                    let named = content_stems(section);
                    for q in &asked {
                        if let Qualifier::Label { head, .. } = q {
                            let member = Qualifier::Label {
                                head: head.clone(),
                                value: label.clone(),
                            };
                            if named.contains(head) && !stated.contains(&member) {
                                stated.push(member);
                            }
                        }
                    }
                }
            }
            // A member of a series the sources state, but not this member (`Arm F` where
            // they state arms A to C; `the 30 mg arm` among 10, 25 and 50 mg), picks out
            // nothing: no line answers for it. An amount names a member only when it
            // qualifies a labelled series (`30 mg arm`); otherwise it is the asker's
            // situation (`3 books`, `due on 5 June`), and so is a yes-or-no question's
            // qualifier (`Can I keep it for 30 days?`), which a stated rule may settle.
            let yes_no = answer_kind == AnswerKind::YesNo;
            let heads: BTreeSet<&str> = stated
                .iter()
                .filter_map(|s| match s {
                    Qualifier::Label { head, .. } => Some(head.as_str()),
                    Qualifier::Amount { .. } => None,
                })
                .collect();
            // A unit the sources glue to its number before a noun (`4-bed house`, `12-month
            // contract`) names kinds of the thing: the asker's `5 bed house` is one of them.
            let kinds = compound_units(&all_lines);
            let amount_member = |value: &str, unit: &str| {
                amount_followers(question, value, unit)
                    .iter()
                    .any(|w| heads.contains(stem(w).as_str()))
            };
            // `calpetrant 35 mg` reads as a label too; the amount decides, unless the label
            // is written as a name (`Bus 22 leave` is no amount of `leave`).
            let question_tokens: Vec<&str> = question.split_whitespace().collect();
            let named = |head: &str, value: &str| {
                question_tokens.windows(2).any(|w| {
                    w[0].chars().next().is_some_and(char::is_uppercase)
                        && stem(w[0].trim_matches(|c: char| !c.is_alphanumeric())) == head
                        && w[1]
                            .trim_matches(|c: char| !c.is_alphanumeric())
                            .eq_ignore_ascii_case(value)
                })
            };
            let member = |q: &Qualifier| match q {
                Qualifier::Label { head, value } => asked.iter().all(|a| match a {
                    Qualifier::Amount { value: v, unit } => {
                        v != value || named(head, value) || amount_member(v, unit)
                    }
                    Qualifier::Label { .. } => true,
                }),
                // The asker's own measure (`a unit of about 40 sq ft`) is held against
                // the ranges stated ([`Question::measure_fits`]), not looked for as a member.
                Qualifier::Amount { value, unit } => {
                    kinds.contains(unit)
                        || amount_member(value, unit)
                            && !stated_measures(&format!("{value} {unit}"))
                                .first()
                                .is_some_and(|m| measures.contains(m))
                }
            };
            for q in asked.iter().cloned() {
                if stated.contains(&q) {
                    if !qualifiers.contains(&q) {
                        qualifiers.push(q);
                    }
                } else if stated.iter().any(|s| s.same_series(&q))
                    && !yes_no
                    && member(&q)
                    && !absent.contains(&q)
                {
                    absent.push(q);
                }
            }
        }
        // The question's tokens, lower case, without the punctuation around them.
        let raw: Vec<String> = question
            .split_whitespace()
            .map(|t| {
                t.trim_matches(|c: char| !c.is_alphanumeric())
                    .trim_end_matches("'s")
                    .to_lowercase()
            })
            .collect();
        // Ids: tokens with a letter and a digit (`NCT05550001`, `VELA-2`, `E04`) that a
        // source states.
        let (ids, unknown_ids): (Vec<String>, Vec<String>) = id_tokens(question)
            .into_iter()
            .partition(|t| sources.values().any(|s| s.2.contains(t.as_str())));
        let limit = (sources.len() / 4).max(1);
        let mut names: Vec<(String, f64)> = if sources.len() < 4 {
            Vec::new()
        } else {
            terms
                .iter()
                .filter(|t| !t.chars().any(|c| c.is_ascii_digit()) && t.chars().count() >= 3)
                .filter_map(|t| {
                    let in_text = sources.values().filter(|s| s.0.contains(t)).count();
                    let in_title = sources.values().filter(|s| s.1.contains(t)).count();
                    (in_title > 0 && in_text > 0 && in_text <= limit)
                        .then(|| (t.clone(), 1.0 / in_text as f64))
                })
                .collect()
        };
        // Words at least half of the sources state: the domain's, not a question's.
        let common: BTreeSet<String> = if sources.len() < 4 {
            BTreeSet::new()
        } else {
            terms
                .iter()
                .filter(|t| {
                    sources.values().filter(|s| s.0.contains(*t)).count() * 2 >= sources.len()
                })
                .cloned()
                .collect()
        };
        // The two sides of an `A or B` question, when the sources state one of them. Each
        // side is its nearest content word with the function words that lead the second
        // side, when the first has them too: "per person or per room" weighs `per person`
        // against `per room`, and a line saying only `the room` states neither.
        let alternatives: Vec<Vec<String>> = {
            let w = words(&lower);
            let mut sides: Vec<Vec<String>> = Vec::new();
            for i in (0..w.len()).filter(|&i| w[i] == "or") {
                let right = (i + 1..w.len()).find(|&k| !is_function_word(w[k]));
                let left = (0..i).rev().find(|&j| !is_function_word(w[j]));
                let (Some(k), Some(j)) = (right, left) else {
                    continue;
                };
                let lead = &w[i + 1..k];
                let left_start = if j >= lead.len() && &w[j - lead.len()..j] == lead {
                    j - lead.len()
                } else {
                    j
                };
                sides.push(w[left_start..=j].iter().map(|w| stem(w)).collect());
                sides.push(w[i + 1..=k].iter().map(|w| stem(w)).collect());
            }
            let stated = |side: &Vec<String>| {
                side.last()
                    .is_some_and(|a| sources.values().any(|s| s.0.contains(a)))
            };
            if sides.iter().any(stated) {
                sides
            } else {
                Vec::new()
            }
        };
        let tokens = words(&lower);
        let age = |i: usize| is_age_old(&tokens, i);
        let earlier = asks_earlier(question, &superseded) || asks_of_earlier_years(question, store);
        // "The earlier fees schedule", "the old rules": the words that ask for an earlier
        // version and the words they qualify name the version asked about, not what is
        // asked of it.
        let version_words: BTreeSet<String> = if earlier {
            (0..tokens.len())
                .filter(|&i| marks_earlier(&tokens, i) && !age(i))
                .flat_map(|i| {
                    let before = tokens[i] == "before";
                    let phrase: Vec<&str> = std::iter::once(tokens[i])
                        .chain(
                            tokens[i + 1..]
                                .iter()
                                .copied()
                                // `before the April 2025 change`: the article opens the phrase.
                                .skip_while(move |w| before && ["the", "a", "an"].contains(w))
                                .take_while(|w| !is_function_word(w))
                                .take(3),
                        )
                        .collect();
                    // `before the prices went up` reads `increase` as well.
                    let read: Vec<String> = content_words(&reading(&tokens[i..].join(" ")))
                        .into_iter()
                        .take(phrase.len())
                        .map(str::to_lowercase)
                        .collect();
                    phrase
                        .into_iter()
                        .map(stem)
                        .chain(read.iter().map(|w| stem(w)))
                        .collect::<Vec<_>>()
                })
                .collect()
        } else {
            BTreeSet::new()
        };
        // Nor do they name its subject: "the old rules" asks about every source's earlier
        // version, not about the one source whose title says `rules`.
        names.retain(|(n, _)| !version_words.contains(n));
        // What the question asks beyond its subject (`sites` in "How many sites does
        // CALM-PREVENT have?"). Not part of it: the subject (its ids when it names one, else
        // its rare names), the word after `which` or `what` (the kind of thing asked for:
        // `which trial`, `what kind of drug`), and the word right before an id (what the id
        // is: `trial NCT05234567`).
        let asked_words = words(&lower);
        let mut answer_type: Vec<String> = Vec::new();
        let mut answer_phrase: Vec<String> = Vec::new();
        let mut listed = None;
        if let Some(i) = asked_words
            .windows(2)
            .position(|p| ["which", "what"].contains(&p[0]) && !is_function_word(p[1]))
        {
            // "Which insurance company": the kind asked is the organisation; what kind of
            // one (`insurance`) is asked beyond it, and must be stated.
            let organisation = asked_words
                .get(i + 2)
                .filter(|w| ORGANISATIONS.contains(w))
                .unwrap_or(&asked_words[i + 1]);
            answer_type.push(stem(organisation));
            answer_phrase = asked_words[i + 1..]
                .iter()
                .take_while(|w| !is_function_word(w))
                .take(3)
                .map(|w| stem(w))
                .collect();
            let kind = asked_words[i + 1];
            if kind.len() > 3 && kind.ends_with('s') && !kind.ends_with("ss") && stem(kind) != kind
            {
                listed = Some(stem(kind));
            }
            if ["kind", "type", "sort", "form", "class"].contains(&asked_words[i + 1])
                && asked_words.get(i + 2) == Some(&"of")
            {
                if let Some(w) = asked_words.get(i + 3) {
                    answer_type.push(stem(w));
                }
            }
        }
        // The words before an id name what it is: the one right before it (`code` of
        // `code E05`), and the one qualifying that (`error` of "what does error code E05
        // mean?"), unless it is a number or another id; a line about the id need not repeat
        // them (`code: E05; meaning: …`).
        let mut id_types: Vec<String> = (1..raw.len())
            .filter(|&i| ids.contains(&raw[i]) && !is_function_word(&raw[i - 1]))
            .flat_map(|i| {
                let qualifier = i.checked_sub(2).map(|j| &raw[j]).filter(|w| {
                    !is_function_word(w)
                        && !w.chars().any(|c| c.is_ascii_digit())
                        && !ids.contains(w)
                });
                std::iter::once(&raw[i - 1])
                    .chain(qualifier)
                    .map(|w| stem(w))
            })
            .collect();
        // So does a noun after an id that ends its phrase (`the whole T2 line?`), when the
        // sources write it before an id as a kind (`Trams on line T2`); not one another
        // noun follows (`the T2 track work`), which is what is asked about, nor a word no
        // source writes as a kind (`Arm A sauna`).
        let kinds_of_ids: BTreeSet<String> = if ids.is_empty() {
            BTreeSet::new()
        } else {
            all_lines
                .iter()
                .flat_map(|l| {
                    let w = words(l);
                    (1..w.len())
                        .filter(|&i| !id_tokens(w[i]).is_empty())
                        .map(|i| stem(w[i - 1]))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        id_types.extend(
            (1..raw.len())
                .filter(|&i| {
                    ids.contains(&raw[i - 1])
                        && !is_function_word(&raw[i])
                        && raw.get(i + 1).is_none_or(|w| is_function_word(w))
                })
                .map(|i| stem(&raw[i]))
                .filter(|t| kinds_of_ids.contains(t)),
        );
        // A capitalised word after the first (`Wren Hill Library`) names the subject, however
        // many lines state it.
        // So does a name written in lower case (`the head nurse at pellinghurst`) that the
        // sources only ever write with a capital, and that is no everyday word.
        let names_only = names_written_only_capitalised(store);
        let question_words = words(question);
        let capitals: Vec<&str> = question_words
            .iter()
            .copied()
            .enumerate()
            .filter(|(i, w)| {
                // A brand's `iPhone` or `eSIM`, capitalised inside, is a name wherever it is.
                let camel = w.chars().next().is_some_and(char::is_lowercase)
                    && w.chars().skip(1).any(char::is_uppercase);
                let capital = (*i > 0
                    && w.chars().next().is_some_and(char::is_uppercase)
                    && !opens_sentence(question, w))
                    || camel;
                let lower_name = w.chars().all(char::is_lowercase)
                    && w.chars().count() >= 4
                    && !is_common_word(w)
                    && names_only.contains(*w);
                // A kind of a thing everyday words name (`Newfoundland`, a dog) is no name,
                // unless it goes on a name (`Plan` of `Harrowvale Care Plan`).
                // (The word before is past the first, which any question capitalises.)
                let goes_on = capital
                    && *i > 1
                    && question_words[*i - 1].starts_with(char::is_uppercase)
                    && !is_function_word(question_words[*i - 1]);
                (capital || lower_name)
                    && !is_function_word(w)
                    && (goes_on || !stem(w).ends_with('+'))
            })
            .map(|(_, w)| w)
            .collect();
        let capitalised: BTreeSet<String> = capitals.iter().map(|w| stem(w)).collect();
        // The word after `how` (`how long`, `how late`, `how much`) is the measure asked
        // for, which the answer's kind already checks, not a word the answer must repeat;
        // and light words (`still`, `get`, `thing`) say little of what is asked, nor does a
        // verb of regard before `as` (`counted as lost`: a line says `treated as lost`).
        let light: BTreeSet<String> = asked_words
            .windows(2)
            .filter_map(|p| {
                if p[0] == "how" {
                    Some(stem(p[1]))
                } else if p[1] == "as" && REGARD_VERBS.iter().any(|v| stem(v) == stem(p[0])) {
                    Some(stem(p[0]))
                } else {
                    None
                }
            })
            .chain(
                asked_words
                    .iter()
                    .copied()
                    // and a set phrase read as a light word (`at the moment`: currently).
                    .chain(words(&reading(&lower)))
                    .filter(|w| is_light_word(w))
                    .map(stem),
            )
            .collect();
        // An age the question states (`my 9-year-old`, `two weeks old`) is the asker's, as
        // its number is: neither its unit nor `old` is what is asked.
        let aged: BTreeSet<String> = (1..tokens.len())
            .filter(|&i| age(i))
            .flat_map(|i| [stem(tokens[i - 1]), stem(tokens[i])])
            // So is the unit of a length of time they state (`for a week`, `a month in
            // Spain`): how long is theirs, not what is asked.
            .chain(
                (1..tokens.len())
                    .filter(|&i| {
                        days_per(tokens[i]).is_some()
                            && (["a", "an", "one"].contains(&tokens[i - 1])
                                || tokens[i - 1].chars().all(|c| c.is_ascii_digit())
                                || NUMBER_WORDS.contains(&tokens[i - 1]))
                    })
                    .map(|i| stem(tokens[i])),
            )
            .collect();
        // So is a measure's unit (`km` of `150g/km`): the asker's, like the number.
        // The unit as the asker wrote it (`kilos`) and the verb that states the measure
        // (`she weighs 30 kilos`) are the asker's too.
        // A part of the day after `in the` in a question asking a clock time (`open in
        // the morning`) is what the time itself says.
        let dayparts: BTreeSet<String> = if AnswerKind::of(as_asked) == AnswerKind::Time {
            (2..tokens.len())
                .filter(|&i| {
                    tokens[i - 2] == "in"
                        && tokens[i - 1] == "the"
                        && ["morning", "afternoon", "evening"].contains(&tokens[i])
                })
                .map(|i| stem(tokens[i]))
                .collect()
        } else {
            BTreeSet::new()
        };
        let measured: BTreeSet<String> = measures
            .iter()
            .flat_map(|(unit, _)| words(unit).into_iter().map(stem).collect::<Vec<_>>())
            .chain(measure_words(question).iter().map(|w| stem(w)))
            .collect();
        // The asker's description of their own kind of a thing in words no source writes
        // (`my golden retriever`, where a retriever is a dog): which one of its kind it is,
        // not what is asked (`her junior card` still asks of a junior card). And the
        // word for a place in a question asking where (`your storage place`) is the kind
        // of answer, which the answer's kind checks.
        let described: BTreeSet<String> = (0..tokens.len())
            .filter(|&j| ["my", "our", "his", "her", "their"].contains(&tokens[j]))
            .flat_map(|j| {
                let run: Vec<&str> = tokens[j + 1..]
                    .iter()
                    .take(3)
                    .take_while(|w| !is_function_word(w) && w.chars().all(char::is_alphabetic))
                    .copied()
                    .collect();
                let kind = run.last().is_some_and(|head| stem(head).ends_with('+'));
                let modifiers = if kind { run.len() - 1 } else { 0 };
                run.into_iter().take(modifiers)
            })
            .map(stem)
            .filter(|t| !sources.values().any(|s| s.0.contains(t)))
            .chain(
                (AnswerKind::of(as_asked) == AnswerKind::Place)
                    .then_some(["place", "location", "spot"])
                    .into_iter()
                    .flatten()
                    .map(stem),
            )
            .collect();
        let beyond: Vec<String> = terms
            .iter()
            .filter(|t| {
                let named = ids.is_empty() && names.iter().any(|(n, _)| n == *t);
                // A number the question states is the asker's (`I'm 70`), not what it asks;
                // so is a measure or a date written with one (`150g`, `13th`).
                let number = t.chars().next().is_some_and(|c| c.is_ascii_digit());
                !named
                    && !number
                    && !aged.contains(*t)
                    && !dayparts.contains(*t)
                    && !measured.contains(*t)
                    && !described.contains(*t)
                    && !light.contains(*t)
                    && !capitalised.contains(*t)
                    && !ids.iter().any(|id| content_stems(id).contains(t))
                    && !answer_type.contains(t)
                    && !id_types.contains(t)
                    && !version_words.contains(*t)
            })
            .cloned()
            .collect();
        // "Is my dog allowed on the tram?": whether it is allowed is what any rule says; the
        // line must state what it allows (`dogs`), not only that it allows something.
        let beyond: Vec<String> = {
            let permits = [stem("allowed"), stem("forbidden")];
            let rest: Vec<String> = beyond
                .iter()
                .filter(|t| !permits.contains(t))
                .cloned()
                .collect();
            if AnswerKind::of(as_asked) == AnswerKind::YesNo && !rest.is_empty() {
                rest
            } else {
                beyond
            }
        };
        // A word most sources use (`study`, `policy`) shows nothing was answered; when the
        // question has rarer ones, one of those must be stated.
        let telling: Vec<String> = beyond
            .iter()
            .filter(|t| !common.contains(*t))
            .cloned()
            .collect();
        // What is asked in a word no line of any source states, and not an everyday one
        // (`violins` in "How many violins does the room hold?"): a line can share the rest
        // of the question, but it cannot say this. An everyday word (`available`, `money`, `switching`) may be answered in
        // other words, so it is not held against the sources ([`is_everyday_word`]).
        let redone = reading(question);
        // A misspelling (`peopel`) is not a rare word: one edit from a common word or a
        // word of the sources (`known`, which also reads clipped words), it is read as
        // that word.
        // So is a word that qualifies the kind of thing asked for (`vegan` in "what vegan
        // food does the café do?"): the kind need not be stated, what picks it must be.
        let qualifying = answer_phrase
            .split_last()
            .map(|(_, modifiers)| modifiers.to_vec())
            .unwrap_or_default();
        // The pieces of every record's keys (`dist`, `ext`, `hrs` of `ext_hrs`), read once.
        let record_keys: BTreeSet<String> = store
            .documents()
            .flat_map(|d| d.lines().iter())
            .filter_map(|l| record_fields(l))
            .flatten()
            .filter_map(|f| f.split_once(": ").map(|(k, _)| k))
            .flat_map(words)
            .map(str::to_lowercase)
            .collect();
        // A word a record's terse key stands for (`district` of `dist: Castlegate`) is one
        // the sources state; so is the form of contact asked for ("What's the
        // postcode?"), which a line states in its own shape ([`Contact::stated`]), whatever
        // a record calls it (`pc`).
        let asked_contact = Contact::asked(&lower, answer_kind);
        let stated_otherwise = |w: &str| {
            record_keys.iter().any(|k| abbreviates(k, w))
                || asked_contact.is_some_and(|c| c.naming_stems().contains(&stem(w)))
        };
        let mut unheard: Vec<String> = beyond
            .iter()
            .chain(qualifying.iter().filter(|t| !beyond.contains(t)))
            .filter(|t| !sources.values().any(|s| s.0.contains(*t)))
            .filter_map(|t| {
                let written: Vec<&str> = content_words(&redone)
                    .into_iter()
                    .filter(|w| stem(w) == *t)
                    .collect();
                // A limit asked for (`the oldest release`) is stated as one (`min_version`).
                // A noun made of a word the sources write (`seven-seater` of `Seats: 7`)
                // is theirs.
                let derived = |w: &str| {
                    let lower = w.to_lowercase();
                    lower.strip_suffix("er").is_some_and(|root| {
                        root.chars().count() >= 3
                            && sources.values().any(|s| s.0.contains(&stem(root)))
                    })
                };
                (!written.iter().any(|w| {
                    is_everyday_word(w)
                        || derived(w)
                        || LIMIT_ASKED.contains(&w.to_lowercase().as_str())
                }))
                .then(|| written.first().map(|w| w.to_lowercase()))
                .flatten()
            })
            .filter(|w| !is_misspelling(w, &known))
            .filter(|w| !stated_otherwise(w))
            // A number's word (`the 4th Saturday`) is a number, which the sources state
            // in their own way (`the 1st and 3rd Saturday`).
            .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
            .collect();
        // What the asker says of themselves around the asking part ("Im terrified of the
        // drill. How much is sedation?") is not what is asked, when the asking part names
        // something of its own: a word only there that no source states does not make the
        // question one the sources cannot answer.
        let asking = asking_stems(question, &beyond);
        unheard.retain(|w| asking.contains(&stem(w)));
        // What is asked in a word only a few lines state (`ferret`, `rabies`): the sources
        // speak of it there, and a line that does not say it is about something else.
        // Only in the main clause of the asking part: a clause after `before`, `that` or
        // `so` (`how long does it last before I need to renew?`, `the fund that gives
        // grants for debts`) says when or which, in the asker's words.
        let main_clause: BTreeSet<String> = {
            const SUBORDINATORS: [&str; 14] = [
                "that", "which", "who", "so", "because", "before", "after", "if", "once", "until",
                "while", "since", "when", "whether",
            ];
            let part = words(asking_part(question));
            let end = part
                .iter()
                .enumerate()
                .skip(1)
                .find(|(_, w)| SUBORDINATORS.contains(&w.to_lowercase().as_str()))
                .map_or(part.len(), |(i, _)| i);
            part[..end]
                .iter()
                .filter(|w| !is_function_word(w))
                .map(|w| stem(w))
                .collect()
        };
        // Each candidate with the word it is written as.
        let asked_words = content_words(&redone);
        let candidates: Vec<(&String, String)> = beyond
            .iter()
            .filter(|t| {
                asking.contains(*t)
                    && main_clause.contains(*t)
                    && !common.contains(*t)
                    && !answer_type.contains(*t)
                    && t.chars().count() >= 3
                    && !t.chars().any(|c| c.is_ascii_digit())
                    // Only a word rare in English too: an everyday word (`app`, `wait`) is
                    // said in other words as often as in this one.
                    && !asked_words
                        .iter()
                        .any(|w| stem(w) == **t && is_common_word(w))
            })
            .filter_map(|t| {
                let written = asked_words.iter().find(|w| stem(w) == *t)?;
                Some((t, written.to_lowercase()))
            })
            .collect();
        // Counted by the word's stem (`curated` meets `curator`), or, where the stem's
        // first letters are another word's too, by its whole base form (`discoloured` is rare
        // where `discount` is everywhere). A word of a group of related ones (`laptop` of
        // computers) counts every word of its group.
        let rare: Vec<(String, String, BTreeSet<String>)> = if candidates.is_empty() {
            Vec::new()
        } else {
            let line_words: Vec<(&str, BTreeSet<String>)> = store
                .documents()
                .flat_map(|d| d.lines().iter().map(move |l| (d.source_id(), l)))
                .map(|(id, l)| (id, rare_forms(l)))
                .collect();
            let few = |key: &String| {
                let n = line_words.iter().filter(|(_, s)| s.contains(key)).count();
                (1..=RARE_LINES).contains(&n)
            };
            candidates
                .into_iter()
                .filter_map(|(t, written)| {
                    let key = [t.clone(), rare_form(&written)].into_iter().find(few)?;
                    let stating = line_words
                        .iter()
                        .filter(|(_, s)| s.contains(&key))
                        .map(|(id, _)| (*id).to_owned())
                        .collect();
                    Some((key, written, stating))
                })
                .collect()
        };
        // Only a noun phrase's two words after its determiner (`a car trailer`), so that
        // `open round the clock` or `it's sunday afternoon` is none.
        const DETERMINERS: [&str; 16] = [
            "a", "an", "the", "my", "our", "your", "his", "her", "their", "this", "that", "these",
            "those", "any", "some", "every",
        ];
        // After an auxiliary (`does the office open on sundays`) the second word is the
        // verb unless yet another content word follows (`does the car trailer need …`).
        const AUXILIARIES: [&str; 14] = [
            "do", "does", "did", "will", "would", "can", "could", "should", "shall", "may",
            "might", "must", "is", "are",
        ];
        let asked = words(&redone);
        let content = |w: &str| {
            w.chars().all(char::is_lowercase)
                && !is_function_word(w)
                && !is_light_word(w)
                && !is_weekday(w)
        };
        let compounds: Vec<(String, String)> = (0..asked.len().saturating_sub(2))
            .filter(|&i| {
                DETERMINERS.contains(&asked[i].to_lowercase().as_str())
                    && content(asked[i + 1])
                    && content(asked[i + 2])
                    && !(i > 0
                        && AUXILIARIES.contains(&asked[i - 1].to_lowercase().as_str())
                        && !asked.get(i + 3).is_some_and(|w| content(w)))
            })
            .map(|i| (stem(asked[i + 1]), stem(asked[i + 2])))
            // A head that no source states at all (`trailer`): a line stating the
            // modifier alone cannot be about it.
            .filter(|(m, h)| {
                m != h
                    && beyond.contains(m)
                    && beyond.contains(h)
                    && !sources.values().any(|s| s.0.contains(h))
            })
            .collect();
        let beyond = if telling.is_empty() { beyond } else { telling };
        let limit_beyond = beyond.iter().any(|t| {
            LIMIT_ASKED.iter().any(|w| stem(w) == *t)
                || (answer_kind == AnswerKind::Time
                    && ["last", "final", "cutoff"].iter().any(|w| stem(w) == *t))
        });
        // A measure outside every band the sources state of its unit (`250 sq ft` where
        // the bands stop at `121–175 sq ft`), when they state it in bands, is one they
        // give nothing for.
        for (unit, n) in &measures {
            let bands: BTreeSet<(u64, u64)> = all_lines
                .iter()
                .flat_map(|l| measure_ranges(l))
                .filter(|(u, ..)| u == unit)
                .map(|(_, lo, hi)| (lo.to_bits(), hi.to_bits()))
                .collect();
            let held = bands
                .iter()
                .any(|(lo, hi)| f64::from_bits(*lo) <= *n && *n <= f64::from_bits(*hi));
            if bands.len() >= 3 && !held {
                unheard.push(format!("{n} {unit}"));
            }
        }
        // What a `what is the …` question asks for, in a word no line of any source states,
        // even a common one (`speed` in "What is the speed limit for trams?"): the sources
        // state what they have a value for, so none of them answers it.
        // Read as the sources are (`wi-fi` is `wifi`).
        let read = reading(&lower).to_lowercase();
        for w in attribute_phrase(&read) {
            let t = stem(w);
            if !GENERIC_ATTRIBUTES.contains(&w)
                && !LIMIT_ASKED.contains(&w)
                && !light.contains(&t)
                && !version_words.contains(&t)
                && !sources.values().any(|s| s.0.contains(&t))
                && !stated_otherwise(w)
                && !unheard.iter().any(|u| u == w)
            {
                unheard.push(w.to_owned());
            }
        }
        // What a permission is asked for (`chickens` in "can I keep a few chickens in my
        // garden?"), in a word no line of any source states, even a common one: a rule
        // about something else (`dishes`) does not say whether one may. (`permitted_object`
        // is `None` unless the question asks a permission.)
        if let Some(w) = permitted_object(&read) {
            // A misspelling of the sources' word is theirs; one edit from a common word
            // is not (`chickens` of `chicken`).
            let theirs = w.chars().count() >= 5
                && known
                    .iter()
                    .any(|k| k.len().abs_diff(w.len()) <= 1 && strsim::osa_distance(k, w) == 1);
            if !sources.values().any(|s| s.0.contains(&stem(w)))
                && !theirs
                && !unheard.iter().any(|u| u == w)
            {
                unheard.push(w.to_owned());
            }
        }
        let counted = counted_phrase(&lower);
        // "How many days overdue … in the fees": what is counted is the measure; a sum of
        // money only when money is what is counted.
        let measure = Measure::asked(&lower)
            .filter(|m| counted.is_empty() || Measure::asked(&counted.join(" ")) == Some(*m));
        // Proper names: capitalized words after the first (`Northgate`, `DSMB`), not a
        // label's letter, kept when at most one line in ten states them; a name no line
        // states at all means the sources cannot answer.
        let mut proper: Vec<String> = Vec::new();
        let mut heads: BTreeMap<String, String> = BTreeMap::new();
        // An id written with a capital (`NCT09999999`, `E17`) that no source states names
        // something the sources cannot answer about: a line about another trial does not
        // answer for it. A unit or an ordinal (`10mg`, `2nd`) is written in lower case.
        let mut unstated: Vec<String> = question
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_uppercase))
            .flat_map(id_tokens)
            .filter(|t| unknown_ids.contains(t))
            .collect();
        // So does a name written as a machine writes it (`network.proxy`, `max_jobs`): a
        // setting or a file no source states is not one they describe.
        // A file the question names by its source's name (`faq.md`) is stated.
        let file = |t: &str| {
            t.rsplit_once('.')
                .is_some_and(|(name, _)| sources.keys().any(|id| id.eq_ignore_ascii_case(name)))
        };
        unstated.extend(
            identifiers(as_asked)
                .into_iter()
                .filter(|t| !written(t) && !file(t)),
        );
        unstated.dedup();
        for w in &capitals {
            // An id (`NCT06234567`) is the subject's, which `on_subject` checks per source.
            let id = w.chars().any(|c| c.is_ascii_digit());
            // `April` in "before the April 2025 change" names the version asked about.
            if id || w.chars().count() < 3 || version_words.contains(&stem(w)) {
                continue;
            }
            let lower = w.to_lowercase();
            let stating = all_lines.iter().filter(|l| states_name(l, &lower)).count();
            if stating == 0 {
                if mentioned_in_passing(question, w) {
                    continue;
                }
                if !unstated.contains(&lower) {
                    unstated.push(lower);
                }
            } else if stating * 10 <= all_lines.len() && !proper.contains(&lower) {
                let all = words(question);
                let head = all
                    .iter()
                    .position(|x| x == w)
                    .and_then(|i| all.get(i + 1))
                    .filter(|h| {
                        h.chars().next().is_some_and(char::is_uppercase)
                            && h.chars().skip(1).all(char::is_lowercase)
                            && h.chars().count() >= 3
                    });
                if let Some(head) = head {
                    heads.insert(lower.clone(), head.to_lowercase());
                }
                proper.push(lower);
            }
        }
        let runs: BTreeMap<String, Vec<String>> = proper
            .iter()
            .filter_map(|n| {
                capital_runs(question)
                    .into_iter()
                    .find(|r| r.len() >= 2 && r.contains(n))
                    .map(|r| (n.clone(), r))
            })
            .collect();
        // What a record about a named thing says of it in a key and a short value (`zone:
        // 1` of `country: Portugal`): a line that writes the two together (`Zone 1
        // countries`) speaks of the thing by its kind, and of nothing else the record is.
        let mut kinds: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
        // Every key of those records (`address`), for the asking part to name.
        let mut own_keys: BTreeSet<String> = BTreeSet::new();
        for n in &proper {
            for line in &all_lines {
                let Some(fields) = record_fields(line) else {
                    continue;
                };
                let pairs: Vec<(&str, &str)> =
                    fields.iter().filter_map(|f| f.split_once(": ")).collect();
                // The record is the thing's own: a field's whole value names it.
                let own = pairs.iter().any(|(_, v)| {
                    let value = words(v);
                    !value.is_empty()
                        && value.iter().any(|w| w.eq_ignore_ascii_case(n))
                        && value
                            .iter()
                            .all(|w| proper.iter().any(|p| w.eq_ignore_ascii_case(p)))
                });
                if !own {
                    continue;
                }
                own_keys.extend(pairs.iter().flat_map(|(k, _)| words(k)).map(stem));
                for (k, v) in &pairs {
                    let (key, value) = (words(k), words(v));
                    if key.is_empty()
                        || key.len() > 2
                        || value.is_empty()
                        || value.len() > 3
                        || ["null", "true", "false", "none", "yes", "no"]
                            .contains(&v.trim().to_lowercase().as_str())
                        || value.iter().any(|w| w.eq_ignore_ascii_case(n))
                    {
                        continue;
                    }
                    let phrase: Vec<String> =
                        key.iter().chain(&value).map(|w| w.to_lowercase()).collect();
                    kinds.entry(n.clone()).or_default().push(phrase);
                }
            }
        }
        // A question asking one of those keys of the named thing (`I need to send a
        // parcel to the Cambridge office. What's the address?`) asks what its record
        // says: what the asker means to do with it (`parcel`) is theirs, not asked.
        let part: BTreeSet<String> = content_words(asking_part(question))
            .into_iter()
            .map(stem)
            .collect();
        if part.iter().any(|t| own_keys.contains(t)) {
            unheard.retain(|w| part.contains(&stem(w)));
        }
        // The text of each source, when the question names a day or a month: a line
        // that states no day or month is read as its source's (see `names_stated`).
        let dated: BTreeMap<String, String> = if proper.iter().any(|n| is_calendar_word(n)) {
            sources
                .iter()
                .map(|(id, (_, _, text))| ((*id).to_owned(), text.clone()))
                .collect()
        } else {
            BTreeMap::new()
        };
        let sources = if ids.is_empty() && names.is_empty() {
            BTreeMap::new()
        } else {
            sources
                .into_iter()
                .map(|(id, (stems, _, text))| (id.to_owned(), (stems, text)))
                .collect()
        };
        Self {
            text: as_asked.to_owned(),
            kind: answer_kind,
            terms,
            qualifiers,
            ids,
            names,
            beyond,
            compounds,
            alternatives,
            asked_amounts: amounts(question),
            asked_times: times(question),
            counted,
            point: asks_point_in_time(&lower),
            clock: asks_time_of_day(&lower),
            predicate: asked_verb(question),
            event: asked_event(question),
            progressive: asks_progressive(question),
            range_side: asked_range_side(question),
            permission: asks_permission(question),
            asks_limit: words(&lower).iter().any(|w| LIMIT_ASKED.contains(w)),
            measure,
            proper,
            heads,
            runs,
            kinds,
            unstated,
            unheard,
            rare,
            age: stated_age(question),
            party: stated_party(question),
            lengths: stated_lengths(question),
            // Only days named whole: "over the weekend" is matched as a word.
            days: days_stated(question).filter(|_| words(question).iter().any(|w| is_weekday(w))),
            day_words: day_words(question),
            absent,
            members,
            releases: stated_releases(question),
            measures,
            years: stated_years(question),
            dates: stated_dates(question),
            contact: asked_contact,
            titles,
            dated,
            footnoted,
            marked_by,
            denied: denied_words(as_asked),
            defines: asked_code(question, &abbreviations),
            periods: rate_periods(question),
            limit_beyond,
            abbreviations,
            antecedents,
            sections,
            earlier,
            answer_type,
            answer_phrase,
            listed,
            asks_title: words(&lower)
                .iter()
                .any(|w| ["title", "titled", "called", "name", "named", "heading"].contains(w)),
            asker_verb: asker_verb(&lower),
            sources,
        }
    }

    /// Whether `line` says what the writer of the sources (`we`) does with the verb the
    /// question asks the asker to do: "how much notice did I have to give?" is not answered
    /// by `We may end the licence by giving you 14 days' notice`, which is the notice the
    /// asker is given, but by `You may end it by giving us 7 days' notice`.
    #[must_use]
    pub fn other_party_does(&self, line: &str) -> bool {
        let Some(verb) = &self.asker_verb else {
            return false;
        };
        let tokens = words(line);
        tokens.first().is_some_and(|w| w.eq_ignore_ascii_case("we"))
            && tokens.iter().any(|w| stem(w) == *verb)
    }

    /// The question as asked.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The content stems of the part of the question that asks ("how much is sedation?"
    /// of "how much is sedation? Im terrified of the drill"), when it names something of
    /// its own; otherwise those of the whole question, whose context says what `it` is.
    #[must_use]
    pub fn asking_stems(&self) -> Vec<String> {
        asking_stems(&self.text, &self.beyond)
    }

    /// The kind of fact asked for.
    #[must_use]
    pub fn kind(&self) -> AnswerKind {
        self.kind
    }

    /// The question's content words, stemmed, each once, in order.
    #[must_use]
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The qualifiers the answer must state (and whose siblings it must not).
    #[must_use]
    pub fn qualifiers(&self) -> &[Qualifier] {
        &self.qualifiers
    }

    /// The kind of thing asked for, as stems (`trial` in "which trial", `kind` and `drug` in
    /// "what kind of drug"): words that describe the answer, which a line need not state.
    #[must_use]
    pub fn answer_type(&self) -> &[String] {
        &self.answer_type
    }

    /// How many members of the kind a plural `which` question asks for `text` names (`Arm C`
    /// and `Arm A` for "which arms were terminated"): 0 when the question asks for one.
    #[must_use]
    pub fn members_named(&self, text: &str) -> usize {
        let Some(kind) = &self.listed else {
            return 0;
        };
        let named: BTreeSet<String> = Qualifier::all_in(text)
            .into_iter()
            .filter_map(|q| match q {
                Qualifier::Label { head, value } if &head == kind => Some(value),
                _ => None,
            })
            .collect();
        named.len()
    }

    /// What the question asks beyond its subject, as stems (`sites` in "How many sites does
    /// CALM-PREVENT have?"): an answer states at least one of them.
    #[must_use]
    pub fn beyond(&self) -> &[String] {
        &self.beyond
    }

    /// Whether `line` states what a `when` question asks to happen ([`Self::event`]:
    /// `reopens` for "when does the practice open again"); `false` when it asks none.
    #[must_use]
    pub fn states_event(&self, line: &str) -> bool {
        let stems = content_stems(line);
        self.kind == AnswerKind::Time
            && self
                .event
                .as_ref()
                .is_some_and(|e| e.iter().any(|e| stems.contains(e)))
    }

    /// The words that name the question's subject, each with its weight (the rarer, the
    /// heavier), and the ids it names.
    #[must_use]
    pub fn subject(&self) -> (&[String], &[(String, f64)]) {
        (&self.ids, &self.names)
    }

    /// Whether `line` names ids written with a capital (`N1`, `NCT05550001`) and none of
    /// those the question names: a record of another route or trial, not of the asked one.
    #[must_use]
    pub fn names_other_ids(&self, line: &str) -> bool {
        if self.ids.is_empty() {
            return false;
        }
        let named: Vec<String> = line
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_uppercase))
            .flat_map(id_tokens)
            .collect();
        !named.is_empty() && !named.iter().any(|t| self.ids.contains(t))
    }

    /// How many of the ids the question names `line` states (`grade M2` for "I'm on grade
    /// M2 …").
    #[must_use]
    pub fn ids_stated(&self, line: &str) -> usize {
        let named: BTreeSet<String> = line
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_uppercase))
            .flat_map(id_tokens)
            .collect();
        self.ids.iter().filter(|id| named.contains(*id)).count()
    }

    /// The code the question asks the meaning of ("what does AHP mean?"), when the sources
    /// say what it stands for: the line that says so shares all that is asked.
    #[must_use]
    pub fn defines(&self) -> Option<&str> {
        self.defines.as_ref().map(|(code, _)| code.as_str())
    }

    /// How a line writes the definition the question asks for (`AHP = absorbent hygiene
    /// products`, `absorbent hygiene products (AHP)`); none when it asks for none.
    fn definitions(&self) -> Vec<String> {
        self.defines
            .iter()
            .flat_map(|(code, name)| [format!("{code} = {name}"), format!("{name} ({code})")])
            .collect()
    }

    /// Whether the question asks about an earlier, previous or superseded version (or
    /// names a version that is no longer in force), so that its lines may be cited.
    #[must_use]
    pub fn asks_earlier_version(&self) -> bool {
        self.earlier
    }

    /// Whether `text` asks about an earlier version of what `store` holds, read as
    /// [`Question::asks_earlier_version`] reads it, without reading the rest of the
    /// question: a search needs only this.
    #[must_use]
    pub fn text_asks_earlier_version(text: &str, store: &SourceStore) -> bool {
        let superseded: Vec<&str> = store
            .documents()
            .filter(|d| !d.in_force())
            .map(|d| d.version())
            .collect();
        let text = without_locators(text);
        asks_earlier(&text, &superseded) || asks_of_earlier_years(&text, store)
    }

    /// The thing whose kind `text` asks, when it ends the question ("What kind of drug is
    /// tesoglutide?" asks what `tesoglutide` is), read without the rest of the question: a
    /// search needs only this to bring forward the line that says what it is
    /// ([`Question::defines_kind`]).
    #[must_use]
    pub fn text_asks_kind_of(text: &str) -> Option<String> {
        static KIND: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        let kind = KIND.get_or_init(|| {
            regex::Regex::new(
                r"(?i)\b(?:what|which)\s+(?:kind|type|sort|class|category)\s+of\s+[a-z-]+(?:\s+[a-z-]+)?\s+(?:is|are|was|were)\s+(?:the\s+|a\s+|an\s+)?([\w-]+(?:\s+[\w-]+){0,3})\s*\?*\s*$",
            )
            .expect("a valid pattern")
        });
        let name = kind.captures(text.trim())?.get(1)?.as_str();
        // "What kind of food is served?": a verb or a word of the sentence, not a thing.
        let thing = words(name)
            .iter()
            .any(|w| !is_function_word(w) && !w.ends_with("ed"));
        thing.then(|| name.to_owned())
    }

    /// Whether `line` says what kind of thing `name` is, as a definition does: `name`
    /// followed by `, a …`, `, an …`, ` is a …` or ` (a …` ("tesoglutide, an
    /// investigational incretin-based peptide").
    #[must_use]
    pub fn defines_kind(line: &str, name: &str) -> bool {
        let line = line.to_lowercase();
        let name = name.to_lowercase();
        line.match_indices(name.as_str()).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            if before.is_some_and(char::is_alphanumeric) {
                return false;
            }
            let rest = &line[at + name.len()..];
            [
                ", a ", ", an ", " is a ", " is an ", " (a ", " (an ", " was a ", " was an ",
            ]
            .iter()
            .any(|opening| rest.starts_with(opening))
        })
    }

    /// Whether a source is about the question's subject: it states every id the question
    /// names, or, without one, at least half the weight of its subject words (a rare word
    /// may be missing; the drug's name may not).
    #[must_use]
    pub fn on_subject(&self, source_id: &str) -> bool {
        if self.ids.is_empty() && self.names.is_empty() {
            return true;
        }
        let Some((stems, text)) = self.sources.get(source_id) else {
            return false;
        };
        if !self.ids.is_empty() {
            return self.ids.iter().all(|id| text.contains(id.as_str()));
        }
        self.states_half_the_subject(stems)
    }

    /// Whether a line may be cited for this question: it states something (it is not a
    /// question, and not a heading unless the question asks for a title or a name). A
    /// document's first line is not refused here: it often states facts (a registry record's
    /// fields, a notice's date), and a title that states nothing the question asks is refused
    /// by [`Question::misses`].
    #[must_use]
    pub fn citable(&self, line: &str) -> bool {
        let line = line.trim();
        if line.ends_with('?') || line.ends_with(':') {
            return false;
        }
        // A signature (`Rhiannon Vesey, Project Liaison Officer`) says who, as a line with
        // no stop: the answer to who to contact.
        self.asks_title
            || (self.kind == AnswerKind::Person && is_signature(line))
            || !is_heading(line)
    }

    /// Whether a line of `source` may answer for the names the question writes: the
    /// question names nothing the sources never state; the line (or its section's heading,
    /// or its source's title) states every rare proper name it writes (`Northgate` in "the
    /// address of Northgate Library" rules out Riverside's address); and, when the question
    /// has a subject but no id, the line, its section or its title states at least half the
    /// subject's weight, as [`Question::on_subject`] asks of a whole source. A fees schedule
    /// that mentions interlibrary loans once is on the subject of a question about them, but
    /// its line about junior cards is not.
    #[must_use]
    pub fn names_stated(&self, line: &str, source: &str) -> bool {
        if !self.unstated.is_empty() {
            return false;
        }
        let title = self.titles.get(source).map_or("", String::as_str);
        let section_text = self.section(source, line).unwrap_or("");
        // A line that refers back (`… we can offer there …`) names what the line before
        // it does.
        let before = self
            .antecedents
            .get(&(source.to_owned(), line.to_owned()))
            .map_or("", String::as_str);
        // A footnote (`³ Night rate hours: …`) names what the rows that carry its mark name
        // (`Tariff: Night Saver`).
        let marking = self
            .marked_by
            .get(&(source.to_owned(), line.to_owned()))
            .map_or("", String::as_str);
        // A member of a series the question names (`Pro` of the tiers) is checked by
        // [`Question::member_fits`]: a line that names no member of it states a rule for
        // all of them.
        let member = |n: &str| {
            self.members
                .values()
                .flat_map(|s| &s.named)
                .any(|v| words(v).contains(&n))
        };
        let general = self.member_fits(line).is_none();
        // A row whose label carries a footnote mark (`Peak⁶: £90`) is read with the
        // footnote that says what the label means (`⁶ Peak: Friday and Saturday evenings`),
        // which names when the cell holds. Not a mark on a value (`£41.20¹`), whose
        // footnote may name where it does not (`¹ In Harnmouth the charge is £36.90`).
        let note = self
            .footnoted
            .get(line)
            .filter(|note| defines_marked_label(line, note))
            .map_or("", String::as_str);
        // A line that writes a name by its abbreviation (`Weekly (WET, CAD)`) states it.
        let written = line;
        let line = &self.unabbreviated(line);
        // "No. We don't add fluoride to any of our supplies.": a rule for every place the
        // sources serve holds for the one asked about, when the line names no other.
        let lower = format!(" {}", line.to_lowercase());
        let universal = [
            " any of our ",
            " all of our ",
            " all our ",
            " every one of our ",
            " each of our ",
            " across our area",
            " throughout our area",
            " everywhere we ",
        ]
        .iter()
        .any(|u| lower.contains(u))
            && self.names_in(line) == 0;
        // A day or a month the question names (`the closure in October`) is stated by a
        // line that states none (`Contact: …`, `Customers … receive a credit`) when its
        // source states it: the notice is about October. A line that states another day
        // or month is held to it, and so is a record (`route: Bus 17; first_last: …`),
        // which is about its own row, whatever the others say.
        // Not for an amount or a time, which the day or the month may change (a fare on a
        // Saturday, a charge from April).
        let undated = !matches!(self.kind, AnswerKind::Quantity | AnswerKind::Time)
            && !words(line).iter().any(|w| is_calendar_word(w))
            && days_stated(line).is_none()
            && record_fields(line).is_none();
        let proper = self.proper.iter().all(|n| {
            universal
                || (member(n) && general)
                || (undated
                    && is_calendar_word(n)
                    && self.dated.get(source).is_some_and(|t| states_name(t, n)))
                || [line, title, section_text, before, marking, note]
                    .iter()
                    .any(|text| states_name(text, n))
                    && !self.other_name(written, n)
                || self.heads.get(n).is_some_and(|head| states_any(line, head))
                || self.kinds.get(n).is_some_and(|kinds| {
                    // A record speaks of its own row, which its first field names: one whose
                    // other field has the thing's value (`ev_charger: rapid`) is another
                    // thing of that kind, not a rule for all of them.
                    let line: &str = record_fields(line).map_or(line, |fields| fields[0]);
                    let written: Vec<String> =
                        words(line).iter().map(|w| w.to_lowercase()).collect();
                    kinds.iter().any(|k| {
                        written.windows(k.len()).any(|w| w == k.as_slice())
                            // A rule for any thing of the kind its record says it is (`in
                            // a park`, of `Tannery Green` whose record says `type: park`).
                            || k.last().is_some_and(|kind| {
                                kind.chars().count() >= 3
                                    && kind.chars().all(char::is_alphabetic)
                                    && states_any(line, kind)
                            })
                    })
                })
        });
        if !proper {
            return false;
        }
        if !self.ids.is_empty() || self.names.is_empty() {
            return true;
        }
        let near: BTreeSet<String> = content_stems(line)
            .into_iter()
            .chain(content_stems(section_text))
            .chain(content_stems(title))
            .collect();
        self.states_half_the_subject(&near)
    }

    /// Whether `text` writes the proper name `n` only as part of another name: the
    /// question writes it in a run (`EV Night`), and every run of `text` holding it has
    /// another capitalised word and none of the run's others (`Night Saver`).
    fn other_name(&self, text: &str, n: &str) -> bool {
        let Some(run) = self.runs.get(n) else {
            return false;
        };
        let holding: Vec<Vec<String>> = capital_runs(text)
            .into_iter()
            .filter(|r| r.iter().any(|w| w == n))
            .collect();
        !holding.is_empty()
            && holding
                .iter()
                .all(|r| r.len() >= 2 && !r.iter().any(|w| w != n && run.contains(w)))
    }

    /// Whether `text` states a member of a series the question names (`West` of the
    /// regions).
    fn member_named_in(&self, text: &str) -> bool {
        let text = whole_words(text);
        self.members
            .values()
            .flat_map(|s| &s.named)
            .any(|n| text.contains(&whole_words(n)))
    }

    /// How many members of a series the question names one of, other than those it names,
    /// `text` states (`North`, `East` for a question about the West).
    fn others_stated(&self, text: &str) -> usize {
        let text = whole_words(text);
        self.members
            .values()
            .filter(|s| !s.named.is_empty())
            .flat_map(|s| &s.others)
            .filter(|o| text.contains(&whole_words(o)))
            .count()
    }

    /// Whether the question asks for a limit ("the most the fund could give") and `text`
    /// states one (`up to £300`).
    #[must_use]
    pub fn limit_stated(&self, text: &str) -> bool {
        self.asks_limit
            && words(&text.to_lowercase())
                .iter()
                .any(|w| LIMIT_MARKS.contains(w))
    }

    /// Whether `text` states the measure the question asks of (a sum of money for "is
    /// there a fee").
    #[must_use]
    pub fn states_measure(&self, text: &str) -> bool {
        self.measure.is_some_and(|m| m.stated(text))
    }

    /// Whether the question asks whether something exists (`Is there a sign-up fee …?`,
    /// `Are there any charges …?`).
    #[must_use]
    pub fn asks_existence(&self) -> bool {
        let lower = asking_part(&self.text).to_lowercase();
        let w = words(&lower);
        w.windows(2)
            .any(|p| matches!(p[0], "is" | "are" | "will") && p[1] == "there")
    }

    /// Whether `line` says more than the question asks: a word none of the question's, no
    /// name (capitalised past its first word), no month or weekday and no number; or a mark
    /// of a cause or purpose (`because`, `for`, `after`, `so`).
    fn says_more_than_asked(&self, line: &str) -> bool {
        const CAUSES: [&str; 3] = ["for", "after", "so"];
        let all = words(line);
        let lower: Vec<String> = all.iter().map(|w| w.to_lowercase()).collect();
        if lower
            .iter()
            .any(|w| REASON_MARKS.contains(&w.as_str()) || CAUSES.contains(&w.as_str()))
        {
            return true;
        }
        all.iter().zip(&lower).enumerate().any(|(i, (w, l))| {
            let name = i > 0 && w.starts_with(char::is_uppercase);
            !(name
                || is_function_word(l)
                || is_calendar_word(w)
                || w.chars().any(|c| c.is_ascii_digit())
                || self.terms.contains(&stem(w)))
        })
    }

    /// Whether `line` is a record with a field, past the one naming its row, whose key
    /// names the kind of thing asked for (`dist: Castlegate` for "which district …"), or
    /// whose value is the form of contact asked for (`pc: ZQ7 4WS` for "the postcode").
    #[must_use]
    pub fn keys_asked_in(&self, line: &str) -> bool {
        any_field_past_row(line, |k, v| {
            !v.is_empty()
                && v != "null"
                && (self.key_asks(k, &self.answer_phrase)
                    || self.contact.is_some_and(|c| c.stated(v)))
        })
    }

    /// Whether a record's `key` names one of the question's words whose stems are `among`:
    /// in its own words (`partner_network`) or as a terse key abbreviates them (`dist`
    /// for "which district", `tel` for "phone number"; [`abbreviates`]).
    fn key_asks(&self, key: &str, among: &[String]) -> bool {
        if content_stems(key).iter().any(|k| among.contains(k)) {
            return true;
        }
        let pieces = words(key);
        content_words(&self.text)
            .iter()
            .filter(|w| among.contains(&stem(w)))
            .any(|w| pieces.iter().any(|p| abbreviates(p, w)))
    }

    /// `text` with what each abbreviation it writes stands for after it (`WET Wetherstow`).
    #[must_use]
    pub fn unabbreviated<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        unabbreviate(text, &self.abbreviations)
    }

    /// How much of the question's subject `source`'s title states: the weight of its
    /// subject words there, or the number of its ids. A source titled by the subject is the
    /// one to read first.
    #[must_use]
    pub fn subject_in_title(&self, source: &str) -> f64 {
        let title = self.titles.get(source).map_or("", String::as_str);
        if !self.ids.is_empty() {
            return self
                .ids
                .iter()
                .filter(|id| title.contains(id.as_str()))
                .count() as f64;
        }
        let stems: BTreeSet<String> = content_stems(title).into_iter().collect();
        self.subject_weight_in(&stems)
    }

    /// Whether `stems` hold at least half the weight of the question's subject words: a
    /// rare word may be missing, the drug's name may not.
    fn states_half_the_subject(&self, stems: &BTreeSet<String>) -> bool {
        let total: f64 = self.names.iter().map(|(_, w)| w).sum();
        self.subject_weight_in(stems) * 2.0 >= total
    }

    fn subject_weight_in(&self, stems: &BTreeSet<String>) -> f64 {
        self.names
            .iter()
            .filter(|(s, _)| stems.contains(s))
            .map(|(_, w)| w)
            .sum()
    }

    /// The line that opens the section `line` of `source` belongs to (a heading or a
    /// lead-in), lower case, if it has one.
    #[must_use]
    pub fn section(&self, source: &str, line: &str) -> Option<&str> {
        self.sections
            .get(&(source.to_owned(), line.to_owned()))
            .map(String::as_str)
    }

    /// Why `text` does not answer the question, or `None` when it does: it states every
    /// qualifier and no sibling of one (`Arm B` when `Arm C` was asked), a token of the
    /// asked kind that the question does not already hold (an amount, a time, a name), and
    /// something the question does not say.
    #[must_use]
    pub fn misses(&self, text: &str) -> Option<String> {
        self.misses_in(text, None)
    }

    /// The line a line of `source` refers back to (`We can send those …` after `We do not
    /// post lost property, except keys and glasses.`), as the sources' antecedents say.
    #[must_use]
    pub fn antecedent(&self, source: &str, line: &str) -> Option<&str> {
        self.antecedents
            .get(&(source.to_owned(), line.to_owned()))
            .map(String::as_str)
    }

    /// [`Question::misses`] for `text` from `source`: when every word the question asks
    /// beyond its subject is in that source's title (`plan` in "what's the monthly cost of
    /// the care plan?", from `Care plan: terms`), the document is what the question is
    /// about, and what it asks is the answer's kind alone (here a sum of money).
    #[must_use]
    pub fn misses_in(&self, text: &str, source: Option<&str>) -> Option<String> {
        let before = source.and_then(|s| self.antecedents.get(&(s.to_owned(), text.to_owned())));
        let context = self.in_section(text, source, before.map(String::as_str));
        self.misses_of(text, source, context.as_deref())
    }

    /// `context` with the heading of the section `line` is under (`Automatic
    /// compensation` for `… we pay you £6.10 for each calendar day …`): what every line
    /// under it is about. Only for a question answered by an amount, a time or a name,
    /// which the line must state itself: a heading (`How long it takes`) does not settle
    /// a yes or no ("can I take a laptop home?").
    fn in_section(
        &self,
        line: &str,
        source: Option<&str>,
        context: Option<&str>,
    ) -> Option<String> {
        let section = source
            .filter(|_| self.kind.needs_token())
            .and_then(|s| self.section(s, line));
        match (context, section) {
            (Some(c), Some(s)) => Some(format!("{c} {s}")),
            (c, s) => c.or(s).map(str::to_owned),
        }
    }

    /// [`Question::misses_in`] for `text` read in `context`, whose words say what the
    /// question asks beyond its subject as well as its own: a record's fields that say which
    /// row it is ([`row_of`]: `Roughly holds: a two-bedroom flat` for the `4-weekly (HOL)`
    /// price of "a two bed flat"), or the line a line refers back to (`It will be out of
    /// service …` is the lift's).
    fn misses_of(&self, text: &str, source: Option<&str>, context: Option<&str>) -> Option<String> {
        if let Some((code, name)) = &self.defines {
            let lower = text.to_lowercase();
            let said = words(text);
            return (!(said.contains(&code.as_str()) && lower.contains(&name.to_lowercase())))
                .then(|| {
                    format!("the question asks what `{code}` stands for, and it does not say")
                });
        }
        if !self.fits(text) {
            return Some(
                "it states ages, group sizes, days or a record that leave out those the question states"
                    .into(),
            );
        }
        if text.trim().ends_with(':') {
            return Some("it introduces what follows and states nothing itself".into());
        }
        if let Some(q) = self.absent.first() {
            return Some(format!(
                "the question asks about {}, which no source states",
                q.describe()
            ));
        }
        if self.kind != AnswerKind::YesNo {
            if let Some((asked, other)) = contrasted(&self.text, text) {
                return Some(format!(
                    "it states `{other}`, and the question asks for `{asked}`"
                ));
            }
        }
        if let Some(word) = self.unheard.first() {
            return Some(format!(
                "the question asks about `{word}`, which no source states"
            ));
        }
        // A rule settles a yes or no without naming what it rules out (`The depot does not
        // accept deliveries` for the asker's parcels).
        // Only where the line's source is known: its section, title or other lines may state
        // the word.
        if let Some(source) =
            source.filter(|_| self.kind != AnswerKind::YesNo && !self.rare.is_empty())
        {
            let mut near: BTreeSet<String> = rare_forms(&self.unabbreviated(text));
            for extra in [
                context,
                self.section(source, text),
                self.titles.get(source).map(String::as_str),
                self.antecedent(source, text),
            ]
            .into_iter()
            .flatten()
            {
                near.extend(rare_forms(extra));
            }
            // A source that states the word elsewhere (a price list whose consultations
            // name it) may say it once for all its lines.
            if let Some((_, word, _)) = self
                .rare
                .iter()
                .find(|(t, _, stating)| !near.contains(t) && !stating.contains(source))
            {
                return Some(format!(
                    "the question asks about `{word}`, which few lines state, and it does not"
                ));
            }
        }
        let stated = self.stated_qualifiers(text);
        for q in &self.qualifiers {
            if !stated.contains(q) {
                return Some(format!("it does not state {}", q.describe()));
            }
        }
        for s in &stated {
            // A list of its series that holds the one asked (`Group: C, D, E`) states a
            // rule for each of them.
            let listed = match s {
                Qualifier::Label { head, value } => listed_labels(text, head).contains(value),
                Qualifier::Amount { .. } => false,
            };
            // "When will the collection due on 1 January be made?": another day of the
            // month is what a when-question asks for (`will be made on 3 January`).
            let answered = self.kind == AnswerKind::Time
                && matches!(s, Qualifier::Amount { unit, .. } if is_month_stem(unit));
            let sibling = !listed
                && !answered
                && self
                    .qualifiers
                    .iter()
                    .any(|q| q.same_series(s) && !self.qualifiers.contains(s));
            if sibling {
                return Some(format!(
                    "it also states {}, which the question does not ask about",
                    s.describe()
                ));
            }
        }
        // An id of the question's series (`A4`, `NCT04123456`) met by another of the same
        // letters (`A3`, `NCT05550001`) is a sibling too.
        if let Some(other) = id_tokens(text).into_iter().find(|t| {
            !self.ids.contains(t)
                && self
                    .ids
                    .iter()
                    .any(|id| letters_of(id) == letters_of(t) && !letters_of(id).is_empty())
        }) {
            return Some(format!(
                "it also states `{other}`, which the question does not ask about"
            ));
        }
        let asked: BTreeSet<&String> = self.terms.iter().collect();
        // "What's the email address?": an address of another kind (`3 Mercer Street`) or a
        // phone number does not answer it.
        if let Some(contact) = self.contact.filter(|c| !c.stated(text)) {
            return Some(format!(
                "the question asks for {}, and it states none",
                contact.describe()
            ));
        }
        match self.kind {
            AnswerKind::Quantity => {
                // "How many participants": an amount of something else (`26 weeks`) does
                // not answer it.
                // A sum of money counts nothing ("how many requests": `£4.00 per request`
                // is a price), unless money is what is counted.
                let priced = money_amounts(text);
                let fits = |amount: &String, unit: &Vec<String>| {
                    if self.counted.is_empty() {
                        true
                    } else if unit.is_empty() {
                        !priced.contains(amount)
                            || matches!(self.measure, Some(Measure::Money | Measure::Saving))
                    } else {
                        // `45 min` counts minutes: a unit written short is the one counted.
                        // People are also counted by the places kept for them ("how many
                        // people in wheelchairs": `6 wheelchair spaces`).
                        unit.iter().any(|u| {
                            self.counted.contains(u)
                                || self.counted.iter().any(|c| abbreviates(u, c))
                                || (self.counted.iter().any(|c| counts_people(c))
                                    && counts_places(u))
                        })
                    }
                };
                // `29°C` is an amount in degrees, which the measure below checks.
                let degrees =
                    self.measure == Some(Measure::Temperature) && states_temperature(text);
                if !degrees
                    && !amounts_with_units(text)
                        .iter()
                        .any(|(a, unit)| !self.asked_amounts.contains(a) && fits(a, unit))
                {
                    return Some("the question asks for an amount, and it states none".into());
                }
                // A count of a unit of measure ("how many miles") is written with its
                // unit: a bare number (`Seats: 5`) counts something else.
                let said = content_stems(text);
                if let Some(unit) = self.counted.iter().find_map(|c| {
                    MEASURE_UNITS
                        .iter()
                        .find(|u| stem(u) == *c && !said.contains(c))
                }) {
                    return Some(format!(
                        "the question asks how many `{unit}`, and it states none"
                    ));
                }
                match self.measure {
                    Some(Measure::Money) if !Measure::Money.stated(text) => {
                        return Some(
                            "the question asks for a sum of money, and it states none".into(),
                        );
                    }
                    Some(Measure::Saving) if !Measure::Saving.stated(text) => {
                        return Some(
                            "the question asks for a sum saved, and it states neither money nor a share"
                                .into(),
                        );
                    }
                    Some(Measure::Size) if !Measure::Size.stated(text) => {
                        return Some("the question asks for a size, and it states none".into());
                    }
                    Some(Measure::Temperature) if !Measure::Temperature.stated(text) => {
                        return Some(
                            "the question asks for a temperature, and it states none".into(),
                        );
                    }
                    Some(Measure::Age) if !Measure::Age.stated(text) => {
                        return Some("the question asks for an age, and it states none".into());
                    }
                    Some(Measure::Extent) if !Measure::Extent.stated(text) => {
                        return Some(
                            "the question asks how long or how far, and it states no length of time or space"
                                .into(),
                        );
                    }
                    // "How long can a booking be?": how far ahead one books (`up to 14
                    // days in advance`) is not how long it lasts.
                    Some(Measure::Extent)
                        if !asks_lead_time(&self.text)
                            && !Measure::Extent.stated(&without_lead_times(text)) =>
                    {
                        return Some(
                            "the question asks how long, and it states only how far ahead".into(),
                        );
                    }
                    _ => {}
                }
                // "How much is it per year?": a rate for another period (`£1.80 per day`)
                // is not it, and the harness does not multiply.
                let stated = rate_periods(text);
                if !self.periods.is_empty()
                    && !stated.is_empty()
                    && self.periods.is_disjoint(&stated)
                {
                    return Some(format!(
                        "the question asks for a rate per {}, and it states one per {}",
                        self.periods
                            .iter()
                            .copied()
                            .collect::<Vec<_>>()
                            .join(" or "),
                        stated.iter().copied().collect::<Vec<_>>().join(" or ")
                    ));
                }
            }
            // "What is the largest object": a thing asked for by its size.
            AnswerKind::Thing
                if self.measure == Some(Measure::Size) && !Measure::Size.stated(text) =>
            {
                return Some("the question asks for a size, and it states none".into());
            }
            // "At what age can a child swim alone?" asked as a time or a thing: an age
            // answers it.
            AnswerKind::Thing | AnswerKind::Time
                if self.measure == Some(Measure::Age) && !Measure::Age.stated(text) =>
            {
                return Some("the question asks for an age, and it states none".into());
            }
            // "What temperature is the water kept at?" asked as a thing: degrees answer it.
            _ if self.measure == Some(Measure::Temperature)
                && !Measure::Temperature.stated(text) =>
            {
                return Some("the question asks for a temperature, and it states none".into());
            }
            AnswerKind::Time
                if !times(&without_references(&without_locators(text)))
                    .iter()
                    .any(|t| !self.asked_times.contains(t)) =>
            {
                return Some("the question asks for a time, and it states none".into());
            }
            // "Until what time": a date (`March 2025`) is not a time of day.
            AnswerKind::Time
                if self.clock
                    && !times(text)
                        .iter()
                        .any(|t| !self.asked_times.contains(t) && is_time_of_day(t)) =>
            {
                return Some("the question asks for a time of day, and it states none".into());
            }
            // "Since when", "what date": a length of time (`14 days`) is not a point in it.
            AnswerKind::Time
                if self.point
                    && !times(text)
                        .iter()
                        .any(|t| !self.asked_times.contains(t) && !is_duration(t)) =>
            {
                return Some(
                    "the question asks for a point in time, and it states only lengths of time"
                        .into(),
                );
            }
            // "When is the price next going up?": a line that states when something else
            // happens to it (`closed to new members 2024-12-31`) does not say. The event
            // is stated in its own words or as a change from one value to another (`goes
            // from £240.00 to £260.00`). Held only where the question surely names a verb
            // (`be` and `-ing`): elsewhere the verb read may be the subject's last noun.
            AnswerKind::Time
                if self.event.as_ref().is_some_and(|e| !e.is_empty())
                    && self.progressive
                    && !self.states_event(text)
                    && !changes_value(text) =>
            {
                return Some(format!(
                    "the question asks when it is `{}`, and it does not say that happens",
                    self.event.as_deref().unwrap_or_default().join(" ")
                ));
            }
            // "Why isn't it available in the North?": a record's fields (`Region: North;
            // Tariff: Night Saver`) name a row; they give no reason unless one says so.
            AnswerKind::Reason
                if record_fields(text).is_some()
                    && !words(&text.to_lowercase())
                        .iter()
                        .any(|w| REASON_MARKS.contains(w) || *w == "only") =>
            {
                return Some("the question asks why, and it states no reason".into());
            }
            // "Why did Gareth Pole leave?": `Gareth Pole left Brightlane on 31 May 2025.`
            // says what happened and when. A line none of whose words is more than what the
            // question asks, a name, a date or a number, and that marks no cause, gives no
            // reason.
            AnswerKind::Reason if !self.says_more_than_asked(text) => {
                return Some(
                    "the question asks why, and it states only what happened, to whom and when"
                        .into(),
                );
            }
            AnswerKind::Person | AnswerKind::Place => {
                // A place is also a numbered or an ordinal one: `room 2.04`, `the second
                // floor`, `48 Northgate Road`.
                // So is a kind of place the question does not name (`at tram stops` for
                // "where are the ticket machines", but not `office` for "where is the office").
                // And a path or an address on the web (`/var/log/app.log`): where a
                // program keeps a thing.
                // Of a record's span, where is said by its last field: the fields that lead
                // it say whose record it is (`name: Kwame Ditchfield; office: Tessingham
                // hub` names no place but the one asked about).
                let text = match (self.kind, record_fields(text)) {
                    (AnswerKind::Place, Some(fields)) => fields.last().copied().unwrap_or(text),
                    _ => text,
                };
                let located = self.kind == AnswerKind::Place
                    && (states_location(text)
                        || locators(text).iter().any(|l| l.contains('/'))
                        || place_nouns(text)
                            .iter()
                            .any(|p| !self.terms.contains(&stem(p))));
                if self.names_in(text) == 0 && !located {
                    return Some("the question asks for a name, and it states none".into());
                }
            }
            _ => {}
        }
        // A date states its season: "the autumn training day" asks for one in October.
        // Read only for a question that names one: this runs for every span judged.
        let seasons = if names_season(&self.beyond) {
            season_stems(text)
        } else {
            Vec::new()
        };
        let stems: Vec<String> = content_stems(text)
            .into_iter()
            .chain(context.map(content_stems).unwrap_or_default())
            .chain(seasons)
            .collect();
        if let Some(verb) = &self.predicate {
            // "Can I bring my dog to the allotment?": a rule that allows or forbids what
            // the line is about (`Dogs are not allowed on any allotment site`) settles
            // whether one may, whatever verb it says it with.
            let settles = self.permission && states_permission(&stems);
            // "Do I earn interest?": `We pay interest` says it from the other side.
            let conversely = converse_stems(verb).iter().any(|c| stems.contains(c));
            if self.kind == AnswerKind::YesNo && !stems.contains(verb) && !settles && !conversely {
                return Some(format!(
                    "the question asks whether one may `{verb}…`, and it does not say"
                ));
            }
        }
        // The asker says a condition does not hold ("I'm not on the care plan myself"): a
        // span that holds only when it does (`£6.80 a month only when a parent is a CCP
        // member`) is not theirs.
        if let Some(condition) = self.denied_in(text) {
            return Some(format!(
                "it holds {condition}, which the question says does not hold"
            ));
        }
        // An amount or a time the question asks for, which the checks above found, is
        // new however short it is (`2` in "every tram has 2 wheelchair spaces").
        let valued = matches!(self.kind, AnswerKind::Quantity | AnswerKind::Time);
        let new = stems
            .iter()
            .any(|s| !asked.contains(s) && s.chars().count() >= 2);
        if !new && !valued {
            return Some("it only restates the question".into());
        }
        // What the question asks beyond its subject must be in the answer: a line that only
        // shares the subject says something about it, but not what was asked.
        let beyond = &self.beyond;
        // A question whose qualifiers the text states (`Arm A`) already has what it asks
        // about pinned down.
        // So has one whose range holds the asker's own age, group size, length of time or release
        // (`Notice given: 4 to 13 days` for "we were due to arrive in 10 days"); a day of
        // the week does not: "open on Sundays" and "parking on Sundays" ask different things.
        // A measure's range (`25.1–45 kg` for "a 30kg dog") picks the row but does not say
        // what of it is asked: `castration` does not answer for a cremation.
        // Nor does a range of dates holding the asker's (`due between 2 June and 15 June`).
        let picks_row = usize::from(self.measure_fits(text) == Some(true))
            + usize::from(self.date_fits(text) == Some(true));
        // Not a yes-or-no question's: "does the Hub 6 support wifi 7?" names the row, and
        // asks what the row must still say.
        let pinned = (self.kind != AnswerKind::YesNo && !self.qualifiers.is_empty())
            || self.held(text) > picks_row;
        // "Per person or per room?": the answer states one of the alternatives.
        let alternatives = &self.alternatives;
        let sequence: Vec<String> = words(text).iter().map(|w| stem(w)).collect();
        if !alternatives.is_empty()
            && !alternatives
                .iter()
                .any(|a| sequence.windows(a.len()).any(|w| w == a.as_slice()))
        {
            return Some("the question asks which of two, and it states neither".into());
        }
        let titled = source
            .and_then(|s| self.titles.get(s))
            .is_some_and(|title| {
                // A title of another year (`2025 season` for "the 2026 season") is another
                // document's subject.
                let stems = content_stems(title);
                beyond.iter().all(|t| stems.contains(t)) && self.year_fits(title) != Some(false)
            });
        // A record about the named subject (`country: Norway`) whose field is named as the
        // kind asked for (`partner_network` for "which mobile network … in Norway") states
        // what is asked, whatever verb the question asks it with. Not its first field,
        // which names the row.
        let keyed = self.kind == AnswerKind::Thing
            && !self.proper.is_empty()
            && self.proper.iter().all(|n| states_name(text, n))
            && any_field_past_row(text, |k, v| {
                v != "null" && self.key_asks(k, &self.answer_phrase)
            });
        // "The last date I can report it": a limit asked is stated by a clause that states
        // one (`up to and including 31 January`).
        // A time's is stated by one it must be done by (`made by 10:30`).
        let lowered = text.to_lowercase();
        let said = words(&lowered);
        let limited = self.limit_beyond
            && said.iter().enumerate().any(|(i, w)| {
                LIMIT_MARKS.contains(w)
                    || ["until", "till"].contains(w)
                    || (self.kind == AnswerKind::Time
                        && ["by", "before"].contains(w)
                        && said.get(i + 1).is_some_and(|n| {
                            n.starts_with(|c: char| c.is_ascii_digit())
                                || is_weekday(n)
                                || names_month(n)
                                || ["midnight", "noon", "midday"].contains(n)
                        }))
            });
        // "What's the direct phone number for Ashcombe?": a line stating a number to call
        // states what is asked, under whatever key (`tel: 01632 960 227`).
        let contacted = self.contact.is_some_and(|c| {
            c.stated(text)
                && beyond
                    .iter()
                    .all(|t| c.naming_stems().contains(t) || stems.contains(t))
        });
        if !pinned
            && !titled
            && !keyed
            && !limited
            && !contacted
            && !beyond.is_empty()
            && !beyond.iter().any(|t| stems.contains(t))
        {
            return Some("it states none of what the question asks beyond its subject".into());
        }
        // "A car trailer": a line that states only the `car` of it is about cars.
        if !pinned && !titled && !keyed {
            let stated: Vec<&String> = beyond.iter().filter(|t| stems.contains(t)).collect();
            let bare = |t: &String| {
                self.compounds
                    .iter()
                    .find(|(m, h)| m == t && !stems.contains(h))
            };
            if !stated.is_empty() && stated.iter().all(|t| bare(t).is_some()) {
                let (_, head) = bare(stated[0]).expect("checked above");
                return Some(format!(
                    "it states `{}` but not the `{head}` the question asks about",
                    stated[0]
                ));
            }
        }
        None
    }

    /// Whether `line` is about the age the question states: `false` when it states ranges
    /// of age (`aged 26 or over`) and none holds it (`I'm 22`); `true` when one does; `None`
    /// when the question states no age or the line no range.
    #[must_use]
    pub fn age_fits(&self, line: &str) -> Option<bool> {
        // The asker's own word for whom (`her adult card`) is the line's too, whatever the
        // age it means.
        const WHOM: [&str; 6] = ["adult", "adults", "child", "children", "kid", "kids"];
        let whom = |text: &str| -> BTreeSet<String> {
            words(&text.to_lowercase())
                .into_iter()
                .filter(|w| WHOM.contains(w))
                .map(|w| w.trim_end_matches("ren").trim_end_matches('s').to_owned())
                .collect()
        };
        if !whom(&self.text).is_disjoint(&whom(line)) {
            return None;
        }
        // In months, so that a baby's age (`my 9-month-old`) meets a room's (`6-17
        // months`) and a year's (`aged 2`) meets either.
        let (lo, hi) = stated_age_in_months(&self.text)?;
        // An age in brackets is an aside (`Babies under 6 months (Riverside takes babies
        // from 6 months): £77`): the line's own ranges, where it states one outside them,
        // say whom it is about.
        let own = age_ranges_in_months(&without_brackets(line));
        let ranges = if own.is_empty() {
            age_ranges_in_months(line)
        } else {
            own
        };
        (!ranges.is_empty()).then(|| ranges.iter().any(|&(a, b)| a <= hi && lo <= b))
    }

    /// Whether `line` is about the days of the week the question names: `false` when it
    /// states days (`Weekday (Sun–Thu)`) and none of them is asked (`Saturday`); `true` when
    /// one is (`Weekend (Fri–Sat)`); `None` when the question names no day or the line none.
    #[must_use]
    pub fn day_fits(&self, line: &str) -> Option<bool> {
        let asked = self.days?;
        let stated = days_stated(line)?;
        Some(asked.iter().zip(stated).any(|(a, s)| *a && s))
    }

    /// Whether `line` is about as many people as the question states: `false` when it
    /// states ranges of a count of people (`Group size: 12–19`) and none holds it (`a
    /// group of 25`); `true` when one does; `None` when either states none.
    #[must_use]
    pub fn party_fits(&self, line: &str) -> Option<bool> {
        holds(&ranges_of(self.party), &party_ranges(line))
    }

    /// Whether `line` is about the lengths of time the question states: `false` when it
    /// states ranges of a length (`Notice given: 4 to 13 days`) and none holds one of them
    /// (`in 10 days` is held; `2 days` is not); `true` when one does; `None` when either
    /// states none.
    #[must_use]
    pub fn length_fits(&self, line: &str) -> Option<bool> {
        holds(&self.lengths, &length_ranges(line))
    }

    /// Whether `line` is the record of what the question names: `false` when it is a
    /// record keyed by a value (`Tier: Home; …`) other than the ones the question names of
    /// that key (`a Business customer`); `true` when keyed by one of them; `None` when it is
    /// no record or the question names no value of its key. A line of prose is about the
    /// members it names as their records are: `true` when it names one the question names
    /// (`Business customers who outgrow 150 devices …`), `false` when it names only others,
    /// written as their records write them (`Home is for personal use`); a rule naming
    /// none holds for all.
    #[must_use]
    pub fn member_fits(&self, line: &str) -> Option<bool> {
        if let Some((key, value)) = record_field(line) {
            if let Some(series) = self.members.get(&key.to_lowercase()) {
                return Some(series.named.contains(&value.to_lowercase()));
            }
        }
        let lower = line.to_lowercase();
        let said = words(&lower);
        let cased = words(line);
        let states = |said: &[&str], value: &str| {
            let value = words(value);
            said.windows(value.len()).any(|w| w == value.as_slice())
        };
        if self
            .members
            .values()
            .flat_map(|s| &s.named)
            .any(|v| states(&said, v))
        {
            return Some(true);
        }
        self.members
            .values()
            .flat_map(|s| &s.others)
            .any(|v| states(&cased, v))
            .then_some(false)
    }

    /// Whether `line` is about the release the question states: `false` when it states
    /// ranges of releases (`2.9.0 to 2.9.4`, `before 3.2.0`) and none holds it (`we run
    /// 3.2.1`); `true` when one does; `None` when either states none.
    #[must_use]
    pub fn release_fits(&self, line: &str) -> Option<bool> {
        if self.releases.is_empty() {
            return None;
        }
        // A line keyed by a release (a changelog's `3.2.0 (2025-05-06): Removed: …,
        // deprecated since 3.0.0`) is about that release, whatever ranges it goes on to
        // state: "when is 4.0 out?" is not answered by 3.2.0's entry.
        let keyed = line
            .split_once(": ")
            .map(|(key, _)| stated_releases(key))
            .unwrap_or_default();
        if !keyed.is_empty() {
            return Some(keyed.iter().any(|k| self.releases.contains(k)));
        }
        holds(&self.releases, &release_ranges(line))
    }

    /// Whether `line` is about the measures the question states: `false` when it states
    /// ranges of a unit the question states a measure in (`CO2 emissions: 111–170 g/km`,
    /// `up to 10 kg`) and none holds it (`it does 180g/km`); `true` when one does; `None`
    /// when the question states no measure or the line no range of its unit.
    #[must_use]
    pub fn measure_fits(&self, line: &str) -> Option<bool> {
        if self.measures.is_empty() {
            return None;
        }
        let ranges: Vec<(String, f64, f64)> = measure_ranges(line)
            .into_iter()
            .filter(|(unit, ..)| self.measures.iter().any(|(u, _)| u == unit))
            .collect();
        (!ranges.is_empty()).then(|| {
            ranges.iter().any(|(unit, lo, hi)| {
                self.measures
                    .iter()
                    .any(|(u, v)| u == unit && (*lo..=*hi).contains(v))
            })
        })
    }

    /// Whether `line` is about the year the question states: `false` when it states years
    /// (`for the 2025 season`, `before March 2001`) and none is or holds one the question
    /// states (`last year, in 2024`); `true` when one does; `None` when either states none.
    #[must_use]
    pub fn year_fits(&self, line: &str) -> Option<bool> {
        holds(&self.years, &year_ranges(line))
    }

    /// Whether `line` is about the dates the question states: `false` when it states
    /// ranges of dates (`closed from 29 September 2025 to 24 October 2025`, `Apr-Oct`) and
    /// none holds one of them (`the week of 3 November`); `true` when one does; `None` when
    /// either states none.
    #[must_use]
    pub fn date_fits(&self, line: &str) -> Option<bool> {
        dates_held(&self.dates, &date_ranges(line))
    }

    /// The question's own age, party, lengths of time, days, records, releases, measures,
    /// years and dates against `line`'s ([`Question::age_fits`], [`Question::party_fits`],
    /// [`Question::length_fits`], [`Question::day_fits`], [`Question::member_fits`],
    /// [`Question::release_fits`], [`Question::measure_fits`], [`Question::year_fits`],
    /// [`Question::date_fits`]).
    fn fitting(&self, line: &str) -> [Option<bool>; 9] {
        [
            self.age_fits(line),
            self.party_fits(line),
            self.length_fits(line),
            self.day_fits(line),
            self.member_fits(line),
            self.release_fits(line),
            self.measure_fits(line),
            self.year_fits(line),
            self.date_fits(line),
        ]
    }

    /// Whether `line` is about whom and when the question is: its ranges of age, of a
    /// count of people and its days of the week leave out none the question states.
    #[must_use]
    pub fn fits(&self, line: &str) -> bool {
        !self.fitting(line).contains(&Some(false))
    }

    /// How many of the asker's own age, group size, lengths of time, release, measures and
    /// dates `line` states a range holding (`aged 16–25` for "I'm 22", `2.9.0 to 2.9.4` for
    /// "we run 2.9.3", `111–170 g/km` for "it does 150g/km"): what the question says in its
    /// words, the line says in its range. (A year is not counted: a line stating the year
    /// already shares its word.)
    #[must_use]
    pub fn held(&self, line: &str) -> usize {
        [
            self.age_fits(line),
            self.party_fits(line),
            self.length_fits(line),
            self.release_fits(line),
            self.measure_fits(line),
            self.date_fits(line),
        ]
        .iter()
        .filter(|f| **f == Some(true))
        .count()
    }

    /// How many of the question's age, party and days `line` states a range holding
    /// (`aged 16–25` for "I'm 22", `Fri–Sat` for "Saturday").
    #[must_use]
    pub fn fitted(&self, line: &str) -> usize {
        // "Over the weekend": a line that writes the word the question names its days
        // with (`Weekend (Fri–Sat)`) holds them as it means them.
        let day_word = !self.day_words.is_empty()
            && day_words(line).iter().any(|d| self.day_words.contains(d));
        // A measure's or a year's range picks the line, not the span within it: a record
        // keyed by `CO2 emissions: 111–170 g/km` answers with its `2nd permit` field alone.
        self.fitting(line)[..6]
            .iter()
            .filter(|f| **f == Some(true))
            .count()
            + usize::from(day_word)
    }

    /// The qualifiers `text` states. A record keyed by a bare label (`A: 5 mg …`, `2: …`)
    /// states that label of each series the question asks about: `Arm A` in a list of arms
    /// written `A:`, `B:`.
    fn stated_qualifiers(&self, text: &str) -> Vec<Qualifier> {
        let mut stated = Qualifier::all_in(text);
        // A field keyed by a label's head lists its values (`Group: C, D, E`) or a range
        // of letters (`Groups A to E`, `Groups A–C`): it states each.
        for member in listed_members(text, &self.qualifiers) {
            if !stated.contains(&member) {
                stated.push(member);
            }
        }
        if let Some(label) = bare_label(text) {
            for q in &self.qualifiers {
                if let Qualifier::Label { head, .. } = q {
                    let keyed = Qualifier::Label {
                        head: head.clone(),
                        value: label.clone(),
                    };
                    if !stated.contains(&keyed) {
                        stated.push(keyed);
                    }
                }
            }
        }
        stated
    }

    /// The stems of the question's qualifiers that `text` states (`arm` and `a` for a
    /// question about `Arm A` and a record keyed `A:`): words it shares with the question,
    /// though it does not write them.
    #[must_use]
    pub fn qualifier_stems(&self, text: &str) -> Vec<String> {
        let stated = self.stated_qualifiers(text);
        self.qualifiers
            .iter()
            .filter(|q| stated.contains(q))
            .flat_map(|q| match q {
                Qualifier::Label { head, value } => [head.clone(), stem(value)],
                Qualifier::Amount { value, unit } => [value.clone(), unit.clone()],
            })
            .collect()
    }

    /// How many names `text` states that the question does not (capitalised words after
    /// the first, not a month or a weekday, which are times).
    fn names_in(&self, text: &str) -> usize {
        // Who is asked for: a name after `at`, `in`, `between` (`at Station Yard`,
        // `between Castle Hill and Millbrook Park`) is where, not who.
        const PLACED: [&str; 7] = ["at", "in", "between", "near", "via", "outside", "inside"];
        let all = words(text);
        // A name the question writes by its abbreviation (`WFC`) is its subject, not who
        // is asked for, written out too (`Wrenfold Court`).
        let subject: BTreeSet<String> = self
            .proper
            .iter()
            .filter_map(|p| self.abbreviations.get(&p.to_uppercase()))
            .flat_map(|n| words(n).into_iter().map(stem).collect::<Vec<_>>())
            .collect();
        let name = |w: &str| {
            w.chars().count() >= 2
                && w.chars().next().is_some_and(char::is_uppercase)
                && w.chars().skip(1).any(char::is_lowercase)
                && !is_function_word(w)
                && !is_calendar_word(w)
                && !self.terms.contains(&stem(w))
                && !subject.contains(&stem(w))
        };
        // A common word capitalised because it opens a sentence or a value (`Subject:
        // Temporary closure …`) is no name.
        let opens = |w: &str| {
            let at = (w.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
            text.get(..at)
                .is_some_and(|before| before.trim_end().ends_with([':', '.', '!', '?']))
                && is_common_word(&w.to_lowercase())
        };
        // A run of capitalised words that holds a proper name the question writes is the
        // subject's whole name (`Pellmoor Software` for "Pellmoor"), not someone else's:
        // its other words are no names either. So is a title given after the name and a
        // colon when it states another of the question's words (`Ninefold: Contemporary
        // Textile Art` for "the Ninefold textile exhibition"); a name is not (`Kelbridge:
        // Anna Jones`).
        let capital = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
        let offset = |w: &str| w.as_ptr() as usize - text.as_ptr() as usize;
        let gap = |a: &str, b: &str| text.get(offset(a) + a.len()..offset(b)).unwrap_or(";");
        let proper = |w: &str| self.proper.iter().any(|p| w.eq_ignore_ascii_case(p));
        let mut in_subject = vec![false; all.len()];
        let mut last_run: Option<(usize, usize)> = None;
        for (start, end) in capital_run_ranges(text, &all) {
            let run = &all[start..end];
            let titled = last_run.is_some_and(|(_, e)| {
                e == start
                    && proper(all[e - 1])
                    && gap(all[e - 1], all[start]).trim() == ":"
                    && run
                        .iter()
                        .any(|w| !proper(w) && self.terms.contains(&stem(w)))
            });
            if (run.len() > 1 && run.iter().any(|w| proper(w))) || titled {
                in_subject[start..end].fill(true);
            }
            last_run = Some((start, end));
        }
        // A record's key (`Venue: OG`, `Age guidance: All ages`) is no name: a capitalised
        // word that opens a field whose key it is.
        let key = |w: &str| {
            let at = offset(w);
            let before = text[..at].trim_end();
            (before.is_empty() || before.ends_with(';'))
                && text[at..]
                    .split(';')
                    .next()
                    .and_then(|field| field.split_once(':'))
                    .is_some_and(|(k, _)| {
                        k[w.len()..]
                            .chars()
                            .all(|c| c.is_lowercase() || c.is_whitespace())
                    })
        };
        let mut placed = false;
        let mut count = 0;
        for (i, w) in all.iter().enumerate() {
            if in_subject[i] {
                continue;
            }
            let capital = capital(w);
            if PLACED.contains(w) {
                placed = true;
                continue;
            }
            // A run of places goes on through `and` (`Castle Hill and Millbrook Park`).
            if !(capital || (*w == "and" && placed)) {
                placed = false;
            }
            // Who is no numbered thing (`Galleries 1–2`, `Room 4`).
            let numbered = self.kind == AnswerKind::Person
                && all.get(i + 1).is_some_and(|n| {
                    n.chars().all(|c| c.is_ascii_digit())
                        && gap(w, n).chars().all(char::is_whitespace)
                });
            let excluded = opens(w) || numbered || key(w);
            if i > 0 && name(w) && !excluded && !(self.kind == AnswerKind::Person && placed) {
                count += 1;
            }
        }
        count
    }

    /// The spans of `line` that answer the question (see [`Question::misses`]), best first:
    /// runs of its clauses (cut at `; `, `, ` and sentence ends), ranked by how many of the
    /// question's words they state, then, for an amount, a time or a name, the shortest,
    /// and otherwise the longest (the whole fact, with its context).
    #[must_use]
    pub fn spans(&self, line: &str) -> Vec<String> {
        self.spans_in(line, None)
    }

    /// [`Question::spans`] of a line of `source`, judged by [`Question::misses_in`].
    #[must_use]
    pub fn spans_in(&self, line: &str, source: Option<&str>) -> Vec<String> {
        let spans = self.spans_of(line, source);
        self.without_earlier_values(line, spans)
    }

    /// Of `spans` of a change record (`What: Start of peak rate; Before: 16:30; Now:
    /// 17:00`), those stating its earlier value and not its later one, unless the question
    /// asks about before (an earlier version, a word of the past such as `before` or
    /// `used to`, or a year an earlier key names): what holds now is the later value, and a
    /// span stating only the earlier one would state what no longer holds.
    fn without_earlier_values(&self, line: &str, spans: Vec<String>) -> Vec<String> {
        let Some(fields) = record_fields(line) else {
            return spans;
        };
        let first_word = |field: &str| {
            field
                .split_once(": ")
                .map(|(k, _)| k.to_lowercase())
                .and_then(|k| k.split_whitespace().next().map(str::to_owned))
                .unwrap_or_default()
        };
        const EARLIER: [&str; 9] = [
            "before",
            "was",
            "old",
            "previous",
            "previously",
            "formerly",
            "prior",
            "until",
            "till",
        ];
        const LATER: [&str; 7] = [
            "now",
            "new",
            "current",
            "currently",
            "from",
            "since",
            "after",
        ];
        let key_years = |field: &str| {
            field
                .split_once(": ")
                .map(|(k, _)| stated_years(k))
                .unwrap_or_default()
        };
        // `In 2025` is a later key beside `Until 2024`.
        let later = |field: &str| {
            LATER.contains(&first_word(field).as_str())
                || (first_word(field) == "in" && !key_years(field).is_empty())
        };
        let earlier: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|f| EARLIER.contains(&first_word(f).as_str()))
            .collect();
        if earlier.is_empty() || !fields.iter().any(|f| later(f)) {
            return spans;
        }
        let lower = format!(" {} ", self.text.to_lowercase());
        let past = [
            " before",
            " previous",
            " used to ",
            " use to ",
            " formerly",
            " originally",
            " prior ",
            " earlier",
            " last year",
            " until ",
            " old ",
            " change",
            " was it ",
            " were they ",
        ]
        .iter()
        .any(|w| lower.contains(w));
        let asked_years: Vec<u32> = stated_years(&self.text);
        let of_asked_year = earlier
            .iter()
            .any(|f| key_years(f).iter().any(|y| asked_years.contains(y)));
        if self.earlier || past || of_asked_year {
            return spans;
        }
        let kept: Vec<String> = spans
            .iter()
            .filter(|s| {
                !earlier.iter().any(|f| s.contains(f))
                    || fields.iter().any(|f| later(f) && s.contains(f))
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            spans
        } else {
            kept
        }
    }

    fn spans_of(&self, line: &str, source: Option<&str>) -> Vec<String> {
        let clauses = clauses(line);
        // Each span: how much of the question it covers, its length, the span, and how many
        // values of the asked kind it states.
        // "What's the most I can spend …" asks a sum, whatever its first words.
        let values = |span: &str| match self.kind {
            AnswerKind::Quantity => amounts(span).len(),
            // A time the question states (`1 January`, with its year) is not one it asks
            // for: a span that states only that says nothing of when.
            AnswerKind::Time => {
                let lower = span.to_lowercase();
                times(span)
                    .iter()
                    .filter(|t| {
                        let of_asked_date = is_year(t)
                            && self
                                .asked_times
                                .iter()
                                .any(|a| lower.contains(&format!("{a} {t}")));
                        !self.asked_times.contains(t) && !of_asked_date
                    })
                    .count()
            }
            _ if self.asks_limit && self.measure.is_some() => amounts(span).len(),
            _ => 0,
        };
        let mut found: Vec<(usize, usize, String, usize, usize)> = Vec::new();
        let before = source.and_then(|s| self.antecedents.get(&(s.to_owned(), line.to_owned())));
        // A line that states one value and then others for other cases (`between 20% and
        // 70% a fee of £25.00; below 20%, the fee is £60.00`): a later clause stating a
        // value is read with the line's first clause, which says what the values are.
        // So is one after a lead and a colon (`About 18,600 households: 7,900 in the North,
        // …`).
        let opening = line
            .split_once("; ")
            .or_else(|| line.split_once(": "))
            .map(|(o, _)| o.trim())
            .filter(|o| values(o) > 0 && record_fields(line).is_none());
        // `said_with`: the rest of the clause a part of it is said with (the start of a
        // range for its end), which says what it is about.
        let mut judge = |span: &str, record: Option<&str>, said_with: Option<&str>| {
            // `£15 (was £10) for every 10 minutes`: an amount is not said without the rate
            // the line goes on to give it, past what it was.
            if values(span) > 0 && cuts_rate(line, span) {
                return;
            }
            // Only where the asker's situation picks the clause (`below 20%` for their
            // `15%`): a clause read with another's words answers nothing else.
            // Or the member of a series the question names (`2,800 in the West`).
            let situated = self.fitted(span) > 0
                || self.measure_fits(span) == Some(true)
                || self.member_named_in(span);
            let head = opening.filter(|o| {
                line.find(span).is_some_and(|at| at > o.len()) && values(span) > 0 && situated
            });
            let context = match (record, head) {
                (Some(r), _) => Some(self.row_named(r)),
                (None, Some(h)) => Some(match before {
                    Some(b) => format!("{b} {h}"),
                    None => h.to_owned(),
                }),
                (None, None) => before.cloned(),
            };
            let context = match (said_with, context) {
                (Some(w), Some(c)) => Some(format!("{c} {w}")),
                (Some(w), None) => Some(w.to_owned()),
                (None, c) => c,
            };
            let context = self.in_section(line, source, context.as_deref());
            if span.is_empty() || self.misses_of(span, source, context.as_deref()).is_some() {
                return;
            }
            // A record's field covers what its record says of the question to pick its row
            // ([`row_of`]), at half the weight of its own words, which decide among its
            // fields.
            // Read with what its codes stand for (`EB: £350` states an e-bike's).
            let stems: BTreeSet<String> = content_stems(&self.unabbreviated(span))
                .into_iter()
                .collect();
            let row: BTreeSet<String> = record
                .map(|r| content_stems(&row_of(r)))
                .or_else(|| head.map(content_stems))
                .unwrap_or_default()
                .into_iter()
                .collect();
            // The asker's own number (`6` of "I've been here 6 years") says which row, as
            // the row's range does; written again in a field's value (`up to 6 days`) it
            // answers nothing, so it counts as a row's word does.
            let own = |t: &String| self.asked_amounts.contains(t);
            let mut covered = self
                .terms
                .iter()
                .filter(|t| stems.contains(*t))
                .map(|t| if own(t) { 1 } else { 2 })
                .sum::<usize>()
                + self
                    .terms
                    .iter()
                    .filter(|t| !stems.contains(*t) && row.contains(*t))
                    .count();
            let lower = span.to_lowercase();
            let marked = |marks: &[&str]| words(&lower).iter().any(|w| marks.contains(w));
            if self.kind == AnswerKind::Reason && marked(REASON_MARKS) {
                covered += 3;
            }
            // "Where": an address (`3 Lantern Yard`) says it, over a field naming the place.
            if self.kind == AnswerKind::Place && states_location(span) {
                covered += 3;
            }
            // "What is the most…": a span that states a limit.
            if self.limit_stated(span) {
                covered += 3;
            }
            // "I'm 22", "on a Saturday": a span whose range of age or days holds it.
            // A record's measure picks its row, for each of its fields; a field's own days
            // (`Weekday (Sun–Thu)`) pick the field.
            let fit = self.fitted(span).max(usize::from(
                record.is_some_and(|r| self.measure_fits(r) == Some(true))
                    || (head.is_some() && self.measure_fits(span) == Some(true)),
            ));
            covered += 4 * fit;
            // A record's field whose key is what the question asks (`address` in "What's
            // the address?") answers over the whole record, which states it too. (An
            // amount or a time asked is picked by the values a span states, and the
            // asker's situation: a key naming a price is not the price asked.)
            if record.is_some() && !matches!(self.kind, AnswerKind::Quantity | AnswerKind::Time) {
                let (key, value) = span
                    .rsplit("; ")
                    .next()
                    .and_then(|f| f.split_once(": "))
                    .unwrap_or_default();
                // So does one whose key names the kind of thing asked for (`dist` for
                // "which district"), or whose value is the form of contact asked for (`pc:
                // ZQ7 4WS` for "what's the postcode").
                if self.key_asks(key, &self.beyond)
                    || self.key_asks(key, &self.answer_phrase)
                    || self.contact.is_some_and(|c| c.stated(value))
                {
                    covered += 3;
                }
            }
            // Of a record's fields, the one for the place the question names, written by
            // its abbreviation or not (`Weekly (WET, CAD, LYM): £31.40` at Caddon Bridge).
            if !self.proper.is_empty() {
                let unabbreviated = self.unabbreviated(span);
                covered += 2 * self
                    .proper
                    .iter()
                    .filter(|n| states_name(&unabbreviated, n))
                    .count();
            }
            // A span that also states other members of a series the question names one
            // of (`7,900 in the North, …, 2,800 in the West` for the West) says less of
            // the one asked than the clause for it alone.
            let covered = covered.saturating_sub(2 * self.others_stated(span));
            found.push((covered, span.len(), span.to_owned(), values(span), fit));
        };
        // A record's field, led by the record's first field (`Room type: Private twin room;
        // Member price: £52`): the one value asked for, with whose it is, as a long record
        // is cited field by field.
        let record = record_fields(line);
        // A record led by an opaque id (`id: st06; name: Dr Aniket Solberg; role: lead vet`)
        // says whose it is by its name as well: its fields are cited after both.
        let lead = record.as_ref().map(|fields| {
            let id = fields[0]
                .split_once(": ")
                .is_some_and(|(k, _)| is_id_key(k));
            let named = fields[1..].iter().position(|f| {
                f.split_once(": ").is_some_and(|(k, _)| {
                    matches!(k.trim().to_lowercase().as_str(), "name" | "title")
                })
            });
            match named {
                Some(n) if id => (format!("{}; {}", fields[0], fields[n + 1]), n + 2),
                _ => (fields[0].to_owned(), 1),
            }
        });
        if let (Some(fields), Some((lead, after))) = (&record, &lead) {
            for (k, field) in fields.iter().enumerate().skip(1) {
                if *after == 1 || k + 1 != *after {
                    judge(&format!("{lead}; {field}"), Some(line), None);
                }
            }
            if *after > 1 {
                judge(lead, None, None);
            }
        }
        for i in 0..clauses.len() {
            // A clause that is only a value (`64` in "Arm A: …, 64; Arm B: …") ends the
            // record before it: a span of several clauses never starts there.
            let head = &line[clauses[i].0..clauses[i].1];
            let bare = content_words(head)
                .iter()
                .all(|w| w.chars().any(|c| c.is_ascii_digit()));
            for j in i..clauses.len() {
                if bare && j > i {
                    break;
                }
                judge(line[clauses[i].0..clauses[j].1].trim(), None, None);
            }
        }
        // "What does AHP mean?": the definition alone (`AHP = absorbent hygiene
        // products`), of a legend that defines others too.
        let definitions = self.definitions();
        for form in &definitions {
            if let Some(at) = line.to_lowercase().find(&form.to_lowercase()) {
                judge(&line[at..at + form.len()], None, None);
            }
        }
        // "Cash on a Premier policy": of values each labelled with whom it is for (`Cash up
        // to £250 (Essentials), £500 (Standard) or £1,000 (Premier)`), the one labelled with
        // a member the question names, after what the list says they are.
        if let Some((lead, items)) = labelled_values(line) {
            for (item, label) in items {
                if self.member_named_in(label) {
                    judge(&format!("{lead} {item}"), None, None);
                }
            }
        }
        // "Damage to an e-bike": of values each said for whom (`capped at £150 for a pedal
        // bike and £350 for an e-bike or e-scooter`), the one whose label states a word of
        // the question that no other label states, after what the list says they are.
        if let Some((lead, items)) = values_for(line) {
            let labels: Vec<BTreeSet<String>> = items
                .iter()
                .map(|(_, label)| content_stems(label).into_iter().collect())
                .collect();
            for (k, (item, _)) in items.iter().enumerate() {
                let own = self.terms.iter().any(|t| {
                    labels[k].contains(t)
                        && labels
                            .iter()
                            .enumerate()
                            .all(|(j, l)| j == k || !l.contains(t))
                });
                if own {
                    judge(&format!("{lead} {item}"), None, None);
                }
            }
        }
        // "When does the track work finish?": of a range of dates (`from Saturday 11 April
        // 2026 to Sunday 26 April 2026`), the end answers, said from its `to`; "when does
        // it start?", the start, said up to it. Either answers as much as the whole range,
        // and more of what is asked.
        let mut ends: Vec<&str> = Vec::new();
        if let (AnswerKind::Time, Some(end)) = (self.kind, self.range_side) {
            for &(a, b) in &clauses {
                let clause = &line[a..b];
                if let Some((first_ends, second_starts)) = date_range(clause) {
                    let (part, rest) = if end {
                        (&clause[second_starts..], &clause[..second_starts])
                    } else {
                        (&clause[..first_ends], &clause[first_ends..])
                    };
                    let part = part.trim();
                    judge(part, None, Some(rest));
                    ends.push(part);
                }
            }
        }
        for f in &mut found {
            if ends.contains(&f.2.as_str()) {
                f.0 += 3;
            }
        }
        // A definition asked for is the answer over the legend that holds it.
        let defining = |f: &(usize, usize, String, usize, usize)| {
            definitions.iter().any(|x| f.2.eq_ignore_ascii_case(x))
        };
        if found.iter().any(defining) {
            found.retain(defining);
        }
        // A record's span says whose it is: it opens with the record's first field (see
        // below). A clause of one of its values (`Sat 09:00–12:00` of `hours: Mon–Fri …,
        // Sat …`) is never offered, so it does not put out the fields that are.
        if let Some(first) = record.as_ref().map(|f| f[0]) {
            found.retain(|f| f.2.starts_with(first));
        }
        // An answer states one value of what is asked: a span stating two amounts (or two
        // times) gives way to one that states fewer and answers as much of the question
        // ("e-books 14 days" over "e-books 14 days, and audiobooks 21 days").
        if let Some(fewest) = found.iter().map(|f| f.3).filter(|n| *n > 0).min() {
            let best_of_fewest = found
                .iter()
                .filter(|f| f.3 == fewest)
                .map(|f| f.0)
                .max()
                .unwrap_or(0);
            // The asker's situation (`on a Sunday`) picks one of a line's values (`£145 on
            // weekday evenings, or £189 on Sundays`): a span stating that one, and fitting
            // as well, answers over one stating both, however much more it covers.
            let fit_of_fewest = found
                .iter()
                .filter(|f| f.3 == fewest)
                .map(|f| f.4)
                .max()
                .unwrap_or(0);
            // Unless it asks of what the longer span says only of its later value
            // (`office` in `sunday: gate 08:00-18:00, office 10:00-14:00`).
            let fitting_terms: BTreeSet<String> = found
                .iter()
                .filter(|f| f.3 == fewest && f.4 == fit_of_fewest)
                .flat_map(|f| content_stems(&f.2))
                .collect();
            let asking = self.asking_stems();
            let asks_of_later = |span: &str| {
                let lower = span.to_lowercase();
                let first = match self.kind {
                    AnswerKind::Time => times(span).into_iter().next(),
                    _ => amounts(span).into_iter().next(),
                };
                let later = first
                    .and_then(|v| {
                        lower
                            .find(&v.to_lowercase())
                            .map(|at| &lower[at + v.len()..])
                    })
                    .unwrap_or("");
                // Of what the question asks, not of the asker's situation ("My bins
                // normally go on a Thursday." says nothing a later value is asked of).
                content_stems(later).iter().any(|t| {
                    self.terms.contains(t) && asking.contains(t) && !fitting_terms.contains(t)
                })
            };
            // A span stating none of what is asked (only the question's own date) gives
            // way to those that state some.
            found.retain(|f| f.3 > 0);
            found.retain(|f| {
                f.3 <= fewest
                    || if fit_of_fewest > 0 && !asks_of_later(&f.2) {
                        f.4 > fit_of_fewest
                    } else {
                        f.0 > best_of_fewest
                    }
            });
            // Of spans answering as much, those stating the fewest values: a record's
            // `enrolled: 38` over its `… 4 of 38 participants`, each led by the arm.
            let least = |covered: usize| {
                found
                    .iter()
                    .filter(|f| f.0 == covered && f.3 > 0)
                    .map(|f| f.3)
                    .min()
                    .unwrap_or(0)
            };
            let least: Vec<usize> = found.iter().map(|f| least(f.0)).collect();
            let mut kept = least.iter();
            found.retain(|f| kept.next().is_none_or(|l| f.3 <= *l || f.3 == 0));
        }
        // An amount, a time, a name, or a magnitude (`the largest object`: a size, a
        // length) is one value: the span that states it with least else around it answers.
        // A price or a refund keeps its conditions (`100%, less a £5 fee`).
        let short = self.kind.needs_token()
            || matches!(self.measure, Some(Measure::Size | Measure::Extent));
        // Otherwise the longest that still reads as one answer: a whole record is not.
        let long = |len: usize| len > LONG_SPAN;
        // Who: the span that names the most, so that "Tomasz Kell, Head of …" keeps the
        // name before the role the question asked about.
        let person = |span: &str| {
            if self.kind == AnswerKind::Person {
                self.names_in(span)
            } else {
                0
            }
        };
        // A record's field (led by its first) answers for one value before a run of its
        // fields, which states the neighbours too (`Weekday: £66; Weekend: £79` for "on a
        // Wednesday"); of spans that answer as much, the one of fewest fields. A yes or no,
        // a reason or a thing is answered by the record as it stands (`status: terminated`
        // with the arm it is of).
        let led = lead
            .as_ref()
            .map_or(1, |(lead, _)| lead.matches("; ").count() + 1);
        let fields = |span: &str| {
            if record.is_some() && short {
                span.matches("; ").count()
            } else {
                0
            }
        };
        let run = |span: &str| fields(span) > led;
        // A record's span says whose it is: it opens with the record's first field. For an
        // amount, a time or a name, the model is offered only the fields that answer best
        // (a run of fields states the neighbours' values, which a small model copies);
        // a run only when no field alone answers.
        if record.is_some() {
            if let Some(top) = found.iter().filter(|f| !run(&f.2)).map(|f| f.0).max() {
                if short {
                    found.retain(|f| !run(&f.2) && f.0 == top);
                }
            }
        }
        found.sort_by(|a, b| {
            run(&a.2)
                .cmp(&run(&b.2))
                .then(b.0.cmp(&a.0))
                .then(fields(&a.2).cmp(&fields(&b.2)))
                .then(person(&b.2).cmp(&person(&a.2)))
                .then(if short {
                    a.1.cmp(&b.1)
                } else {
                    long(a.1).cmp(&long(b.1)).then(b.1.cmp(&a.1))
                })
        });
        let mut out: Vec<String> = Vec::new();
        for (_, _, span, ..) in found {
            if !out.contains(&span) {
                out.push(span);
            }
        }
        out
    }

    /// The answer-relevance rule: every cited line is about the question's subject, a
    /// superseded version is cited only when the question asks about one and the answer
    /// names it, and the answer text answers the question (see [`Question::misses`]).
    /// `cited` holds each citation's source, version and quoted text; `text` is the
    /// answer's text (the quotes themselves when the answer has none).
    #[must_use]
    pub fn judge(
        &self,
        text: &str,
        cited: &[(&str, &str, &str)],
        store: &SourceStore,
        at: &str,
    ) -> Vec<Violation> {
        let violation = |message: String, pointer: String| Violation {
            code: Code::OffQuestion,
            keyword: None,
            message,
            location: Location::instance(pointer),
        };
        let mut out = Vec::new();
        for (i, (source, version, quote)) in cited.iter().enumerate() {
            if !self.citable(quote) {
                out.push(violation(
                    format!("citation {i} quotes a heading or a question, which states no fact"),
                    format!("{at}/{i}/quote"),
                ));
            }
            if !self.names_stated(quote, source) {
                out.push(violation(
                    format!("citation {i} does not state a name the question asks about"),
                    format!("{at}/{i}/quote"),
                ));
            }
            if !self.fits(quote) {
                out.push(violation(
                    format!(
                        "citation {i} states ages, group sizes, days or a record that leave out those the question states"
                    ),
                    format!("{at}/{i}/quote"),
                ));
            }
            if !self.on_subject(source) {
                out.push(violation(
                    format!(
                        "citation {i} is from `{source}`, which is not about what the question names"
                    ),
                    format!("{at}/{i}/source_id"),
                ));
            }
            let superseded = store
                .versions(source)
                .iter()
                .any(|d| d.version() == *version && !d.in_force());
            if superseded && !text.contains(version) {
                out.push(violation(
                    format!("citation {i} is from `{source}` {version}, which is no longer in force, and the answer does not say so"),
                    format!("{at}/{i}/version"),
                ));
            }
        }
        // The answer is judged with its first citation's source, as its spans were offered.
        // A span offered of the line it quotes ([`Question::spans_in`]) was judged there,
        // read with the line's record and section: the rule does not judge it again
        // without them, which would refuse the answer the steering asked for (a record's
        // `acc BSL: 2025-05-17` states the `signed performance` its row names).
        let offered = cited.first().is_some_and(|(source, _, quote)| {
            self.spans_in(quote, Some(source)).iter().any(|s| s == text)
        });
        if let Some(why) = (!offered)
            .then(|| self.misses_in(text, cited.first().map(|c| c.0)))
            .flatten()
        {
            out.push(violation(
                format!("the answer does not answer \"{}\": {why}", self.text),
                String::new(),
            ));
        }
        out
    }
}

/// Whether `word` (lower case) is one edit (a letter added, dropped, changed, or two
/// swapped) from a common English word or from one of `known`, and long enough (five
/// letters) for that to be a slip rather than another word.
/// A word's whole base form (`discoloured` is `discolour`), or its stem when that names a
/// group of related words (`laptop` meets `computer`).
fn rare_form(word: &str) -> String {
    rare_form_of(word, stem(word))
}

/// [`rare_form`] of `word`, whose stem is `stem`.
fn rare_form_of(word: &str, stem: String) -> String {
    if stem.ends_with('+') {
        stem
    } else {
        base_form(word)
    }
}

/// The words of `text` as [`Question`]'s rare words are matched: each word's stem and its
/// [`rare_form`].
fn rare_forms(text: &str) -> BTreeSet<String> {
    words(text)
        .into_iter()
        .flat_map(|w| {
            let s = stem(w);
            [s.clone(), rare_form_of(w, s)]
        })
        .collect()
}

fn is_misspelling(word: &str, known: &BTreeSet<String>) -> bool {
    let near = |w: &str| w.len().abs_diff(word.len()) <= 1 && strsim::osa_distance(w, word) == 1;
    word.chars().count() >= 5 && (known.iter().any(|w| near(w)) || common_words().any(near))
}

/// The units `lines` glue to a number before a noun (`4-bed house`, `40-week study`), as
/// stems: the number with its unit names a kind of the noun.
fn compound_units(lines: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines {
        let tokens: Vec<&str> = line
            .split_whitespace()
            .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '-'))
            .collect();
        for pair in tokens.windows(2) {
            let Some((n, u)) = pair[0].split_once('-') else {
                continue;
            };
            let noun = pair[1].chars().count() >= 2
                && pair[1].chars().all(char::is_alphabetic)
                && !is_function_word(pair[1]);
            if !n.is_empty()
                && n.len() <= 3
                && n.chars().all(|c| c.is_ascii_digit())
                && u.chars().count() >= 2
                && u.chars().all(char::is_alphabetic)
                && noun
            {
                out.insert(stem(u));
            }
        }
    }
    out
}

/// The words right after each place `text` states the amount `value` `unit` (`arm` after
/// `30 mg arm`, `extension` after `40-week extension`).
fn amount_followers<'a>(text: &'a str, value: &str, unit: &str) -> Vec<&'a str> {
    let tokens: Vec<&str> = text
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '-'))
        .collect();
    let number = |t: &str| t.trim_start_matches('0') == value;
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let glued = t
            .split_once('-')
            .is_some_and(|(n, u)| number(n) && stem(u) == unit);
        let next = if glued {
            tokens.get(i + 1)
        } else if number(t) && tokens.get(i + 1).is_some_and(|u| stem(u) == unit) {
            tokens.get(i + 2)
        } else {
            None
        };
        out.extend(next.copied());
    }
    out
}

/// A word of [`CONTRASTS`] the question writes, and another end of its series that `text`
/// states while it states no synonym of the asked one (`first`, `last`).
fn contrasted(question: &str, text: &str) -> Option<(String, String)> {
    let lower = question.to_lowercase();
    let asked = words(&lower);
    // A record's field key (`first_last:`) names what the record holds, not which end it
    // states.
    let lower: String = text
        .split_whitespace()
        .filter(|t| !t.contains('_'))
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    let stated = words(&lower);
    for series in CONTRASTS {
        for end in *series {
            let Some(word) = asked.iter().find(|w| end.contains(w)) else {
                continue;
            };
            if stated.iter().any(|w| end.contains(w)) {
                continue;
            }
            let other = series
                .iter()
                .filter(|e| *e != end)
                .flat_map(|e| e.iter())
                .find(|o| stated.contains(o));
            if let Some(other) = other {
                return Some(((*word).to_owned(), (*other).to_owned()));
            }
        }
    }
    None
}

/// The label a line opens with when it is a record keyed by one (`A: lumeditan 5 mg`,
/// `3: …`): one capital letter or a short number, then a colon and a space (`12:30` is a
/// time), lower case.
fn bare_label(text: &str) -> Option<String> {
    let (key, _) = text.trim_start().split_once(": ")?;
    let letter = key.len() == 1 && key.chars().all(|c| c.is_ascii_uppercase());
    let number = (1..=2).contains(&key.len()) && key.chars().all(|c| c.is_ascii_digit());
    (letter || number).then(|| key.to_lowercase())
}

/// `text` without what it puts in round brackets (an aside), a space in its place.
fn without_brackets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                out.push(' ');
            }
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A record's fields (`Room type: Dorm bed; Weekday: £22; Weekend: £26`): a line of two or
/// more `; `-separated fields, each `key: value`, as a JSON Lines object or a table's row
/// is cited. `None` for any other line.
fn record_fields(line: &str) -> Option<Vec<&str>> {
    let fields: Vec<&str> = line.split("; ").map(str::trim).collect();
    let keyed = |f: &&str| {
        f.split_once(": ")
            .is_some_and(|(k, v)| !v.trim().is_empty() && !k.is_empty() && words(k).len() <= 8)
    };
    (fields.len() >= 2 && fields.iter().all(keyed)).then_some(fields)
}

/// The words `store` writes only with a capital, and at least once to open a name (not
/// after another capitalised word, nor first in its line): its names (`Pellinghurst` in
/// `town: Pellinghurst`), lower case. A word only ever written after another name
/// (`Kettlemoor Bunkhouse`) is the kind of place that name is.
fn names_written_only_capitalised(store: &SourceStore) -> BTreeSet<String> {
    let mut opening: BTreeSet<String> = BTreeSet::new();
    let mut lower: BTreeSet<String> = BTreeSet::new();
    let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    for line in store.documents().flat_map(|d| d.lines().iter()) {
        let all = words(line);
        for (i, w) in all.iter().enumerate() {
            if capitalised(w) {
                let after_name = i > 0 && capitalised(all[i - 1]) && !is_function_word(all[i - 1]);
                if i > 0 && !after_name && w.chars().skip(1).all(char::is_lowercase) {
                    opening.insert(w.to_lowercase());
                }
            } else if w.chars().all(char::is_lowercase) {
                lower.insert((*w).to_owned());
            }
        }
    }
    opening.retain(|w| !lower.contains(w));
    opening
}

/// Whether a record's key names an opaque id (`id`, `code`, `ref`), by which other records
/// refer to it and which says nothing of whose the record is.
fn is_id_key(key: &str) -> bool {
    // Also a qualified one (`staff_id`, `estate code`, `Booking-Ref`): its last word.
    let key = key.trim().to_lowercase();
    let last = key.rsplit(['_', '-', ' ']).next().unwrap_or_default();
    matches!(last, "id" | "code" | "ref")
}

/// The records of `store`'s records files (JSON Lines) keyed by an id (`id: pl; name:
/// Pellinghurst Surgery; town: Pellinghurst; …`): each id, lower case, with the values of
/// the fields that name its record (a name, a title, a town or a place), joined.
fn referred_records(store: &SourceStore) -> BTreeMap<String, String> {
    const NAMING: &[&str] = &["name", "title", "town", "city", "site", "place", "location"];
    let mut out = BTreeMap::new();
    let mut best: BTreeMap<String, usize> = BTreeMap::new();
    for d in store.documents().filter(|d| d.title().is_none()) {
        for line in d.lines() {
            let Some(fields) = record_fields(line) else {
                continue;
            };
            let Some((key, id)) = fields[0].split_once(": ") else {
                continue;
            };
            if !is_id_key(key) {
                continue;
            }
            // Of the naming fields, the first by [`NAMING`]'s order: a record cited in
            // several lines (`id: og; name: …`, `id: og; town: …`) is named by its name.
            let named: Vec<(usize, &str)> = fields[1..]
                .iter()
                .filter_map(|f| f.split_once(": "))
                .filter_map(|(k, v)| {
                    NAMING
                        .iter()
                        .position(|n| *n == k.trim().to_lowercase())
                        .map(|rank| (rank, v.trim()))
                })
                .collect();
            if let Some(rank) = named.iter().map(|(r, _)| *r).min() {
                let id = id.trim().to_lowercase();
                if best.get(&id).is_none_or(|r| rank < *r) {
                    best.insert(id.clone(), rank);
                    let names: Vec<&str> = named.iter().map(|(_, v)| *v).collect();
                    out.insert(id, names.join(" "));
                }
            }
        }
    }
    out
}

/// The fields of a record that describe which row it is rather than state a value of it:
/// those whose value is a description, with no amount and no name (`Roughly holds: a
/// two-bedroom flat`, not `Floor area: 61–85 sq ft`, `Protected data: 10 TiB` or
/// `first_aider: Hattie Okonjo`).
impl Question {
    /// The condition the asker denies ([`denied_condition`]) that `text` holds only under,
    /// read with the footnotes its marks point to (`£6.80 ¹`).
    fn denied_in(&self, text: &str) -> Option<String> {
        if self.denied.is_empty() {
            return None;
        }
        // A span of a line (a record's fields, a run of its clauses) has the line's notes.
        let note = self.footnoted.get(text).or_else(|| {
            text.chars()
                .skip(1)
                .any(is_footnote_mark)
                .then(|| {
                    self.footnoted
                        .iter()
                        .find(|(line, _)| text.split("; ").all(|f| line.contains(f)))
                        .map(|(_, n)| n)
                })
                .flatten()
        });
        let conditioned = match note {
            Some(note) => format!("{text} {note}"),
            None => text.to_owned(),
        };
        denied_condition(&self.denied, &conditioned, &self.abbreviations)
    }

    /// [`row_of`], with the fields that name the row in the question's words (`Course:
    /// Spanish Improvers` for "the price for the spanish improvers class"): a name picks the
    /// row the question asks about, though it describes no other.
    fn row_named(&self, record: &str) -> String {
        let named: Vec<&str> = record_fields(record)
            .map(|fields| {
                fields
                    .into_iter()
                    .skip(1)
                    .filter(|f| {
                        let value = f.split_once(": ").map_or(*f, |(_, v)| v);
                        amounts(value).is_empty()
                            && content_stems(value).iter().any(|t| self.terms.contains(t))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let row = row_of(record);
        if named.is_empty() {
            row
        } else {
            format!("{row} {}", named.join("; "))
        }
    }
}

fn row_of(record: &str) -> String {
    record_fields(record)
        .map(|fields| {
            fields
                .into_iter()
                .filter(|f| {
                    let value = f.split_once(": ").map_or(*f, |(_, v)| v);
                    amounts(value).is_empty()
                        && !words(value)
                            .iter()
                            .any(|w| w.starts_with(char::is_uppercase))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

/// What the sources abbreviate, by abbreviation (two to six capitals or digits, led by a
/// capital): a name followed by its abbreviation in brackets, whose letters it writes in
/// order from its first letter on (`Wetherstow (WET)`, `Caddon Bridge (CAD)`, `Out-of-hours
/// (OOH)`; not `Medium van (LWB)`), and a record whose id is written so (`id: WET; name:
/// Brackenmoor Wetherstow`, from [`referred_records`]).
fn abbreviations(
    store: &SourceStore,
    referred: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let is_abbreviation = |w: &str| {
        (2..=6).contains(&w.chars().count())
            && w.starts_with(|c: char| c.is_ascii_uppercase())
            && w.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    let mut out = BTreeMap::new();
    for (id, name) in referred {
        let upper = id.to_uppercase();
        if is_abbreviation(&upper) {
            out.insert(upper, name.clone());
        }
    }
    for line in store.documents().flat_map(|d| d.lines().iter()) {
        // A legend's row (`Abbr.: EB; Meaning: E-bike (electrically assisted pedal bike)`):
        // the code, and what it stands for when that opens with the code's letter.
        if let Some([code, meaning]) = record_fields(line).as_deref() {
            let value = |f: &str| f.split_once(": ").map(|(_, v)| v.trim().to_owned());
            if let (Some(code), Some(meaning)) = (value(code), value(meaning)) {
                // A short name whose letters it writes in order from its first on
                // (`Pedal bike` of PB): a longer meaning is an explanation, whose words
                // (`Pay As You Go`) would read into every row that writes the code.
                let name = meaning.split(" (").next().unwrap_or_default().trim();
                let lower = name.to_lowercase();
                let mut rest = lower.chars();
                let spelt = code.to_lowercase().chars().all(|c| rest.any(|l| l == c));
                if is_abbreviation(&code)
                    && lower.starts_with(&code[..1].to_lowercase())
                    && spelt
                    && (1..=2).contains(&words(name).len())
                {
                    keep_fuller(&mut out, &code, name);
                }
            }
        }
        for (at, _) in line.match_indices('(') {
            let Some(inside) = line[at + 1..].split([')', ',']).next() else {
                continue;
            };
            let abbreviation = inside.trim();
            if !is_abbreviation(abbreviation) || !line[at + 1..].contains(')') {
                continue;
            }
            let before = words(&line[..at]);
            let letters: Vec<char> = abbreviation.to_lowercase().chars().collect();
            // The fewest words before the bracket, up to four, whose letters hold the
            // abbreviation's in order and whose first letter is its first.
            let name = (1..=before.len().min(4)).find_map(|n| {
                let run = &before[before.len() - n..];
                let text = run.join(" ").to_lowercase();
                let mut wanted = letters.iter().peekable();
                for c in text.chars().filter(|c| c.is_alphanumeric()) {
                    if wanted.peek() == Some(&&c) {
                        wanted.next();
                    }
                }
                (text.starts_with(letters[0])
                    && wanted.peek().is_none()
                    && run[0].starts_with(char::is_uppercase))
                .then(|| run.join(" "))
            });
            if let Some(name) = name {
                keep_fuller(&mut out, abbreviation, &name);
            }
        }
        // A legend (`Port codes: KIL = Kilbrannan Pier · PVN = Portvane (Isle of Hallan)`):
        // each code with the name after its `=`, up to the next separator.
        for (at, _) in line.match_indices(" = ") {
            let Some(code) = line[..at].rsplit([' ', ':', ';', ',', '·', '(']).next() else {
                continue;
            };
            let rest = &line[at + 3..];
            let end = rest.find(['·', ';', ',', '|']).unwrap_or(rest.len());
            // The next legend entry may follow with no separator but its own `CODE =`.
            let name = rest[..end].split(" = ").next().unwrap_or_default();
            let name = match name.rsplit_once(' ') {
                Some((head, last)) if rest[..end].contains(" = ") && is_abbreviation(last) => head,
                _ => name,
            }
            .trim()
            .trim_end_matches('.');
            let first = code.chars().next().map(|c| c.to_ascii_lowercase());
            // A name in lower case (`AHP = absorbent hygiene products`) is one when its
            // words' initials spell the code.
            let initials: String = words(name)
                .iter()
                .filter_map(|w| w.chars().next())
                .collect::<String>()
                .to_uppercase();
            if is_abbreviation(code)
                && (name.starts_with(char::is_uppercase) || initials == code)
                && name.chars().next().map(|c| c.to_ascii_lowercase()) == first
                && (1..=6).contains(&words(name).len())
            {
                keep_fuller(&mut out, code, name);
            }
        }
    }
    out
}

/// The periods `text` states a rate for (`per year`, `a month`, `£5/week`, `annually`), by
/// name: `day`, `week`, `month`, `year`, `night` or `hour`.
fn rate_periods(text: &str) -> BTreeSet<&'static str> {
    const PERIODS: [(&str, &[&str]); 6] = [
        ("day", &["day", "daily"]),
        ("week", &["week", "weekly"]),
        ("month", &["month", "monthly"]),
        ("year", &["year", "yearly", "annual", "annually", "annum"]),
        ("night", &["night", "nightly"]),
        ("hour", &["hour", "hourly"]),
    ];
    let lower = text.to_lowercase();
    let tokens = words(&lower);
    let mut out = BTreeSet::new();
    for (i, t) in tokens.iter().enumerate() {
        for (name, forms) in PERIODS {
            // `per year`, `a year`, `each month`, `/week`; or the adverb (`annually`,
            // `monthly`) or adjective (`annual fee`), which is the period itself.
            let noun = forms[0] == *t
                && i.checked_sub(1).is_some_and(|j| {
                    ["per", "a", "an", "each", "every"].contains(&tokens[j])
                        || lower.contains(&format!("/{t}"))
                });
            if noun || forms[1..].contains(t) {
                out.insert(name);
            }
        }
    }
    out
}

/// The code `question` asks the meaning of (`what does AHP mean`, `what does CTR stand for`,
/// `what is meant by DMR`), with the name the sources give it.
fn asked_code(
    question: &str,
    abbreviations: &BTreeMap<String, String>,
) -> Option<(String, String)> {
    let w = words(question);
    let lower: Vec<String> = w.iter().map(|t| t.to_lowercase()).collect();
    let asks = lower.windows(2).any(|p| p == ["stand", "for"])
        || lower
            .iter()
            .any(|t| ["mean", "means", "meaning", "meant"].contains(&t.as_str()));
    if !asks || lower.first().is_none_or(|f| f != "what") {
        return None;
    }
    w.iter()
        .find_map(|t| abbreviations.get(*t).map(|n| ((*t).to_owned(), n.clone())))
}

/// A list of values each said for whom or what (`capped at £150 for a pedal bike and £350
/// for an e-bike or e-scooter`): what leads it (`capped at`), and each value with its
/// label (`£350 for an e-bike or e-scooter`, `an e-bike or e-scooter`). At least two, each
/// a number and ` for `, joined by `, `, ` and `, ` or ` or `, and `.
fn values_for(line: &str) -> Option<(&str, Vec<(&str, &str)>)> {
    let body = line.trim_end_matches(['.', ';', ' ']);
    // Where each value starts and where its ` for ` ends.
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for (at, _) in body.match_indices(" for ") {
        let before = &body[..at];
        let start = before.rfind(' ').map_or(0, |i| i + 1);
        if before[start..].chars().any(|c| c.is_ascii_digit()) {
            starts.push((start, at + " for ".len()));
        }
    }
    if starts.len() < 2 {
        return None;
    }
    const JOINS: [&str; 4] = [", and ", " and ", " or ", ", "];
    let mut items = Vec::new();
    for (k, &(start, label_at)) in starts.iter().enumerate() {
        let end = match starts.get(k + 1) {
            Some(&(next, _)) => {
                let gap = &body[label_at..next];
                let join = JOINS.iter().find(|j| gap.ends_with(**j))?;
                next - join.len()
            }
            None => body.len(),
        };
        if end <= label_at {
            return None;
        }
        items.push((&body[start..end], &body[label_at..end]));
    }
    let lead = body[..starts[0].0].trim();
    (!lead.is_empty()).then_some((lead, items))
}

/// A list of values each labelled in brackets with whom it is for (`Cash up to £250
/// (Essentials), £500 (Standard) or £1,000 (Premier)`): what leads it (`Cash up to`), and
/// each value with its label (`£1,000 (Premier)`, `Premier`). At least two, each stating a
/// number, joined by `, `, `; `, ` or ` or ` and `.
fn labelled_values(line: &str) -> Option<(&str, Vec<(&str, &str)>)> {
    let mut items: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut depth = 0_usize;
    let mut open = 0;
    for (at, c) in line.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    open = at;
                }
                depth += 1;
            }
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    // The value is what comes after the last separator before the bracket.
                    let before = &line[..open];
                    let start = [", ", "; ", " or ", " and "]
                        .iter()
                        .filter_map(|sep| before.rfind(sep).map(|i| i + sep.len()))
                        .max()
                        .unwrap_or(0)
                        .max(items.last().map_or(0, |i| i.1));
                    items.push((start, at + 1, open + 1, at));
                }
            }
            _ => {}
        }
    }
    if items.len() < 2 {
        return None;
    }
    // Each value after the first follows the one before with a separator alone.
    let joined = items.windows(2).all(|w| {
        let gap = line[w[0].1..w[1].0].trim_matches(|c: char| c == ',' || c == ';' || c == ' ');
        gap.is_empty() || gap == "or" || gap == "and"
    });
    // The first value is its number, after what the list is of (`Cash up to`).
    let first = &line[items[0].0..items[0].2 - 1];
    let mut word_starts = first
        .char_indices()
        .filter(|&(i, c)| {
            !c.is_whitespace() && (i == 0 || first[..i].ends_with(char::is_whitespace))
        })
        .map(|(i, _)| i);
    let lead_end = items[0].0
        + word_starts.find(|&i| {
            first[i..]
                .split_whitespace()
                .next()
                .is_some_and(|w| w.chars().any(|c| c.is_ascii_digit()))
        })?;
    let lead = line[..lead_end].trim();
    let valued = items
        .iter()
        .all(|i| line[i.0..i.2].chars().any(|c| c.is_ascii_digit()));
    (joined && valued && !lead.is_empty()).then(|| {
        let mut out = vec![(
            line[lead_end..items[0].1].trim(),
            &line[items[0].2..items[0].3],
        )];
        out.extend(
            items[1..]
                .iter()
                .map(|i| (line[i.0..i.1].trim(), &line[i.2..i.3])),
        );
        (lead, out)
    })
}

/// Records `name` as what `code` stands for, unless a name of as many words or more is
/// already recorded: a code written out twice (`Ashmere (ASH)`, `ASH = Ashmere Centre`)
/// stands for its fuller name, whichever document is read first.
fn keep_fuller(out: &mut BTreeMap<String, String>, code: &str, name: &str) {
    let fuller = out
        .get(code)
        .is_none_or(|known| words(name).len() > words(known).len());
    if fuller {
        out.insert(code.to_owned(), name.to_owned());
    }
}

/// What the sources abbreviate, by abbreviation ([`abbreviations`]): a search finds a line
/// that writes `KWMM` by the name it stands for.
#[must_use]
pub fn abbreviations_of(store: &SourceStore) -> BTreeMap<String, String> {
    abbreviations(store, &referred_records(store))
}

/// `text` with what each abbreviation it writes stands for after it (`WET Wetherstow`),
/// by `abbreviations` ([`abbreviations_of`]).
#[must_use]
pub fn unabbreviate<'a>(
    text: &'a str,
    abbreviations: &BTreeMap<String, String>,
) -> std::borrow::Cow<'a, str> {
    if abbreviations.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let long: Vec<&str> = words(text)
        .into_iter()
        .filter_map(|w| abbreviations.get(w).map(String::as_str))
        .collect();
    if long.is_empty() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{text} ({})", long.join(", ")))
    }
}

/// What the records `line` refers to by their ids name ([`referred_records`]): a field
/// after the first whose whole value is another record's id (`clinic: pl`).
fn refers_to(line: &str, referred: &BTreeMap<String, String>) -> Option<String> {
    if referred.is_empty() {
        return None;
    }
    let fields = record_fields(line)?;
    let names: Vec<&str> = fields[1..]
        .iter()
        .filter_map(|f| f.split_once(": "))
        .filter_map(|(_, v)| referred.get(&v.trim().to_lowercase()))
        .map(String::as_str)
        .collect();
    (!names.is_empty()).then(|| names.join(" "))
}

/// Whether one of `values` lies in one of `ranges` (each inclusive); `None` when either is
/// empty: the question or the line says nothing of it.
fn holds(values: &[u32], ranges: &[(u32, u32)]) -> Option<bool> {
    (!values.is_empty() && !ranges.is_empty()).then(|| {
        ranges
            .iter()
            .any(|(lo, hi)| values.iter().any(|v| (*lo..=*hi).contains(v)))
    })
}

/// The words `text` names days with: `weekend`, `weekday` (or their plurals).
fn day_words(text: &str) -> Vec<&'static str> {
    let lower = text.to_lowercase();
    let written = words(&lower);
    ["weekend", "weekday"]
        .into_iter()
        .filter(|d| written.iter().any(|w| w.trim_end_matches('s') == *d))
        .collect()
}

/// An optional value as the values [`holds`] reads.
fn ranges_of(value: Option<u32>) -> Vec<u32> {
    value.into_iter().collect()
}

/// A record's first field (`Tier` and `Pro` in `Tier: Pro; Devices: 5`), when `line` is a
/// record ([`record_fields`]).
fn record_field(line: &str) -> Option<(&str, &str)> {
    let fields = record_fields(line)?;
    let (key, value) = fields[0].split_once(": ")?;
    Some((key.trim(), value.trim()))
}

/// The runs of capitalised words of `text`, each run's words in lower case
/// ([`capital_run_ranges`]): `EV Night`, `Night Saver`.
fn capital_runs(text: &str) -> Vec<Vec<String>> {
    let all = words(text);
    capital_run_ranges(text, &all)
        .into_iter()
        .map(|(start, end)| all[start..end].iter().map(|w| w.to_lowercase()).collect())
        .collect()
}

/// The runs of capitalised words among `all`, the [`words`] of `text`, as ranges of their
/// indices: words next to each other with only spaces between them. Punctuation ends a run
/// (`Saver,`, `Night:`), and a bracket opens another (`Board (DSMB)` writes one name twice).
fn capital_run_ranges(text: &str, all: &[&str]) -> Vec<(usize, usize)> {
    let capital = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    let offset = |w: &str| w.as_ptr() as usize - text.as_ptr() as usize;
    let spaced = |a: &str, b: &str| {
        text.get(offset(a) + a.len()..offset(b))
            .is_some_and(|gap| gap.chars().all(char::is_whitespace))
    };
    let mut runs = Vec::new();
    let mut start = 0;
    while start < all.len() {
        let mut end = start + 1;
        if capital(all[start]) {
            while end < all.len() && capital(all[end]) && spaced(all[end - 1], all[end]) {
                end += 1;
            }
            runs.push((start, end));
        }
        start = end;
    }
    runs
}

/// A series of records the question names members of (`Tier: Home`, `Tier: Pro`, …).
#[derive(Debug, Clone, Default, Serialize)]
struct Series {
    /// The values the question names, lower case.
    named: BTreeSet<String>,
    /// The other values, as the records write them (`Home`).
    others: BTreeSet<String>,
}

/// Per key of the records among `lines` (lower case) whose values are more than one, the
/// values `question` (lower case) names whole, as words, and the others: a value named
/// inside a longer one named (`family room` in `large family room`) is that one. A value
/// must hold a letter (a bare number is the asker's count as often as a row's label) and
/// not be a function word.
fn members_named<'a>(
    question: &str,
    lines: impl Iterator<Item = &'a str>,
) -> BTreeMap<String, Series> {
    let mut series: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for line in lines {
        if let Some((key, value)) = record_field(line) {
            series.entry(key.to_lowercase()).or_default().insert(value);
        }
    }
    let asked = words(question);
    let mut out = BTreeMap::new();
    for (key, values) in series.into_iter().filter(|(_, v)| v.len() >= 2) {
        // Each value named, with where its words lie in the question.
        let mut found: Vec<(&str, usize, usize)> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for value in values {
            let lower = value.to_lowercase();
            let words_of = words(&lower);
            if words_of.is_empty()
                || !value.chars().any(char::is_alphabetic)
                || (words_of.len() == 1 && is_function_word(words_of[0]))
            {
                continue;
            }
            names.push(value);
            if let Some(at) = asked
                .windows(words_of.len())
                .position(|w| w == words_of.as_slice())
            {
                found.push((value, at, at + words_of.len()));
            }
        }
        let named: BTreeSet<String> = found
            .iter()
            .filter(|(_, a, b)| {
                !found
                    .iter()
                    .any(|(_, c, d)| c <= a && b <= d && d - c > b - a)
            })
            .map(|(v, _, _)| v.to_lowercase())
            .collect();
        if !named.is_empty() {
            let others = names
                .into_iter()
                .filter(|v| !named.contains(&v.to_lowercase()))
                .map(str::to_owned)
                .collect();
            out.insert(key, Series { named, others });
        }
    }
    out
}

/// Whether `text` states the name `name` (lower case): a word writing it
/// ([`same_name`]), or, for a day of the week, a range of days holding it (`Sun–Thu` states
/// `wednesday`, [`days_stated`]).
fn states_name(text: &str, name: &str) -> bool {
    let lower = text.to_lowercase();
    words(&lower).iter().any(|w| same_name(w, name))
        || (is_weekday(name)
            && days_stated(text).is_some_and(|days| {
                days_stated(name).is_some_and(|d| d.iter().zip(days).any(|(a, b)| *a && b))
            }))
}

/// Whether two lower-case words write the same name, one perhaps as a plural (`sundays`,
/// `sunday`): a name is matched whole, never by a shared beginning (`northgate` is not
/// `northfield`).
fn same_name(a: &str, b: &str) -> bool {
    // A short name's plural adds an `s` (`dvd`, `dvds`); a longer one's may also drop one.
    let plural = |x: &str, y: &str| x.len() >= 3 && x.strip_suffix('s') == Some(y);
    a == b
        || plural(a, b)
        || plural(b, a)
        || (a.len() > 3 && b.len() > 3 && a.trim_end_matches('s') == b.trim_end_matches('s'))
}

/// Whether `tokens[i]` is the `old` of an age (`9-year-old`, `two weeks old`, `how old`,
/// `old enough`), not a version.
fn is_age_old(tokens: &[&str], i: usize) -> bool {
    tokens[i] == "old"
        && ((i > 0
            && [
                "year", "years", "yr", "yrs", "month", "months", "week", "weeks", "day", "days",
                "how",
            ]
            .contains(&tokens[i - 1]))
            // `old enough to hire`, `how old`: asks an age, not a version.
            || tokens.get(i + 1) == Some(&"enough"))
}

/// Whether `question` asks about an earlier version: a word for one (`old`, `previous`,
/// not in an age), `first version`, or a version label of `superseded` written as a word
/// (`v1`, `fees-v1`).
/// Whether the word at `i` asks for an earlier version: an [`EARLIER`] word, or `before`
/// a change (`before the April 2025 change`, `before the update`).
fn marks_earlier(tokens: &[&str], i: usize) -> bool {
    const CHANGES: &[&str] = &[
        "change",
        "changes",
        "changed",
        "update",
        "updated",
        "revision",
        "revised",
        "amendment",
        "amended",
        "new",
        "increase",
        "rise",
    ];
    // `my old mattress`, `2 old chests`, `an old sofa`: the asker's things are old, not a
    // version (`the old terms`, `your old prices`).
    let owned = i > 0
        && (["my", "our", "his", "her", "their", "a", "an"].contains(&tokens[i - 1])
            || tokens[i - 1].chars().all(|c| c.is_ascii_digit())
            || ["one", "two"].contains(&tokens[i - 1])
            || NUMBER_WORDS.contains(&tokens[i - 1]));
    // "Under last year's wording": what last year had, the version before this one.
    let last_years = tokens[i] == "last"
        && tokens.get(i + 1) == Some(&"year")
        && tokens.get(i + 2) == Some(&"s");
    (EARLIER.contains(&tokens[i]) && !owned)
        || last_years
        || (tokens[i] == "before" && {
            // `before the prices went up` reads `increase`.
            let next = tokens[i + 1..]
                .iter()
                .take(4)
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            words(&reading(&next))
                .iter()
                .any(|w| CHANGES.contains(&w.to_lowercase().as_str()))
        })
}

/// Whether `question` names a year (`last year, in 2024`) in which a superseded version of
/// a source applied and the version in force did not, as the manifest dates them.
fn asks_of_earlier_years(question: &str, store: &SourceStore) -> bool {
    let years = stated_years(question);
    store.documents().filter(|d| !d.in_force()).any(|old| {
        let current = store
            .versions(old.source_id())
            .iter()
            .find(|d| d.in_force());
        years.iter().any(|y| {
            old.applied_in(*y) == Some(true)
                && current.is_some_and(|c| c.applied_in(*y) == Some(false))
        })
    })
}

fn asks_earlier(question: &str, superseded: &[&str]) -> bool {
    let lower = question.to_lowercase();
    let tokens = words(&lower);
    (0..tokens.len()).any(|i| marks_earlier(&tokens, i) && !is_age_old(&tokens, i))
        || lower.contains("first version")
        || superseded.iter().any(|v| {
            let v = v.to_lowercase();
            question
                .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | '?'))
                .any(|t| {
                    let t = t.to_lowercase();
                    t == v || t.ends_with(&format!("-{v}"))
                })
        })
}

/// The words of what a `what is the …` question asks for (`speed limit` in "What is the
/// speed limit for trams?", `registered title` in "what's the registered title of …"), lower
/// case: the words after `what`/`which`, a form of `be` and an article or possessive, up to
/// the first function word or past participle (`the longest stay allowed`).
fn attribute_phrase(question: &str) -> Vec<&str> {
    let w = words(question);
    for i in 0..w.len().saturating_sub(2) {
        // `what's` is read as `what` and `s`.
        let opens = matches!(w[i], "what" | "which");
        let be = matches!(w[i + 1], "is" | "was" | "are" | "were" | "s");
        let det = i + 2;
        if opens
            && be
            && matches!(
                w.get(det).copied(),
                Some("the" | "a" | "an" | "its" | "their" | "your" | "my" | "our")
            )
        {
            // A participle before the noun describes it (`the registered title`); after
            // it, it ends the phrase (`the longest stay allowed`).
            return w[det + 1..]
                .iter()
                .copied()
                .enumerate()
                .take_while(|(k, x)| {
                    !is_function_word(x)
                        && x.chars().all(char::is_alphabetic)
                        && (*k == 0 || !is_participle(x))
                })
                .map(|(_, x)| x)
                .take(4)
                .collect();
        }
    }
    Vec::new()
}

/// Irregular past participles, which follow what is asked for rather than name it
/// (`the longest stay allowed`, `the dose given`).
const IRREGULAR_PARTICIPLES: &[&str] = &[
    "given", "taken", "known", "seen", "written", "done", "made", "paid", "sent", "kept", "held",
    "left", "told", "found", "shown", "run", "set", "put", "brought", "bought", "built", "chosen",
    "driven", "spent", "worn", "gone", "begun", "won", "lost", "sold", "met", "led",
];

/// Whether `word` (lower case) reads as a past participle: a regular one (`allowed`,
/// `required`; not `speed` or `need`) or an irregular one.
fn is_participle(word: &str) -> bool {
    (word.len() >= 5 && word.ends_with("ed") && !word.ends_with("eed"))
        || IRREGULAR_PARTICIPLES.contains(&word)
}

/// Words naming the kind of value asked for, which an answer states by its kind rather than
/// by the word (`the date of`, `the name of`), and words that qualify it without saying what
/// it is of (`the current fare`, `the usual dose`): a source need not write either.
const GENERIC_ATTRIBUTES: &[&str] = &[
    "name",
    "title",
    "date",
    "time",
    "day",
    "year",
    "number",
    "amount",
    "cost",
    "price",
    "address",
    "value",
    "total",
    "size",
    "length",
    "rate",
    "current",
    "latest",
    "new",
    "present",
    "standard",
    "usual",
    "typical",
    "normal",
    "main",
    "official",
    "full",
    "exact",
    "overall",
    "general",
    "basic",
    "regular",
    "average",
    "first",
    "last",
    "next",
    "final",
    "original",
    "actual",
    "expected",
    "planned",
    "approximate",
    "estimated",
    "right",
    "correct",
    "best",
    "whole",
];

/// What "how many" counts in `question` (lower case): the stems of the noun phrase after
/// it, up to the first function word (`interlibrary loan requests` in "how many
/// interlibrary loan requests can I have"). A word that names no kind of thing (`things`)
/// counts anything, so it constrains nothing.
fn counted_phrase(question: &str) -> Vec<String> {
    const ANYTHING: [&str; 4] = ["thing", "things", "ones", "stuff"];
    // "The most mesh discs", "the maximum number of guests": a count as well, when what
    // follows ends in a plural (`the most expensive plan` asks no count).
    const LIMITS: [&str; 6] = [
        "the most ",
        "maximum number of ",
        "max number of ",
        "largest number of ",
        "minimum number of ",
        "smallest number of ",
    ];
    let phrase_of = |rest: &str| -> Vec<String> {
        words(rest)
            .into_iter()
            .take_while(|w| !is_function_word(w) && w.chars().all(char::is_alphabetic))
            .take(4)
            .map(str::to_owned)
            .collect()
    };
    let phrase = if let Some(rest) = question.split("how many ").nth(1) {
        // "How many of your learners": the count is of what follows the determiner.
        let rest = rest
            .strip_prefix("of ")
            .and_then(|r| r.split_once(' '))
            .filter(|(d, _)| is_function_word(d))
            .map_or(rest, |(_, after)| after);
        phrase_of(rest)
    } else if let Some(rest) = LIMITS.iter().find_map(|l| question.split(l).nth(1)) {
        let phrase = phrase_of(rest);
        let plural = phrase.last().is_some_and(|w| {
            (w.ends_with('s') && !w.ends_with("ss") && w.len() > 3)
                || ["people", "children", "men", "women"].contains(&w.as_str())
        });
        if !plural {
            return Vec::new();
        }
        phrase
    } else {
        return Vec::new();
    };
    if phrase.iter().any(|w| ANYTHING.contains(&w.as_str())) {
        return Vec::new();
    }
    phrase.iter().map(|w| stem(w)).collect()
}

/// Whether `question` (lower case) asks for a point in time rather than any time: a date, a
/// year, a month, a day, or since when.
/// Whether `question` (lower case) asks for a time of day: `what time` (or `what times`),
/// unless it asks for a time of year or a period.
fn asks_time_of_day(question: &str) -> bool {
    let w = words(question);
    w.windows(2).enumerate().any(|(i, p)| {
        p[0] == "what"
            && (p[1] == "time" || p[1] == "times")
            && !matches!(
                w.get(i + 2).copied(),
                Some("period" | "frame" | "limit" | "scale" | "span")
            )
            && !(w.get(i + 2) == Some(&"of") && w.get(i + 3).is_some_and(|x| *x != "day"))
    })
}

/// Whether a time [`times`] read is a time of day (`17:30`, `8 pm`, `noon`).
fn is_time_of_day(time: &str) -> bool {
    time.contains(':')
        || time.ends_with("am")
        || time.ends_with("pm")
        || ["noon", "midday", "midnight"].contains(&time)
}

fn asks_point_in_time(question: &str) -> bool {
    let tokens = words(question);
    tokens.windows(2).any(|w| {
        (["what", "which"].contains(&w[0]) && ["date", "year", "month", "day"].contains(&w[1]))
            || (w[0] == "since" && w[1] == "when")
            || (w[0] == "date" && w[1] == "of")
    })
}

/// The pronouns a question's asker is written with (`can I`, `may we`).
const ASKER_PRONOUNS: [&str; 8] = ["i", "we", "you", "they", "he", "she", "it", "one"];

/// Verbs too general to say what a question asks (`get`, `have`).
const GENERAL_VERBS: [&str; 13] = [
    "be", "have", "get", "go", "need", "use", "make", "do", "take", "see", "know", "find", "come",
];

/// The verb of a yes-or-no question whose subject is a pronoun ("Can I renew …", "Do we
/// pay …"), as a stem; none for a verb too general to tell answers apart (`get`, `need`).
fn asked_verb(question: &str) -> Option<String> {
    const AUX: [&str; 12] = [
        "can", "could", "may", "might", "do", "does", "did", "will", "would", "should", "must",
        "shall",
    ];
    let part = asking_part(question).to_lowercase();
    let w = words(&part);
    if w.len() < 3 || !AUX.contains(&w[0]) || !ASKER_PRONOUNS.contains(&w[1]) {
        return None;
    }
    // An adverb before the verb (`Can I just hand …`, `Do we still pay …`) says how, not
    // what is done.
    const ADVERBS: [&str; 10] = [
        "just", "still", "also", "really", "simply", "actually", "ever", "already", "only", "even",
    ];
    let &verb = w[2..].iter().find(|v| !ADVERBS.contains(v))?;
    (verb.chars().all(char::is_alphabetic)
        && !GENERAL_VERBS.contains(&verb)
        && !is_function_word(verb))
    .then(|| stem(verb))
}

/// Whether `question` asks when something is happening with `be` and a verb in `-ing`
/// (`When are the charges going up`): what happens is surely a verb, read as
/// [`asked_event`] reads it.
fn asks_progressive(question: &str) -> bool {
    let original = words(asking_part(question))
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>();
    original.len() >= 4
        && original[0] == "when"
        && ["is", "are", "was", "were"].contains(&original[1].as_str())
        && original[2..].iter().any(|w| {
            w.len() >= 5 && w.ends_with("ing") && !is_function_word(w) && !is_common_noun_ing(w)
        })
}

/// Words after a length of time that make it how far ahead something is done (`14 days in
/// advance`, `48 hours' notice`, `2 weeks before`).
const LEAD_MARKS: [&str; 5] = ["advance", "ahead", "before", "beforehand", "notice"];

/// Whether `question` asks how far ahead (`how far ahead`, `in advance`, `how much
/// notice`, `before`).
fn asks_lead_time(question: &str) -> bool {
    words(&question.to_lowercase())
        .iter()
        .any(|w| LEAD_MARKS.contains(w) || *w == "soon" || *w == "earliest")
}

/// `text` without the lengths of time it says are how far ahead ([`LEAD_MARKS`]): `Book up
/// to 14 days in advance.` becomes `Book up to .`.
fn without_lead_times(text: &str) -> String {
    static LEAD: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let lead = LEAD.get_or_init(|| {
        regex::Regex::new(&format!(
            r"(?i)\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve|a|an)\s+(working\s+|clear\s+|full\s+)?(minutes?|hours?|days?|nights?|weeks?|months?|years?)('s?|’s?)?\s+(in\s+)?({})\b",
            LEAD_MARKS.join("|")
        ))
        .expect("a valid pattern")
    });
    lead.replace_all(text, "").into_owned()
}

/// Whether `text` states a value changing: `from £240.00 to £260.00`, `up from 16p to 18p`.
fn changes_value(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.split(" from ").skip(1).any(|after| {
        after.split_once(" to ").is_some_and(|(a, b)| {
            a.chars().any(|c| c.is_ascii_digit())
                && b.starts_with(|c: char| c.is_ascii_digit() || CURRENCY_SIGNS.contains(&c))
        })
    })
}

/// What a `when` question asks to happen, as a stem ([`Question::event`]): the verb after
/// its subject (`When does the Tathwick practice open again` asks `reopen`; `When are the
/// charges next going up` asks `increase`), read with phrasal verbs and `again`. `None`
/// for a verb any time of a timetable answers (`open`, `close`, `leave`: an hours row or a
/// departure time is when), a general verb (`get`, `go`), and a `when is` that asks for a
/// thing's time (`When is the next bus`).
fn asked_event(question: &str) -> Option<Vec<String>> {
    const AUX: [&str; 15] = [
        "do", "does", "did", "will", "would", "can", "could", "should", "shall", "is", "are",
        "was", "were", "must", "may",
    ];
    const PRONOUNS: [&str; 7] = ["i", "we", "you", "they", "he", "she", "it"];
    // Verbs whose time a timetable, an hours row or a date range states without naming
    // them.
    const TIMETABLED: [&str; 22] = [
        "open", "close", "shut", "start", "begin", "commence", "finish", "end", "leave", "depart",
        "arrive", "run", "operate", "stop", "come", "go", "get", "be", "have", "happen", "take",
        "need",
    ];
    let original = words(asking_part(question))
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>();
    if original.len() < 4 || original[0] != "when" || !AUX.contains(&original[1].as_str()) {
        return None;
    }
    // `When is the next bus`: a thing's time, unless a verb in `-ing` follows (`When are
    // the charges going up`).
    let be = ["is", "are", "was", "were"].contains(&original[1].as_str());
    if be && !asks_progressive(question) {
        return None;
    }
    let read = reading(asking_part(question)).to_lowercase();
    let w = words(&read);
    let rest = w.get(2..)?;
    // `When can I drop in`: what the asker may do is when the thing is offered, which
    // a line says in its own verb (`volunteers give help every Thursday`).
    if PRONOUNS.contains(&rest[0]) {
        return None;
    }
    // The subject's words and then the verb: the last of the first run of words that
    // are not function words (`the Tathwick practice open reopen after`).
    let start = rest.iter().take_while(|v| is_function_word(v)).count();
    let run = rest[start..]
        .iter()
        .take_while(|v| !is_function_word(v))
        .count();
    if run < 2 {
        return None;
    }
    let verb = rest[start + run - 1];
    let base = stem(verb);
    if !verb.chars().all(char::is_alphabetic)
        || is_weekday(verb)
        || TIMETABLED.iter().any(|t| stem(t) == base)
    {
        return None;
    }
    // `When did the board hold its first review meeting`: a light verb's object is the
    // event as well (`met on 8 January`).
    let after = &rest[start + run..];
    // An object opens with a determiner right after the verb (`hold its meeting`), not with
    // a preposition (`reopen after the work`).
    let determined = after.first().is_some_and(|d| {
        [
            "the", "a", "an", "its", "their", "his", "her", "my", "our", "your",
        ]
        .contains(d)
    });
    let object = after.iter().take_while(|v| is_function_word(v)).count() * usize::from(determined);
    let head = after[object..]
        .iter()
        .take_while(|v| !is_function_word(v))
        .last()
        .filter(|_| object > 0)
        .map(|v| stem(v));
    Some(std::iter::once(base).chain(head).collect())
}

/// Which end of a range a question asks for ([`Question::range_side`]), by its asking
/// part's words.
fn asked_range_side(question: &str) -> Option<bool> {
    const END: [&str; 14] = [
        "finish",
        "finished",
        "finishes",
        "end",
        "ends",
        "ended",
        "over",
        "until",
        "till",
        "complete",
        "completed",
        "expire",
        "expires",
        "stop",
    ];
    const START: [&str; 7] = [
        "start",
        "starts",
        "begin",
        "begins",
        "commence",
        "commences",
        "from",
    ];
    let part = asking_part(question).to_lowercase();
    let w = words(&part);
    let end = w.iter().any(|x| END.contains(x));
    let start = w.iter().any(|x| START.contains(x));
    (end != start).then_some(end)
}

/// Where a range of two dates in `text` (`from 11 April 2026 to 26 April 2026`, `2 June –
/// 14 July 2025`) has its first date end and its second part start (at its `to`, `until`
/// or dash); `None` when it has none. Clock times (`08:30–17:30`) are no range of dates.
fn date_range(text: &str) -> Option<(usize, usize)> {
    const SEPARATORS: [&str; 6] = [" to ", " until ", " till ", " – ", " - ", "–"];
    // A token of a date: a year, a month (whole or cut short), an ISO date, or a day's
    // number beside a month.
    let bare = |t: &str| {
        t.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
            .to_owned()
    };
    let year = |t: &str| is_year(t);
    let iso = |t: &str| {
        let parts: Vec<&str> = t.split('-').collect();
        parts.len() == 3 && year(parts[0]) && parts[1..].iter().all(|p| p.len() == 2)
    };
    let day = |t: &str| {
        (1..=2).contains(&t.len()) && t.parse::<u8>().is_ok_and(|d| (1..=31).contains(&d))
    };
    let month = |t: &str| names_month(t) && t.chars().all(char::is_alphabetic);
    for sep in SEPARATORS {
        for (at, _) in text.match_indices(sep) {
            let (left, right) = (&text[..at], &text[at + sep.len()..]);
            let before: Vec<String> = left.split_whitespace().rev().take(2).map(bare).collect();
            let Some(last) = before.first() else {
                continue;
            };
            let ends = year(last)
                || iso(last)
                || month(last)
                || (day(last) && before.get(1).is_some_and(|m| month(m)));
            let after: Vec<String> = right.split_whitespace().take(4).map(bare).collect();
            let starts = after.iter().take(3).enumerate().any(|(i, t)| {
                year(t)
                    || iso(t)
                    || month(t)
                    || (day(t) && after.get(i + 1).is_some_and(|m| month(m)))
            });
            if ends && starts && !left.ends_with(':') {
                // A word (`to 26 April`) is said with its date; a dash is not.
                let worded = sep.trim().chars().all(char::is_alphabetic);
                let end = left.trim_end().len();
                return Some((end, if worded { at + 1 } else { at + sep.len() }));
            }
        }
    }
    None
}

/// Nouns in `-ing` that are no verb (`morning`, `building`).
fn is_common_noun_ing(word: &str) -> bool {
    [
        "morning",
        "evening",
        "building",
        "spring",
        "thing",
        "ceiling",
        "ring",
        "king",
        "string",
        "wedding",
        "meeting",
        "booking",
        "parking",
        "training",
        "clothing",
        "housing",
        "ending",
        "opening",
        "closing",
        "something",
        "anything",
        "nothing",
        "everything",
    ]
    .contains(&word)
}

/// `text` as its words in lower case, one space apart and one on each side, so that
/// `contains` finds a phrase only as whole words (` west ` in ` 2 800 in the west `).
fn whole_words(text: &str) -> String {
    format!(" {} ", words(&text.to_lowercase()).join(" "))
}

/// Whether `line` states a rule for any thing of a kind (`head`, such as `park`), which
/// holds for the one a question names (`Larchfield Park`): `a park`, `any park`, `every
/// park`, `all parks`, and no thing of that kind by its name (`Hollins Park`).
fn states_any(line: &str, head: &str) -> bool {
    let all = words(line);
    let plural = format!("{head}s");
    let mut generic = false;
    for (i, w) in all.iter().enumerate() {
        let lower = w.to_lowercase();
        if lower != head && lower != plural {
            continue;
        }
        let before = i.checked_sub(1).map(|j| all[j]);
        if w.chars().next().is_some_and(char::is_uppercase)
            && before.is_some_and(|b| b.chars().next().is_some_and(char::is_uppercase))
        {
            // `Hollins Park`: one thing of the kind, by its name.
            return false;
        }
        let determined = before.is_some_and(|b| {
            ["a", "an", "any", "every", "each", "all"].contains(&b.to_lowercase().as_str())
        });
        generic |= determined;
    }
    generic
}

/// The content stems of the part of `question` that asks, when it names something of its
/// own that it asks beyond its subject (`beyond`); otherwise those of the whole question,
/// whose context says what `it` is. Read once for what a line must share
/// ([`Question::asking_stems`]) and for which unheard words count.
fn asking_stems(question: &str, beyond: &[String]) -> Vec<String> {
    let part = content_stems(asking_part(question));
    let own = part
        .iter()
        .any(|t| !["cost+", "much", "many"].contains(&t.as_str()) && beyond.contains(t));
    if own {
        part
    } else {
        content_stems(question)
    }
}

/// Whether the capitalised `name` is said in passing, outside the part of `question` that
/// asks: where the asker is going or who they are ("I'm off to Vietnam and the nurse says
/// …", "Hi, I'm Sarah."), not the place they ask about ("I'm at the Zedford branch.", "I
/// live in Zedford.") nor a name that qualifies a thing ("the Zedford office"). A name the
/// sources never state, said so, does not make the question one they cannot answer.
fn mentioned_in_passing(question: &str, name: &str) -> bool {
    if words(asking_part(question)).contains(&name) {
        return false;
    }
    const PLACED: [&str; 9] = [
        "in", "at", "near", "from", "for", "of", "about", "the", "our",
    ];
    let all = words(question);
    let capital = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    let mut seen = false;
    for (i, w) in all.iter().enumerate() {
        if *w != name {
            continue;
        }
        seen = true;
        // The run of capitalised words the name is in (`New Zealand`).
        let mut first = i;
        while first > 0 && capital(all[first - 1]) && !is_function_word(all[first - 1]) {
            first -= 1;
        }
        let mut last = i;
        while last + 1 < all.len() && capital(all[last + 1]) {
            last += 1;
        }
        let placed = first > 0 && PLACED.contains(&all[first - 1].to_lowercase().as_str());
        let qualifies = all
            .get(last + 1)
            .is_some_and(|n| !is_function_word(n) && n.chars().all(char::is_lowercase));
        if placed || qualifies {
            return false;
        }
    }
    seen
}

/// Whether a footnote mark in `line` goes on a word (`Peak⁶`) that its footnote, among
/// `notes`, opens by defining (`⁶ Peak: …`).
fn defines_marked_label(line: &str, notes: &str) -> bool {
    let notes = notes.to_lowercase();
    let chars: Vec<char> = line.chars().collect();
    (1..chars.len()).any(|i| {
        if !is_footnote_mark(chars[i]) || !chars[i - 1].is_alphabetic() {
            return false;
        }
        let start = (0..i)
            .rev()
            .find(|&j| !chars[j].is_alphanumeric())
            .map_or(0, |j| j + 1);
        let word: String = chars[start..i].iter().collect();
        notes.contains(&format!("{} {}", chars[i], word.to_lowercase()))
    })
}

/// Whether `question` asks whether one may: "Can I …", "May we …", "Could you …".
fn asks_permission(question: &str) -> bool {
    let part = asking_part(question).to_lowercase();
    let w = words(&part);
    w.len() >= 3 && ["can", "could", "may", "might"].contains(&w[0])
}

/// Whether `line` is a person's name and role, as a letter or a notice is signed
/// (`Rhiannon Vesey, Project Liaison Officer`): two or three capitalised words, the first no
/// common English word (so not a heading's `Lift Replacement, Phase Two`), a comma, and a
/// capitalised role.
fn is_signature(line: &str) -> bool {
    // Also a notice's contact line (`Contact: Ffion Adebayo-Marsh, Area Operations
    // Manager, 01632 960 230`).
    const KEYS: [&str; 6] = [
        "contact",
        "enquiries",
        "queries",
        "signed",
        "issued by",
        "from",
    ];
    let line = match line.split_once(": ") {
        Some((key, rest)) if KEYS.contains(&key.trim().to_lowercase().as_str()) => rest.trim(),
        _ => line,
    };
    let Some((name, role)) = line.split_once(", ") else {
        return false;
    };
    let names = words(name);
    let capital = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    (2..=3).contains(&names.len())
        && names
            .iter()
            .all(|w| capital(w) && w.chars().skip(1).all(char::is_lowercase))
        && !is_common_word(&names[0].to_lowercase())
        && capital(role.trim())
}

/// What the asker says does not hold of them ("I'm not on the care plan myself"), as
/// stems: up to four content words after `not`, `n't`, `no longer` or `never`, up to a
/// punctuation mark.
fn denied_words(question: &str) -> BTreeSet<String> {
    let q = question.to_lowercase();
    let mut denied = BTreeSet::new();
    for n in [" not ", "n't ", " no longer ", " never "] {
        for (i, _) in q.match_indices(n) {
            let rest = &q[i + n.len()..];
            let end = rest
                .find([',', '.', ';', '?', '!', '-'])
                .unwrap_or(rest.len());
            denied.extend(content_stems(&rest[..end]).into_iter().take(4));
        }
    }
    denied
}

/// The condition of `text` (`when a parent or guardian is a CCP member`, after `only when`,
/// `only if`, `provided`, `as long as`) that states two of the asker's `denied` words
/// ([`denied_words`]), read with what its abbreviations stand for (`abbreviations`).
fn denied_condition(
    denied: &BTreeSet<String>,
    text: &str,
    abbreviations: &BTreeMap<String, String>,
) -> Option<String> {
    const MARKS: [&str; 5] = [
        "only when ",
        "only if ",
        "provided ",
        "as long as ",
        "only for ",
    ];
    // ASCII lower case keeps every byte where it was, so `at` is an offset into `text`.
    let lower = text.to_ascii_lowercase();
    let (at, mark) = MARKS
        .iter()
        .filter_map(|m| lower.find(m).map(|at| (at, *m)))
        .min()?;
    let clause = &text[at..];
    let end = clause
        .find(['.', ';', '!', '?'])
        .filter(|e| *e > mark.len())
        .unwrap_or(clause.len());
    let clause = &clause[..end];
    let written: BTreeSet<String> = content_stems(clause)
        .into_iter()
        .chain(
            words(clause)
                .iter()
                .filter_map(|w| abbreviations.get(&w.to_uppercase()))
                .flat_map(|long| content_stems(long)),
        )
        .collect();
    (denied.iter().filter(|d| written.contains(*d)).count() >= 2).then(|| clause.trim().to_owned())
}

/// What a permission question asks one may do a thing with: the last content word after
/// its subject and verb, before the first preposition (`chickens` in "can I keep a few
/// chickens in my back garden?", `van` in "may we park a van at the depot?"), or what a
/// thing is used for (`pool` in "can I use it to heat my pool?"). `None` when the verb is a
/// general one (`have`, `get`), which says nothing of its own.
fn permitted_object(question: &str) -> Option<&str> {
    const ENDS: [&str; 22] = [
        "in", "at", "on", "to", "for", "with", "into", "from", "during", "while", "if", "when",
        "without", "inside", "outside", "near", "by", "after", "before", "and", "or", "onto",
    ];
    let part = asking_part(question);
    let w = words(part);
    if w.len() < 4
        || !asks_permission(question)
        || !ASKER_PRONOUNS.contains(&w[1].to_lowercase().as_str())
    {
        return None;
    }
    // The phrase's head, its last word: `my regular bike` is about bikes, which a rule
    // may state without the asker's `regular`.
    let head = |from: usize| {
        w[from..]
            .iter()
            .take_while(|x| !ENDS.contains(&x.to_lowercase().as_str()))
            .last()
            .filter(|x| {
                !is_function_word(x) && x.chars().count() >= 3 && x.chars().all(char::is_alphabetic)
            })
            .copied()
    };
    // "Can I use the AH-7 to heat my swimming pool?": what a thing is used for is what
    // is asked (`pool`), not the thing used, which the sources name anyway.
    if w[2].eq_ignore_ascii_case("use") {
        let to = (3..w.len()).find(|&i| ENDS.contains(&w[i].to_lowercase().as_str()));
        if let Some(i) = to.filter(|&i| w[i].eq_ignore_ascii_case("to") && i + 2 < w.len()) {
            if let Some(purpose) = head(i + 2) {
                return Some(purpose);
            }
        }
    }
    if GENERAL_VERBS.contains(&w[2].to_lowercase().as_str()) {
        return None;
    }
    head(3)
}

/// Whether a line, as its stems, states a permission or a prohibition: it allows,
/// permits, forbids or bans (the related words [`stem`] reads as one).
fn states_permission(stems: &[String]) -> bool {
    // Read once: this runs for every span of every line offered.
    static MARKS: std::sync::OnceLock<[String; 3]> = std::sync::OnceLock::new();
    // `Cash is no longer accepted` settles whether one may pay in cash.
    let marks = MARKS.get_or_init(|| [stem("allowed"), stem("forbidden"), stem("accepted")]);
    stems.iter().any(|s| marks.contains(s))
}

/// Words that open a question.
const INTERROGATIVES: &[&str] = &[
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "am",
    "does", "do", "did", "can", "could", "was", "were", "has", "have", "will", "would", "should",
    "must", "may",
];

/// Nouns for an organisation, which a name answers (`which company`, `what insurance
/// firm`).
const ORGANISATIONS: [&str; 6] = [
    "company",
    "firm",
    "insurer",
    "organisation",
    "organization",
    "charity",
];

/// The part of `question` that asks: its last sentence that ends with a question mark
/// ("I lost my card. How much is a new one?", "When is it due? See the log."), else its
/// last that opens with a question word, else its last; and in it the clause that opens
/// with a question word when the sentence opens with context instead ("Under the old
/// schedule, what was the fine?").
fn asking_part(question: &str) -> &str {
    let trimmed = question.trim();
    let mut sentences: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in trimmed.char_indices() {
        if matches!(c, '.' | '!' | '?') && trimmed[i + 1..].starts_with(char::is_whitespace) {
            sentences.push(trimmed[start..=i].trim());
            start = i + 1;
        }
    }
    sentences.push(trimmed[start..].trim());
    sentences.retain(|s| !words(s).is_empty());
    let opens = |s: &str| {
        words(&s.to_lowercase())
            .first()
            .is_some_and(|w| INTERROGATIVES.contains(w))
    };
    let sentence = sentences
        .iter()
        .rev()
        .find(|s| s.ends_with('?'))
        .or_else(|| sentences.iter().rev().find(|s| opens(s)))
        .or(sentences.last())
        .copied()
        .unwrap_or(trimmed);
    if opens(sentence) {
        return sentence;
    }
    // A clause after a comma, a dash or a semicolon ("… on the 6GB plan - what will it
    // cost me?").
    let mut breaks: Vec<usize> = [", ", " - ", " – ", " — ", "; "]
        .iter()
        .flat_map(|b| sentence.match_indices(b).map(|(i, b)| i + b.len()))
        .collect();
    breaks.sort_unstable();
    breaks
        .into_iter()
        .map(|i| sentence[i..].trim())
        .find(|rest| opens(rest))
        .unwrap_or(sentence)
}

/// Whether `word`, a slice of `text`, opens a sentence of it ("See" in "When is it due? See
/// the log."): capitalised there whatever it is. A title's dot (`Dr. Osei`) ends no
/// sentence.
fn opens_sentence(text: &str, word: &str) -> bool {
    let at = (word.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let Some(before) = text.get(..at).map(str::trim_end) else {
        return false;
    };
    // Only a full stop may end a title (`Dr.`): after `?` or `!` a sentence opens.
    if before.ends_with(['!', '?']) {
        return true;
    }
    let Some(body) = before.strip_suffix('.') else {
        return before.is_empty();
    };
    let title = body
        .rsplit(|c: char| !c.is_alphabetic())
        .next()
        .is_some_and(|t| (1..=3).contains(&t.chars().count()) && t.starts_with(char::is_uppercase));
    !title
}

/// `text` without its reference numbers (`DMW-OPS-2025-014`: parts joined by dashes, one
/// of capitals, one with digits), whose year is a part of a name, not a time the text
/// states; nor an edition's year in brackets after a name (`Pedal Monthly (2024)`). A file
/// name goes with [`without_locators`].
fn without_references(text: &str) -> String {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    tokens
        .iter()
        .enumerate()
        .filter(|&(i, t)| {
            let edition = i > 0
                && tokens[i - 1].starts_with(char::is_uppercase)
                && t.trim_end_matches([';', ',', '.'])
                    .strip_prefix('(')
                    .and_then(|y| y.strip_suffix(')'))
                    .is_some_and(is_year);
            !edition
        })
        .map(|(_, t)| *t)
        .filter(|t| {
            let t = t.trim_matches(|c: char| !c.is_alphanumeric());
            let parts: Vec<&str> = t.split('-').collect();
            !(parts.len() >= 3
                && parts
                    .iter()
                    .any(|p| p.len() >= 2 && p.chars().all(|c| c.is_ascii_uppercase()))
                && parts.iter().any(|p| p.chars().any(|c| c.is_ascii_digit())))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The verb the asker does in `lower` (a question, lower case), as a stem: the first verb
/// after `I` or `we` following an auxiliary (`did I have to give`, `can we bring`, `do I
/// need to pay`), past the words that say it must or may be done.
fn asker_verb(lower: &str) -> Option<String> {
    const AUXILIARIES: [&str; 16] = [
        "do", "does", "did", "can", "could", "will", "would", "should", "shall", "may", "might",
        "must", "am", "have", "has", "had",
    ];
    const MODAL: [&str; 9] = [
        "have", "has", "had", "need", "needs", "to", "be", "allowed", "able",
    ];
    let tokens = words(lower);
    let at = (1..tokens.len())
        .find(|&i| ["i", "we"].contains(&tokens[i]) && AUXILIARIES.contains(&tokens[i - 1]))?;
    tokens[at + 1..]
        .iter()
        .find(|w| !MODAL.contains(w))
        .filter(|w| !is_function_word(w) && w.chars().all(char::is_alphabetic))
        .map(|w| stem(w))
}

/// The id-shaped tokens of `text` (a letter and a digit), lower case; not a number joined
/// to the word it counts ([`is_hyphened_measure`]).
fn id_tokens(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|t| {
            t.trim_matches(|c: char| !c.is_alphanumeric())
                .trim_end_matches("'s")
                .to_lowercase()
        })
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()) && t.chars().any(char::is_alphabetic))
        .filter(|t| !is_hyphened_measure(t))
        .collect()
}

/// Whether `token` is a number joined to the word it counts (`24-month`, `6-bed`,
/// `7-seater`): a length or a size, written the way an id is, but naming no one thing.
fn is_hyphened_measure(token: &str) -> bool {
    token.split_once('-').is_some_and(|(number, word)| {
        !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit())
            && word.chars().count() >= 3
            && word.chars().all(|c| c.is_ascii_lowercase())
    })
}

/// The names in `text` written as a machine writes them, lower case: joined by `_`
/// (`agent_port`), or by `.` between parts of two characters or more, each with a letter
/// (`network.proxy`, `larkspan.toml`; not `e.g.` or a version `3.2.1`).
fn identifiers(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|t| {
            t.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        // A path or a URL is where to look ([`without_locators`]), not what is asked about.
        .filter(|t| !t.contains('/') && !t.contains(':'))
        .filter(|t| {
            let underscored = t.contains('_') && t.chars().any(char::is_alphabetic);
            let dotted = t.contains('.')
                && t.split('.')
                    .all(|p| p.chars().count() >= 2 && p.chars().any(char::is_alphabetic));
            underscored || dotted
        })
        .collect()
}

/// The letters of an id, in order (`nct` of `nct04123456`, `vela` of `vela-2`).
fn letters_of(id: &str) -> String {
    id.chars().filter(|c| c.is_alphabetic()).collect()
}

/// The clauses of a line, as byte ranges: cut at `; `, `, ` and a full stop followed by a
/// space.
/// Words that open a bracket giving what a value was before (`(previously 28 days)`,
/// `(was £4.50)`).
/// Whether `span`, a part of `line` that ends in an amount, leaves out the rate the line
/// goes on to give it (`per day`, `for every 10 minutes`), after a bracket saying what it
/// was (`£15 (was £10) for every 10 minutes`).
fn cuts_rate(line: &str, span: &str) -> bool {
    let Some(at) = line.find(span) else {
        return false;
    };
    if !span.ends_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let mut rest = line[at + span.len()..].trim_start();
    if let Some(bracket) = rest.strip_prefix('(') {
        let opening = bracket
            .split(|c: char| !c.is_alphabetic())
            .next()
            .unwrap_or_default()
            .to_lowercase();
        if FORMER_MARKS.contains(&opening.as_str()) {
            rest = bracket.split_once(')').map_or("", |(_, r)| r.trim_start());
        }
    }
    ["per ", "for every ", "for each ", "each "]
        .iter()
        .any(|r| rest.starts_with(r))
}

const FORMER_MARKS: [&str; 6] = [
    "previously",
    "formerly",
    "was",
    "were",
    "originally",
    "before",
];

fn clauses(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    let mut i = 0;
    // Whether the words on either side of the separator at `i`, `gap` bytes long, are
    // capitalised: a name's (`Park and Ride`) or a list of names' (`Ashby Common, Brindle
    // Meadows and Quarry Hill`), which a span keeps whole. The separators are ASCII, so
    // both slices fall on character boundaries.
    let between_names = |i: usize, gap: usize| {
        let capital = |w: Option<&str>| {
            w.and_then(|w| w.chars().next())
                .is_some_and(char::is_uppercase)
        };
        capital(line[..i].rsplit(' ').next()) && capital(line[i + gap..].split(' ').next())
    };
    while i + 1 < bytes.len() {
        let listed = bytes[i] == b',' && between_names(i, 2);
        if matches!(bytes[i], b';' | b',' | b'.') && bytes[i + 1] == b' ' && !listed {
            // A decimal or thousands separator is followed by a digit, not a space, so
            // `1,500` and `2.5` never cut.
            out.push((start, i + usize::from(bytes[i] == b'.')));
            start = i + 2;
            i += 2;
            continue;
        }
        // `£0.60 per A4 side and £1.20 per A3 side`: each side of an `and` may be said alone
        // (a run of clauses still joins them).
        // But not inside a name (`Park and Ride`) or a list of names.
        if bytes[i..].starts_with(b" and ") && !between_names(i, 5) {
            out.push((start, i));
            start = i + 5;
            i += 5;
            continue;
        }
        // `within 14 days (previously 28 days)`: a bracket giving what a value was is a
        // clause of its own, so the value now may be said without it.
        if bytes[i..].starts_with(b" (") {
            let opening = line[i + 2..]
                .split(|c: char| !c.is_alphabetic())
                .next()
                .unwrap_or_default()
                .to_lowercase();
            if FORMER_MARKS.contains(&opening.as_str()) {
                out.push((start, i));
                start = i + 1;
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    out.push((start, line.len()));
    out.retain(|(a, b)| a < b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::SourceDocument;
    use crate::lexicon::age_ranges;

    /// A store of one in-force `v1` document per `(source id, text)`.
    fn store_of(documents: &[(&str, &str)]) -> SourceStore {
        let mut store = SourceStore::new();
        for (id, text) in documents {
            store
                .insert(SourceDocument::new(id, "v1", true, text))
                .unwrap();
        }
        store
    }

    fn store() -> SourceStore {
        let mut store = store_of(&[
            ("CAL", "CALM-PREVENT press release on calpetrant\nIt has enrolled 635 participants across 48 sites, with 212 in Arm A: calpetrant 70 mg, 208 in Arm B: calpetrant 140 mg and 215 in Arm C: placebo.\nThe DSMB met on 2025-02-18."),
            ("LUM", "Lumeditan nasal spray study\nArm A: lumeditan 5 mg; enrolled: 96."),
            ("VEL", "Velorabine protocol\nArm C: velorabine 50 mg; status: terminated; termination reason: elevated liver enzymes."),
            ("TES", "Tesoglutide letter\nSigned by Dr. Helena Osei, Head of Clinical Development."),
        ]);
        store
            .insert(SourceDocument::new(
                "POL",
                "v1",
                false,
                "Policy\nThe limit is 600 yuan.",
            ))
            .unwrap();
        store
            .insert(SourceDocument::new(
                "POL",
                "v2",
                true,
                "Policy\nThe limit is 750 yuan.",
            ))
            .unwrap();
        store
    }

    #[test]
    fn a_dimension_is_answered_by_its_own_clause() {
        let mut store = store();
        let line = "A scooter on a tram may be up to 100 cm long, and a scooter on a tram may be up to 60 cm wide.";
        store
            .insert(SourceDocument::new(
                "ACC",
                "v1",
                true,
                &format!("Access\n{line}"),
            ))
            .unwrap();
        let q = Question::new("How wide can a scooter be to go on the tram?", &store);
        assert_eq!(q.kind(), AnswerKind::Quantity);
        let spans = q.spans(line);
        // A length is not a width: the clause stating only `long` is no answer.
        assert!(spans[0].ends_with("up to 60 cm wide."), "{spans:?}");
        assert!(spans.iter().all(|s| !s.contains("100 cm")), "{spans:?}");
    }

    #[test]
    fn the_words_naming_an_id_are_its_kind() {
        let store = store_of(&[
            (
                "FAULTS",
                "Fault list\ncode: F07; meaning: F07 means the drum is overloaded.\ncode: F08; meaning: F08 means the door is open.",
            ),
            ("GUIDE", "Washer guide\nAlarm codes start with F."),
        ]);
        let line = "code: F07; meaning: F07 means the drum is overloaded.";
        // `alarm code F07` names the code: the record need not repeat `alarm` to answer.
        let q = Question::new("What does alarm code F07 mean?", &store);
        assert!(!q.beyond.iter().any(|t| t == "alarm"), "{:?}", q.beyond);
        assert_eq!(q.misses(line), None);
        // What is asked of it still must be stated: `repair` is not.
        let q = Question::new("How long does the repair for alarm code F07 take?", &store);
        assert!(q.misses(line).is_some());
    }

    /// Adds a source of twenty lines that name nothing, so that a name few lines state
    /// is a rare one.
    pub(super) fn insert_rules(store: &mut SourceStore) {
        let rules: Vec<String> = (1..=20)
            .map(|n| format!("Rule {n} applies to members."))
            .collect();
        store
            .insert(SourceDocument::new("RULES", "v1", true, &rules.join("\n")))
            .unwrap();
    }

    #[test]
    fn the_kind_is_read_from_the_part_that_asks() {
        for (q, kind) in [
            (
                "I broke my locker key. How much is a new one?",
                AnswerKind::Quantity,
            ),
            (
                "Under the old timetable, what was the fare per trip?",
                AnswerKind::Quantity,
            ),
            (
                "For members, what's the booking period for a court?",
                AnswerKind::Quantity,
            ),
            ("What number do I call to cancel?", AnswerKind::Quantity),
            (
                "I'm on the fixed tariff - what am I paying per unit?",
                AnswerKind::Quantity,
            ),
            (
                "What's the most the hardship fund could give us?",
                AnswerKind::Quantity,
            ),
            ("What's the most popular class?", AnswerKind::Thing),
            ("What hours is the cheap rate?", AnswerKind::Time),
            ("How many hours is the course?", AnswerKind::Quantity),
            (
                "What type of racket am I allowed to use?",
                AnswerKind::Thing,
            ),
            (
                "My gym pass expired. Can I renew it online?",
                AnswerKind::YesNo,
            ),
            ("Since the move, when does the pool open?", AnswerKind::Time),
        ] {
            assert_eq!(AnswerKind::of(q), kind, "{q}");
        }
        assert_eq!(
            asking_part("I lost it. Where, then, is the desk?"),
            "Where, then, is the desk?"
        );
        // What follows the question is a pointer to where to look, not what is asked.
        assert_eq!(
            asking_part("When is the next service due? See the log."),
            "When is the next service due?"
        );
        assert_eq!(
            AnswerKind::of("When is the next service due? See /srv/boiler.txt"),
            AnswerKind::Time
        );
        let store = store();
        let q = Question::new("When is the next service due? See /srv/boiler.txt", &store);
        assert_eq!(q.misses("The next service is due in September 2026."), None);
        // "See" opens a sentence: it is no name the sources must state.
        assert!(q.names_stated("The next service is due in September 2026.", "CAL"));
        let text = "Is it due? See Dr. Osei. Ask Mr Rowe";
        let opens = |w: &str| opens_sentence(text, &text[text.find(w).unwrap()..][..w.len()]);
        assert!(opens("Is") && opens("See"));
        assert!(!opens("Osei") && !opens("Rowe") && !opens("Dr"));
    }

    #[test]
    fn an_answer_of_the_wrong_measure_does_not_answer() {
        // Each line is a source's, as in use: what no source states is not asked about here.
        let misses = |question: &str, line: &str| {
            let mut store = store();
            store
                .insert(SourceDocument::new(
                    "LINE",
                    "v1",
                    true,
                    &format!("Rules\n{line}"),
                ))
                .unwrap();
            Question::new(question, &store).misses(line)
        };
        let mut store = store();
        store
            .insert(SourceDocument::new(
                "RACKETS",
                "v1",
                true,
                "Rackets\nRackets are lent for 7 days, and balls are lent for 14 days.\nLate rackets are charged £1.00 per day, up to a maximum of £8.00.\nTeam A: the red side, 64; Team B: the blue side, 61; Team C: reserves",
            ))
            .unwrap();
        // A price counts nothing, and a rate is not a length of time.
        assert!(misses(
            "How many guest passes can I hold at once?",
            "A guest pass costs £4.00 per pass."
        )
        .is_some());
        assert!(misses(
            "How many guest passes can I hold at once?",
            "Members may hold up to 3 guest passes at a time."
        )
        .is_none());
        assert!(misses(
            "How long may I keep a racket?",
            "Late rackets are charged £1.00 per day."
        )
        .is_some());
        assert!(misses(
            "How long may I keep a racket?",
            "Rackets are lent for 7 days."
        )
        .is_none());
        // "How much is …" asks a price; "at once" is no amount.
        assert!(misses(
            "I lost my locker key. How much is a new one?",
            "Report a lost key at once at the front desk."
        )
        .is_some());
        assert!(misses(
            "I lost my locker key. How much is a new one?",
            "A new locker key costs £2.50."
        )
        .is_none());
        // "Since when" asks for a point in time, which `14 days` is not.
        assert!(misses(
            "Since when have the current court charges applied?",
            "Courts are booked for 14 days at most."
        )
        .is_some());
        assert!(misses(
            "Since when have the current court charges applied?",
            "The court charges apply from 1 April 2025."
        )
        .is_none());
        // `allowed` asks no sum of money (`allowance` would).
        assert!(misses(
            "How many times am I allowed to renew a racket?",
            "You can renew a racket up to 3 times, unless someone has booked it."
        )
        .is_none());
        // An answer states one value: the span with one amount beats the line with two.
        let spans = Question::new("How long is a racket lent for?", &store)
            .spans("Rackets are lent for 7 days, and balls are lent for 14 days.");
        assert_eq!(
            spans.first().map(String::as_str),
            Some("Rackets are lent for 7 days")
        );
        assert!(
            spans.iter().all(|s| !(s.contains('7') && s.contains("14"))),
            "{spans:?}"
        );
        // A span never starts at a bare value that ends the record before it.
        let q = Question::new("How many players are in team B?", &store);
        let spans =
            q.spans("Team A: the red side, 64; Team B: the blue side, 61; Team C: reserves");
        assert!(spans.iter().all(|s| !s.starts_with("64")), "{spans:?}");
        // Asked for a limit, the span that states it leads, with the rate it caps.
        let spans = Question::new(
            "What is the most I can be charged for a late racket?",
            &store,
        )
        .spans("Late rackets are charged £1.00 per day, up to a maximum of £8.00.");
        assert!(
            spans.first().is_some_and(|s| s.contains("£8.00")),
            "{spans:?}"
        );
        // A yes-or-no question about a verb is settled only by a line that states it.
        assert!(misses(
            "Can I renew a court booking?",
            "Court bookings are made at the front desk."
        )
        .is_some());
        assert!(misses(
            "Can I renew a court booking?",
            "Court bookings cannot be renewed."
        )
        .is_none());
        // A month or a weekday is not the name "who" asks for.
        assert!(misses(
            "Who runs the swimming lessons?",
            "Swimming lessons start on Monday 2 June."
        )
        .is_some());
        assert!(misses(
            "Who runs the swimming lessons?",
            "Swimming lessons are run by Marta Quill."
        )
        .is_none());
    }

    #[test]
    fn kinds_are_read_from_the_question() {
        for (q, kind) in [
            (
                "How many participants are in the 70 mg arm?",
                AnswerKind::Quantity,
            ),
            (
                "What is the lodging limit in Beijing?",
                AnswerKind::Quantity,
            ),
            ("When did the DSMB meet?", AnswerKind::Time),
            ("On what date was it presented?", AnswerKind::Time),
            ("How late can a racket be returned?", AnswerKind::Time),
            ("How early does the pool open?", AnswerKind::Time),
            (
                "Who is the Head of Clinical Development?",
                AnswerKind::Person,
            ),
            ("Why was the 50 mg arm closed?", AnswerKind::Reason),
            ("Is breakfast included?", AnswerKind::YesNo),
            ("What disease does it treat?", AnswerKind::Thing),
            ("In which cities are the sites?", AnswerKind::Place),
        ] {
            assert_eq!(AnswerKind::of(q), kind, "{q}");
        }
    }

    #[test]
    fn spans_state_the_qualifier_and_the_asked_kind_and_no_sibling() {
        let store = store();
        let q = Question::new(
            "How many participants are enrolled in the calpetrant 70 mg arm?",
            &store,
        );
        assert!(q.qualifiers().contains(&Qualifier::Amount {
            value: "70".into(),
            unit: "mg".into()
        }));
        let spans = q.spans("It has enrolled 635 participants across 48 sites, with 212 in Arm A: calpetrant 70 mg, 208 in Arm B: calpetrant 140 mg and 215 in Arm C: placebo.");
        assert!(!spans.is_empty());
        for s in &spans {
            assert!(
                s.contains("212") && !s.contains("208") && !s.contains("140"),
                "{s}"
            );
        }
        // A line about the subject that states no amount does not answer.
        assert!(q
            .spans("CALM-PREVENT press release on calpetrant")
            .is_empty());
        // A time, a name.
        let when = Question::new("When did the CALM-PREVENT DSMB meet?", &store);
        assert_eq!(
            when.spans("The DSMB met on 2025-02-18."),
            ["The DSMB met on 2025-02-18."]
        );
        let who = Question::new("Who is the Head of Clinical Development?", &store);
        assert!(
            who.spans("Signed by Dr. Helena Osei, Head of Clinical Development.")[0]
                .contains("Osei")
        );
        assert!(who.spans("Head of Clinical Development.").is_empty());
    }

    #[test]
    fn the_relevance_rule_rejects_an_off_question_citation() {
        let store = store();
        let q = Question::new("What is given in Arm A of the lumeditan study?", &store);
        let off = "It has enrolled 635 participants across 48 sites, with 212 in Arm A: calpetrant 70 mg, 208 in Arm B: calpetrant 140 mg and 215 in Arm C: placebo.";
        let v = q.judge(off, &[("CAL", "v1", off)], &store, "/citations");
        assert!(v.iter().any(|v| v.code == Code::OffQuestion), "{v:?}");
        let on = "Arm A: lumeditan 5 mg";
        assert!(q
            .judge(
                on,
                &[("LUM", "v1", "Arm A: lumeditan 5 mg; enrolled: 96.")],
                &store,
                "/citations"
            )
            .is_empty());
    }

    /// A measure of nearness that finds every line as near as can be.
    #[derive(Debug)]
    struct AllNear;

    impl crate::evidence::Nearness for AllNear {
        fn nearness(&self, _text: &str, lines: &[&str]) -> Option<Vec<f32>> {
            Some(vec![1.0; lines.len()])
        }
    }

    /// Nearness is the steering's measure, never the gate's: with a measure that finds
    /// every line as near as can be, the rule judges as it does without one.
    #[test]
    fn the_relevance_rule_reads_no_measure_of_nearness() {
        let plain = store();
        let measured = store();
        assert!(measured.measure_with(std::sync::Arc::new(AllNear)));
        let asked = "What is given in Arm A of the lumeditan study?";
        let off = "It has enrolled 635 participants across 48 sites, with 212 in Arm A: calpetrant 70 mg, 208 in Arm B: calpetrant 140 mg and 215 in Arm C: placebo.";
        let judged = |store: &SourceStore, text: &str, cited: &[(&str, &str, &str)]| {
            Question::new(asked, store)
                .judge(text, cited, store, "/citations")
                .iter()
                .map(|v| (v.code.clone(), v.message.clone()))
                .collect::<Vec<_>>()
        };
        let off_cited = [("CAL", "v1", off)];
        let rejected = judged(&measured, off, &off_cited);
        assert!(rejected.iter().any(|(c, _)| *c == Code::OffQuestion));
        assert_eq!(rejected, judged(&plain, off, &off_cited));
        let on_cited = [("LUM", "v1", "Arm A: lumeditan 5 mg; enrolled: 96.")];
        assert!(judged(&measured, "Arm A: lumeditan 5 mg", &on_cited).is_empty());
    }

    /// The rule accepts the span the steering offered of the line it quotes: a record's
    /// field is judged with the row its record names, as it was when it was offered.
    #[test]
    fn the_relevance_rule_accepts_a_span_offered_of_the_cited_line() {
        let store = store_of(&[
            (
                "lifts",
                "Lift works\nThe North Block lift is being replaced by Calder Lifts.\nIt will be out of service from 8 September to 3 October, and the stairs stay open.\nThe South Block lift is not affected.",
            ),
            ("visiting", "Visiting\nThe office opens at 10:00.\nEntry is free."),
        ]);
        let q = Question::new("When is the North Block lift being replaced?", &store);
        let line =
            "It will be out of service from 8 September to 3 October, and the stairs stay open.";
        let spans = q.spans_in(line, Some("lifts"));
        let span = spans
            .first()
            .expect("the clause answers, read with the line before");
        // Alone, the clause does not say what it is about; the line before it does.
        assert!(q.misses_in(span, Some("lifts")).is_some(), "{span}");
        let cited = [("lifts", "v1", line)];
        assert!(q.judge(span, &cited, &store, "/citations").is_empty());
        // Another text quoting the same line is still judged on its own.
        assert!(!q
            .judge("Entry is free.", &cited, &store, "/citations")
            .is_empty());
    }

    #[test]
    fn a_path_in_the_question_is_where_to_look_not_what_is_asked() {
        let mut store = SourceStore::new();
        let error = "/srv/__x__.md: Error - Access denied - path outside allowed directories: /srv/__x__.md not in /srv/logs-7";
        let log = "The boiler in the east wing was serviced on 3 March 2026 by Calder Heating.";
        store
            .insert(SourceDocument::new("fs#1", "v1", true, log))
            .unwrap();
        store
            .insert(SourceDocument::new("fs#2", "v1", true, error))
            .unwrap();
        let q = Question::new(
            "Read /srv/logs-7/boiler.txt: who painted the boiler room?",
            &store,
        );
        assert_eq!(
            q.text(),
            "Read /srv/logs-7/boiler.txt: who painted the boiler room?"
        );
        assert!(!q
            .terms()
            .iter()
            .any(|t| t == "srv" || t == "txt" || t == "log"));
        assert!(q.misses(error).is_some());
        let when = Question::new(
            "According to /srv/logs-7/boiler.txt, when was the boiler serviced?",
            &store,
        );
        assert!(when.misses(log).is_none(), "{:?}", when.misses(log));
        assert!(when.misses(error).is_some());
        // `and/or` is two words, not a path.
        assert_eq!(
            without_locators("Can I bring a dog and/or a cat? See https://x.invalid/a."),
            "Can I bring a dog and/or a cat? See  ."
        );
    }

    /// A name written as a plural (`Sundays`) is the name a line writes in the singular:
    /// the line that states it answers, a sibling day's line does not, and the question is
    /// not one the sources never mention.
    #[test]
    fn a_name_in_the_plural_is_the_name_in_the_singular() {
        let mut store = store();
        store
            .insert(SourceDocument::new(
                "HRS",
                "v1",
                true,
                "Opening hours\nKilnfield Library is open on Sunday from 12:00 to 16:00.\nKilnfield Library is open on Saturday from 09:00 to 16:00.",
            ))
            .unwrap();
        let q = Question::new("What time does Kilnfield library open on Sundays?", &store);
        assert!(q.unstated.is_empty(), "{:?}", q.unstated);
        let sunday = "Kilnfield Library is open on Sunday from 12:00 to 16:00.";
        let saturday = "Kilnfield Library is open on Saturday from 09:00 to 16:00.";
        assert!(q.names_stated(sunday, "HRS"));
        assert!(!q.names_stated(saturday, "HRS"));
        // A shared beginning is not the same name.
        assert!(!same_name("northgate", "northfield"));
        assert!(same_name("sundays", "sunday"));
    }

    /// An id no source states (`NCT09999999`) is unanswerable, whatever else the question
    /// shares with a line; a unit or an ordinal written in lower case is not an id.
    #[test]
    fn an_id_no_source_states_cannot_be_answered_for() {
        let store = store();
        let line = "The DSMB met on 2025-02-18.";
        let q = Question::new("When did the DSMB of NCT09999999 meet?", &store);
        assert_eq!(q.unstated, ["nct09999999"]);
        assert!(!q.names_stated(line, "CAL"));
        let q = Question::new("When did the DSMB of VELA-7 meet?", &store);
        assert!(
            q.unstated.contains(&"vela-7".to_owned()),
            "{:?}",
            q.unstated
        );
        let q = Question::new("When did the DSMB meet for the 2nd time?", &store);
        assert!(q.unstated.is_empty(), "{:?}", q.unstated);
        assert!(q.names_stated(line, "CAL"));
        let q = Question::new("Did the DSMB meet after Arm A took 70mg?", &store);
        assert!(q.unstated.is_empty(), "{:?}", q.unstated);
    }

    /// A member of a stated series that no source states (`Arm F`, `the 30 mg arm`) picks
    /// out nothing; a yes-or-no question's is a condition a rule may settle.
    #[test]
    fn a_member_of_a_series_no_source_states_is_not_answered_for() {
        let store = store();
        let line = "It has enrolled 635 participants across 48 sites, with 212 in Arm A: calpetrant 70 mg, 208 in Arm B: calpetrant 140 mg and 215 in Arm C: placebo.";
        for question in [
            "How many participants are in Arm F of CALM-PREVENT?",
            "How many participants are in the calpetrant 35 mg arm?",
        ] {
            let why = Question::new(question, &store).misses(line);
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains("no source states")),
                "{question}: {why:?}"
            );
        }
        let q = Question::new(
            "How many participants are in the calpetrant 70 mg arm?",
            &store,
        );
        assert_eq!(q.misses("212 are in Arm A: calpetrant 70 mg."), None);
        let q = Question::new("Can I take calpetrant 35 mg?", &store);
        assert!(q.absent.is_empty(), "{:?}", q.absent);
        // An amount that qualifies no labelled series is the asker's own.
        let q = Question::new(
            "I took calpetrant 35 mg daily. How many sites enrolled?",
            &store,
        );
        assert!(q.absent.is_empty(), "{:?}", q.absent);
    }

    /// One end of a series (`first`) is not answered by a line that states only another
    /// (`last`), nor `primary` by `secondary`; a synonym (`final`) is the same end.
    #[test]
    fn one_end_of_a_series_is_not_answered_by_the_other() {
        let mut store = store();
        store
            .insert(SourceDocument::new(
                "END",
                "v1",
                true,
                "Endpoints\nThe primary endpoint is HbA1c at week 26.\nThe secondary endpoint is body weight at week 26.\nThe last participant visit is expected in December 2025.",
            ))
            .unwrap();
        let q = Question::new("When is the first participant visit expected?", &store);
        let why = q.misses("The last participant visit is expected in December 2025.");
        assert!(
            why.as_deref().is_some_and(|w| w.contains("`last`")),
            "{why:?}"
        );
        assert_eq!(
            q.misses("The first participant visit is expected in May 2025, the last in December."),
            None
        );
        let q = Question::new("When is the last participant visit expected?", &store);
        assert_eq!(
            q.misses("The final participant visit is expected in December 2025."),
            None
        );
        let q = Question::new("What is the primary endpoint?", &store);
        assert!(q
            .misses("The secondary endpoint is body weight at week 26.")
            .is_some());
        assert_eq!(q.misses("The primary endpoint is HbA1c at week 26."), None);
    }

    /// A record's field key (`first_last`) names both ends and states neither; `what time`
    /// asks for a time of day; `how long` asks for a length even of something priced; a
    /// saving may be a share; a name (`Bus 22`) is a member of its series.
    #[test]
    fn what_a_question_asks_for_is_read_from_its_words_not_its_records_keys() {
        let mut store = store();
        store
            .insert(SourceDocument::new(
                "RTE",
                "v1",
                true,
                "Routes\nroute: Bus 4; first_last: The first Bus 4 leaves at 05:50 and the last leaves at 23:30.\nroute: Bus 17; first_last: The first Bus 17 leaves at 07:15.\nThe desk is open from 08:00 to 18:00.\nThis procedure was issued in March 2025.\nOne fare covers any change of bus for 90 minutes.\nStudents get 30% off a monthly fare.\nThe replacement buses stop at Millbrook Park and Ride.\nEvery tram has 2 wheelchair spaces, and every bus has 1 wheelchair space.",
            ))
            .unwrap();
        let last = Question::new("What time does the last Bus 4 leave?", &store);
        let spans = last.spans(
            "route: Bus 4; first_last: The first Bus 4 leaves at 05:50 and the last leaves at 23:30.",
        );
        assert!(spans.iter().all(|s| !s.ends_with("05:50")), "{spans:?}");
        let open = Question::new("Until what time is the desk open?", &store);
        assert!(open
            .misses("This procedure was issued in March 2025.")
            .is_some_and(|w| w.contains("time of day")));
        assert_eq!(open.misses("The desk is open from 08:00 to 18:00."), None);
        let long = Question::new("How long does one fare cover a change of bus?", &store);
        assert_eq!(
            long.misses("One fare covers any change of bus for 90 minutes."),
            None
        );
        let save = Question::new("How much do students save on a monthly fare?", &store);
        assert_eq!(save.misses("Students get 30% off a monthly fare."), None);
        let unknown = Question::new("When does Bus 22 leave?", &store);
        assert!(unknown
            .misses("route: Bus 4; first_last: The first Bus 4 leaves at 05:50 and the last leaves at 23:30.")
            .is_some_and(|w| w.contains("no source states")));
        // A one-digit amount is what is asked, not a restatement of the question.
        let spaces = Question::new("How many wheelchair spaces does a tram have?", &store);
        assert_eq!(spaces.misses("Every tram has 2 wheelchair spaces"), None);
        let stop = Question::new("Where do the replacement buses stop?", &store);
        let spans = stop.spans("The replacement buses stop at Millbrook Park and Ride.");
        assert!(spans[0].ends_with("Park and Ride."), "{spans:?}");
    }

    /// A rare word of what is asked that no source states (`karaoke`, `helicopter`) leaves
    /// nothing to answer with; an everyday one (`available`, `switching`) may be said in
    /// other words.
    #[test]
    fn what_is_asked_in_a_rare_word_no_source_states_is_not_answered() {
        let store = store();
        let line = "The DSMB met on 2025-02-18.";
        let q = Question::new(
            "When did the DSMB of CALM-PREVENT hold its karaoke night?",
            &store,
        );
        assert_eq!(q.unheard, ["karaoke"]);
        let why = q.misses(line).unwrap();
        assert!(why.contains("`karaoke`"), "{why}");
        let q = Question::new(
            "When was the DSMB of CALM-PREVENT available to meet?",
            &store,
        );
        assert!(q.unheard.is_empty(), "{:?}", q.unheard);
        assert_eq!(q.misses(line), None);
        // A word in common use but not everyday (`helicopter`) names a thing; an everyday
        // word's less frequent form (`switching` of `switch`) may be said otherwise.
        let q = Question::new(
            "When did the DSMB of CALM-PREVENT hold its helicopter meeting?",
            &store,
        );
        assert_eq!(q.unheard, ["helicopter"]);
        let q = Question::new(
            "When did the DSMB of CALM-PREVENT meet about switching?",
            &store,
        );
        assert!(q.unheard.is_empty(), "{:?}", q.unheard);
        // A slip of the keyboard is the word meant, not a rare one.
        for question in [
            "When did the DSMB of CALM-PREVENT meet with the peopel?",
            "When did the DSMB of CALM-PREVENT hold its meteing?",
        ] {
            let q = Question::new(question, &store);
            assert!(q.unheard.is_empty(), "{question}: {:?}", q.unheard);
        }
    }

    /// A word rare in English that a few lines state (`chinchilla`) and that the main
    /// clause asks about must be stated by the answer: the sources speak of it elsewhere,
    /// so a line about neutering in general is about something else. Not an everyday word,
    /// not one in a clause that says when (`before I need to renew`), not for a yes or no.
    #[test]
    fn whose_name_which_kind_and_what_a_value_was() {
        let store = store_of(&[
            ("SITES", "Sites\nBrackley Mill (BKM) is our riverside site.\nWe are rebuilding the footbridge at Brackley Mill.\nstaff_ref: K2; name: Odile Farrant; role: Footbridge works officer (Brackley Mill); phone: 0100 555"),
            ("TRAIL", "Canoe trail\nWendle: Odile Farrant\nOpen daily.\nClosed in floods.\nLife jackets are provided.\nNo swimming.\nParking is free.\nToilets at the mill.\nCafe at the lock."),
            ("FEES", "Fees\nHire type: 2-seat canoe; Daily: £40\nHire type: 3-seat canoe; Daily: £52\nBookings must be cancelled within 7 days (previously 14 days).\nThe hardship fund gives grants of up to £200.\nI have lost my card.\nDogs are allowed on the towpath."),
        ]);
        // The question's own place, written out (`Brackley Mill` for `BKM`), is no name of
        // who is asked for.
        let q = Question::new("Who do I talk to about the footbridge at BKM?", &store);
        assert!(q
            .misses("We are rebuilding the footbridge at Brackley Mill.")
            .is_some_and(|m| m.contains("asks for a name")));
        // Nor is the subject's whole name (`Wendle Mill Canoe Trail` for "Wendle"), nor a
        // numbered thing (`Bay 4`), nor a record's key (`Start:`).
        let trail = Question::new("Who looks after the Wendle canoe trail?", &store);
        for line in [
            "Trail: Wendle: Canoe Trail; Start: Bay 4",
            "Wendle Mill Canoe Trail",
        ] {
            assert!(
                trail
                    .misses(line)
                    .is_some_and(|m| m.contains("asks for a name")),
                "{line}: {:?}",
                trail.misses(line)
            );
        }
        assert_eq!(trail.misses("Wendle canoe trail: Odile Farrant"), None);
        // A record keyed by a qualified id (`staff_ref`) is cited with its name.
        let staff = "staff_ref: K2; name: Odile Farrant; role: Footbridge works officer (Brackley Mill); phone: 0100 555";
        assert!(
            q.spans(staff)[0].contains("Odile Farrant"),
            "{:?}",
            q.spans(staff)
        );
        // "The most I can get" asks an amount.
        let q = Question::new("What's the most I can get from the hardship fund?", &store);
        assert_eq!(q.kind(), AnswerKind::Quantity);
        assert!(q.misses("I have lost my card.").is_some());
        // A kind written with its number glued on (`3-seat canoe`): another number names
        // a kind no source has.
        let q = Question::new("How much is a 4 seat canoe for a day?", &store);
        assert!(q
            .misses("Hire type: 3-seat canoe; Daily: £52")
            .is_some_and(|m| m.contains("no source states")));
        let q = Question::new("How much is a 3 seat canoe for a day?", &store);
        assert!(q.misses("Hire type: 3-seat canoe; Daily: £52").is_none());
        // What a value was before is said apart from it.
        let q = Question::new("How long do I have to cancel a booking?", &store);
        let cancel = "Bookings must be cancelled within 7 days (previously 14 days).";
        assert_eq!(
            q.spans(cancel)[0],
            "Bookings must be cancelled within 7 days"
        );
        // A permission for a thing no source names is not settled by a rule about another.
        let q = Question::new("Can I bring a few goats on the towpath?", &store);
        assert!(q.misses("Dogs are allowed on the towpath.").is_some());
        let q = Question::new("Can I bring my old dog on the towpath?", &store);
        assert!(q.misses("Dogs are allowed on the towpath.").is_none());
    }

    #[test]
    fn legends_footnotes_and_the_ages_words_mean() {
        let store = store_of(&[
            ("FARES", "Fares\nPort codes: KIL = Kilbrannan Pier · PVN = Portvane (Isle of Hallan)\nRoute: KIL–PVN; Adult return: £6.20; Child return: £3.10\nCode: SP2; Course: Spanish Improvers; Full: £279¹; Over-60: £223\nTier: Child ¹; Monthly price: £6.80\n¹ The Child tier is £6.80 a month only when a parent is a Care Plan member. Otherwise it is £9.50.\nBlue Badge bays: 3 (Blue Badge holders only)"),
            ("NOTICE", "NOTICE\nSubject: Refit of MV Tern in January\nBookings on the Tern are moved to the Sula.\nFor questions, please contact:\nLorna Baird, Disruption Coordinator"),
        ]);
        // A legend names what its codes stand for.
        let abbreviations = abbreviations_of(&store);
        assert_eq!(
            abbreviations.get("KIL").map(String::as_str),
            Some("Kilbrannan Pier")
        );
        assert!(abbreviations
            .get("PVN")
            .is_some_and(|n| n.contains("Hallan")));
        // A question written as a noun phrase asks what it names; `60s` is `60`, and the
        // row's name field picks the row for its fields.
        let q = Question::new("over 60s price for the spanish improvers class?", &store);
        assert_eq!(q.kind(), AnswerKind::Quantity);
        assert_eq!(stem("60s"), "60");
        let row = "Code: SP2; Course: Spanish Improvers; Full: £279¹; Over-60: £223";
        assert_eq!(q.spans(row)[0], "Code: SP2; Over-60: £223");
        assert_eq!(amounts("Full: £279¹"), ["279"]);
        // `Adult` and `Child` with no ages of their own mean 16 and over, under 16, unless
        // the asker writes the word themselves.
        assert_eq!(age_ranges("Adult return: £6.20"), [(16, 120)]);
        let q = Question::new(
            "What does it cost for my 9 year old to go KIL to PVN and back?",
            &store,
        );
        let fares = "Route: KIL–PVN; Adult return: £6.20; Child return: £3.10";
        assert!(
            q.spans(fares)[0].contains("Child return"),
            "{:?}",
            q.spans(fares)
        );
        // A cell's footnote holds a condition the asker says does not hold.
        let q = Question::new(
            "My son is 8 and I'm not on the care plan myself. How much a month is the child tier?",
            &store,
        );
        assert!(q
            .misses("Tier: Child ¹; Monthly price: £6.80")
            .is_some_and(|m| m.contains("does not hold")));
        // Who to contact about a notice: its signature, read with all the notice says.
        let q = Question::new(
            "My Tern booking was moved. Who should I contact about it?",
            &store,
        );
        assert!(q
            .misses_in("Lorna Baird, Disruption Coordinator", Some("NOTICE"))
            .is_none());
        // A count keyed by its plural, or a number and a name apart, is no address.
        assert!(!states_location(
            "Blue Badge bays: 3 (Blue Badge holders only)"
        ));
    }

    /// "When will the collection due on 26 December be made?": another day of the month is
    /// the answer, not a sibling of the one asked; a span stating only the question's own
    /// date says nothing of when; and a later value is not kept for a word of the asker's
    /// situation (`normally`) that the rest of the line happens to repeat.
    #[test]
    fn a_when_question_is_answered_by_another_date_than_its_own() {
        let line = "Collections due on Boxing Day, Friday 26 December 2025, will be made on Saturday 27 December, and Monday 29 December is a normal collection day.";
        let store = store_of(&[("CAL", &format!("Bin calendar (fictional)\n{line}"))]);
        let q = Question::new(
            "My bins normally go on a Friday. When will they be collected in the week of 26 December?",
            &store,
        );
        assert_eq!(q.misses_in(line, Some("CAL")), None);
        let spans = q.spans_in(line, Some("CAL"));
        assert!(
            spans[0].ends_with("will be made on Saturday 27 December"),
            "{spans:?}"
        );
        assert!(spans.iter().all(|s| s.contains("27 December")), "{spans:?}");
    }

    #[test]
    fn where_is_an_address_and_who_signs_is_who_to_ask() {
        let store = store_of(&[
            ("STAFF", "staff_ref: K3; name: Ada Pellow; office: Riverside hub\nstaff_ref: K4; name: Tom Acre; office: Hill hub"),
            ("OFFICES", "Our offices\nOffice: Riverside hub; Address: 4 Quay Walk, Brackley; Phone: 0100 777 123"),
            ("NOTICE", "NOTICE TO RESIDENTS\nSubject: Closure of the east footbridge\nWe are closing the east footbridge for repairs.\nCONTACT\nOdile Farrant, Bridge Works Officer"),
        ]);
        // A record's fields before the last say whose it is: a name there is no place.
        let q = Question::new("Where is your office in Riverside?", &store);
        assert!(q
            .misses_in(
                "staff_ref: K3; name: Ada Pellow; office: Riverside hub",
                Some("STAFF")
            )
            .is_some());
        let office = "Office: Riverside hub; Address: 4 Quay Walk, Brackley; Phone: 0100 777 123";
        let spans = q.spans_in(office, Some("OFFICES"));
        assert!(spans[0].contains("4 Quay Walk"), "{spans:?}");
        // A phone number is not a numbered place.
        assert!(!states_location("Phone: 0100 777 123"));
        // A signature is citable for who to ask, and is about what the notice is about.
        let q = Question::new("Who do I ask about the footbridge closure?", &store);
        let signature = "Odile Farrant, Bridge Works Officer";
        assert!(q.citable(signature));
        assert!(q
            .section("NOTICE", signature)
            .is_some_and(|s| s.contains("footbridge")));
        assert!(q.misses_in(signature, Some("NOTICE")).is_none());
        // A heading is not a signature.
        assert!(!is_signature("Lift Works, Phase Two"));
        // A contact line is one; a month the question names is stated by a line that
        // states none when its notice does, but not for a time or an amount, and never
        // by a line that states another month.
        let store = store_of(&[(
            "NOTICE",
            "NOTICE TO RESIDENTS\nSubject: Closure of the east footbridge\nThe footbridge is closed from 6 October to 24 October.\nContact: Odile Farrant, Bridge Works Officer\nIn November we repaint the footbridge rails.\nUse the west footbridge meanwhile.\nThe west footbridge has a ramp.\nCyclists must dismount.\nDogs must be on a lead.\nThe car park stays open.\nBuses still stop at the gate.\nThe cafe stays open.\nThe lift is not affected.\nNoise is kept to a minimum.\nWe are sorry for the disruption.",
        )]);
        let contact = "Contact: Odile Farrant, Bridge Works Officer";
        assert!(is_signature(contact));
        let q = Question::new(
            "Who do I ask about the footbridge closure in October?",
            &store,
        );
        assert!(q.names_stated(contact, "NOTICE"));
        assert!(
            !q.names_stated("In November we repaint the footbridge rails.", "NOTICE"),
            "{:?}",
            q.proper
        );
        let q = Question::new("How long is the footbridge shut in October?", &store);
        assert!(!q.names_stated(contact, "NOTICE"));
    }

    #[test]
    fn a_rare_word_the_sources_state_elsewhere_must_be_stated() {
        let store = store_of(&[
            ("PRICES", "Prices\nService: Microchip implant during neutering; Price: £12.00\nProcedure: Dog castration; Price: £92"),
            ("EXOTIC", "Exotic pets\nConsultation: rabbits, chinchillas; Price: £58.50\nWe see birds on Fridays."),
            ("CARE", "Care plans\nA plan lasts 12 months before you renew it.\nThe plan covers two check-ups."),
            ("HOURS", "Opening hours\nWe are open 08:00 to 18:00 on weekdays."),
        ]);
        let neutering = "Service: Microchip implant during neutering; Price: £12.00";
        let q = Question::new(
            "How much does it cost to get a chinchilla neutered?",
            &store,
        );
        assert!(
            q.rare.iter().any(|(_, w, _)| w == "chinchilla"),
            "{:?}",
            q.rare
        );
        let why = q.misses_in(neutering, Some("PRICES")).unwrap();
        assert!(why.contains("`chinchilla`, which few lines state"), "{why}");
        // A line of the source that states it elsewhere is not refused for it.
        let birds = "We see birds on Fridays.";
        assert!(q
            .misses_in(birds, Some("EXOTIC"))
            .is_none_or(|why| !why.contains("chinchilla")));
        // `dog` is an everyday word: said in other words as often as in this one.
        let q = Question::new("How much does it cost to get a dog neutered?", &store);
        assert!(q.rare.iter().all(|(_, w, _)| w != "dog"), "{:?}", q.rare);
        assert!(q
            .misses_in(neutering, Some("PRICES"))
            .is_none_or(|why| !why.contains("few lines")));
        let q = Question::new("How long does a plan last before I need to renew?", &store);
        assert!(q.rare.is_empty(), "{:?}", q.rare);
        assert_eq!(
            q.misses_in("A plan lasts 12 months before you renew it.", Some("CARE")),
            None
        );
    }

    /// What a `what is the …` question asks for, in a word no source states, is not
    /// answered, common word or not; a word naming the kind of value or qualifying it is
    /// not held against the sources.
    #[test]
    fn what_a_what_is_the_question_asks_for_must_be_stated_somewhere() {
        let store = store();
        let line = "The limit is 750 yuan.";
        let q = Question::new("What is the speed limit under the policy?", &store);
        assert_eq!(q.unheard, ["speed"]);
        assert!(q.misses(line).unwrap().contains("`speed`"));
        for question in [
            "What is the limit under the policy?",
            "What's the current limit under the policy?",
            "What is the usual limit under the policy?",
        ] {
            let q = Question::new(question, &store);
            assert!(q.unheard.is_empty(), "{question}: {:?}", q.unheard);
            assert_eq!(q.misses(line), None, "{question}");
        }
        assert_eq!(
            attribute_phrase("which was the data cutoff for the review?"),
            ["data", "cutoff"]
        );
        assert_eq!(
            attribute_phrase("what's the registered title of it?"),
            ["registered", "title"]
        );
        assert!(attribute_phrase("what did the arm receive?").is_empty());
        assert_eq!(
            attribute_phrase("what is the longest stay allowed without approval?"),
            ["longest", "stay"]
        );
        assert_eq!(
            attribute_phrase("what is the speed limit?"),
            ["speed", "limit"]
        );
    }

    /// The measure after `how`, light words (`still`) and the asker's own numbers (`I'm
    /// 72`) are not what a line must repeat to answer; the rest of what is asked still is.
    #[test]
    fn the_measure_light_words_and_the_askers_numbers_need_not_be_repeated() {
        let store = store_of(&[
            (
                "GYM",
                "Membership rules
Members aged 60 and over pay no joining fee.
The front desk keeps lost goggles for 14 days.
Lockers cost £1 per visit.",
            ),
            (
                "POOL",
                "Pool guide
The pool opens at 07:00.",
            ),
            (
                "CAFE",
                "Cafe menu
Soup is served from noon.",
            ),
            (
                "CLUB",
                "Club news
The club was founded in 1990.",
            ),
        ]);
        let older = Question::new("I'm 72. Do I still pay a joining fee?", &store);
        assert_eq!(
            older.misses("Members aged 60 and over pay no joining fee."),
            None
        );
        let keep = Question::new("How long does the front desk keep lost goggles?", &store);
        assert_eq!(
            keep.misses("The front desk keeps lost goggles for 14 days."),
            None
        );
        // A line that states an amount but nothing of what is asked still does not answer.
        let towels = Question::new("How long does the front desk keep wet towels?", &store);
        assert!(towels.misses("Lockers cost £1 per visit.").is_some());
        // A short name's plural is the name.
        assert!(same_name("dvds", "dvd"));
        assert!(!same_name("dvd", "dv"));
    }

    /// Who: the span that keeps the name before the role asked about; where: a numbered
    /// place answers as a name does.
    #[test]
    fn who_keeps_the_name_and_where_may_be_numbered() {
        let store = store_of(&[
            ("NEWS", "Harbour news\nMarta Lindqvist, Head of Operations at Harbour Ferries, said: \"The new timetable starts in May and adds late services.\""),
            ("MAP", "Terminal map\nThe ticket office is in room 1.12 on the ground floor.\nTram stops have ticket machines."),
            ("CAFE", "Cafe menu\nSoup is served from noon."),
            ("CLUB", "Club news\nThe club was founded in 1990."),
        ]);
        let who = Question::new("Who is the head of operations?", &store);
        let spans = who.spans("Marta Lindqvist, Head of Operations at Harbour Ferries, said: \"The new timetable starts in May and adds late services.\"");
        assert!(spans[0].starts_with("Marta Lindqvist"), "{spans:?}");
        let place = Question::new("Where in the terminal is the ticket office?", &store);
        assert_eq!(
            place.misses("The ticket office is in room 1.12 on the ground floor."),
            None
        );
        assert!(place
            .misses("The ticket office sells day returns.")
            .is_some());
        // A kind of place the question does not name answers it.
        let machines = Question::new("Where are the ticket machines?", &store);
        assert_eq!(machines.misses("Tram stops have ticket machines."), None);
    }

    /// A record keyed by a bare label (`B: …`) states that label of the series asked
    /// about, and another bare label is a sibling.
    #[test]
    fn a_record_keyed_by_a_bare_label_states_it() {
        let store = store_of(&[
            ("RUN", "Dosing study\nArm A: oralin 5 mg; Arm B: oralin 10 mg.\nA: oralin 5 mg receives one tablet daily.\nB: oralin 10 mg receives two tablets daily."),
            ("CAFE", "Cafe menu\nSoup is served from noon."),
            ("CLUB", "Club news\nThe club was founded in 1990."),
            ("POOL", "Pool guide\nThe pool opens at 07:00."),
        ]);
        let q = Question::new("What does arm B of the dosing study receive?", &store);
        assert_eq!(
            q.misses("B: oralin 10 mg receives two tablets daily."),
            None
        );
        assert!(q
            .misses("A: oralin 5 mg receives one tablet daily.")
            .is_some_and(|why| why.contains("`arm… b`")));
        assert_eq!(
            q.qualifier_stems("B: oralin 10 mg receives two tablets daily."),
            ["arm", "b"]
        );
        // A clock time is no label.
        assert_eq!(bare_label("12:30 doses are given with food."), None);
        assert_eq!(bare_label("B: oralin 10 mg").as_deref(), Some("b"));
    }

    #[test]
    fn headings_questions_and_sibling_ids_do_not_answer() {
        let store = store();
        let q = Question::new("What does the lumeditan study give in Arm A?", &store);
        assert!(!q.citable("Lumeditan nasal spray study"));
        assert!(!q.citable("What does Arm A get?"));
        assert!(q.citable("Arm A: lumeditan 5 mg; enrolled: 96."));
        let titled = Question::new("What is the lumeditan study called?", &store);
        assert!(titled.citable("Lumeditan nasal spray study"));
        // `A3` is a sibling of the asked `A4`; a span naming only `A4` answers.
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "FEES",
                "v1",
                true,
                "Fees\nColour printing costs £0.60 per A4 side and £1.20 per A3 side.",
            ))
            .unwrap();
        let q = Question::new("What does a colour A4 print cost?", &store);
        let spans = q.spans("Colour printing costs £0.60 per A4 side and £1.20 per A3 side.");
        assert!(!spans.is_empty());
        for s in &spans {
            assert!(s.contains("£0.60") && !s.contains("A3"), "{s}");
        }
        // A question about a price wants a sum of money, not any amount.
        let q = Question::new("How much does a colour print cost?", &store);
        assert!(q.misses("Colour printing needs 2 days.").is_some());
    }

    /// "How many" counts the noun phrase after it, met by the phrase after an amount;
    /// "the largest" asks for a size, which a length of time is not; "how many days … in
    /// the fees" counts days, not money.
    #[test]
    fn what_is_counted_and_measured_is_read_from_the_phrase() {
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "HIRE",
                "v1",
                true,
                "Tool hire rules (fictional)\nA member can have up to 3 open tool hire bookings at a time.\nA tool hire booking costs £2.00 per booking.\nBook a lathe up to 10 days in advance.\nThe lathe turns pieces up to 30 x 12 cm.\nA tool 21 days late is treated as lost, and the member pays its fee.",
            ))
            .unwrap();
        let q = Question::new(
            "How many tool hire bookings can I have open at once?",
            &store,
        );
        assert_eq!(q.counted, [stem("tool"), stem("hire"), stem("bookings")]);
        assert_eq!(
            q.misses("A member can have up to 3 open tool hire bookings at a time."),
            None
        );
        assert!(q
            .misses("A tool hire booking costs £2.00 per booking.")
            .is_some());
        // `things` names no kind of thing: any amount counts.
        let q = Question::new("How many things can I hire at once?", &store);
        assert!(q.counted.is_empty());
        let q = Question::new("What is the largest piece I can make on the lathe?", &store);
        assert_eq!(q.measure, Some(Measure::Size));
        assert!(q.misses("Book a lathe up to 10 days in advance.").is_some());
        assert_eq!(q.misses("The lathe turns pieces up to 30 x 12 cm."), None);
        // A count of people is not a size.
        let q = Question::new("What is the largest number of people in a group?", &store);
        assert_ne!(q.measure, Some(Measure::Size));
        let q = Question::new(
            "In the hire fees, after how many days late is a tool treated as lost?",
            &store,
        );
        assert_eq!(q.measure, None);
        assert_eq!(
            q.misses("A tool 21 days late is treated as lost, and the member pays its fee."),
            None
        );
        // People are counted by the places kept for them, not by other things.
        let hall = store_of(&[(
            "HALL",
            "Hall access (fictional)\nThe hall has 4 wheelchair spaces.\nThe hall has 4 wheelchair ramps.",
        )]);
        let q = Question::new("How many people in wheelchairs fit in the hall?", &hall);
        assert_eq!(q.misses("The hall has 4 wheelchair spaces."), None);
        assert!(q.misses("The hall has 4 wheelchair ramps.").is_some());
    }

    /// "How long can a booking be?" asks how long it lasts: how far ahead one books (`up to
    /// 14 days in advance`) does not answer it, unless the question asks that.
    #[test]
    fn how_long_is_not_how_far_ahead() {
        let store = store_of(&[(
            "KILN",
            "Kiln rules (fictional)\nBook the kiln up to 14 days in advance.\nA kiln booking is a slot of up to 6 hours of firing.\nGive 48 hours' notice to cancel.",
        )]);
        let q = Question::new("How long can a single kiln booking be?", &store);
        assert!(q
            .misses("Book the kiln up to 14 days in advance.")
            .is_some());
        assert_eq!(
            q.misses("A kiln booking is a slot of up to 6 hours of firing."),
            None
        );
        let q = Question::new("How far ahead can I book the kiln?", &store);
        assert_eq!(q.misses("Book the kiln up to 14 days in advance."), None);
        assert_eq!(
            without_lead_times("Give 48 hours' notice to cancel."),
            "Give  to cancel."
        );
    }

    /// A document's title is not an answer; the words naming an earlier version ("the\n    /// earlier fees schedule") are not what a question asks of it.
    #[test]
    fn titles_and_the_version_asked_about_are_not_answers() {
        let mut store = SourceStore::new();
        for (version, in_force, text) in [
            ("v1", false, "Club fees schedule, version 1 (fictional).\nReserving a court costs £1.50 per hour."),
            ("v2", true, "Club fees schedule, version 2 (fictional).\nReserving a court is free."),
        ] {
            store
                .insert(SourceDocument::new("FEES", version, in_force, text))
                .unwrap();
        }
        let q = Question::new(
            "Did the earlier fees schedule charge for reserving a court?",
            &store,
        );
        assert!(q.asks_earlier_version());
        assert!(q
            .misses("Club fees schedule, version 1 (fictional).")
            .is_some());
        assert!(q.citable("Reserving a court costs £1.50 per hour."));
        assert!(!q
            .beyond
            .iter()
            .any(|t| t == &stem("schedule") || t == &stem("earlier")));
        assert_eq!(q.misses("Reserving a court costs £1.50 per hour."), None);
        let titled = Question::new("What is the fees document called?", &store);
        assert!(titled.citable("Club fees schedule, version 1 (fictional)."));
    }

    /// A line's section (its heading or lead-in) states names for it: `Kilnfield` under
    /// `Kilnfield Library rooms:` is stated by every item of that list.
    #[test]
    fn a_section_states_names_for_its_lines() {
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "ROOMS",
                "v1",
                true,
                "Meeting rooms (fictional)\nKilnfield Library rooms:\n- The Hub Room seats 30 people.\nNorthgate Library rooms:\n- The Garden Room seats 12 people.",
            ))
            .unwrap();
        // Enough other lines that `Kilnfield` is a rare name.
        insert_rules(&mut store);
        let q = Question::new("How many people does the room at Kilnfield seat?", &store);
        assert_eq!(
            q.section("ROOMS", "- The Hub Room seats 30 people."),
            Some("kilnfield library rooms:")
        );
        assert!(q.names_stated("- The Hub Room seats 30 people.", "ROOMS"));
        assert!(!q.names_stated("- The Garden Room seats 12 people.", "ROOMS"));
    }

    /// The asker's age (`my 9-year-old`) and pronouns (`her`) say who asks, not what: a
    /// line need not state them to answer.
    #[test]
    fn the_askers_age_pronouns_and_verbs_of_regard_are_not_what_is_asked() {
        let q = Question::new(
            "Does my 9-year-old get charged late fees on her junior card?",
            &store(),
        );
        for word in ["year", "old", "her", "9"] {
            assert!(!q.beyond.contains(&stem(word)), "{word}: {:?}", q.beyond);
        }
        assert!(q.beyond.contains(&stem("junior")), "{:?}", q.beyond);
        // `since when` asks for a time; `since` is no word a line must state.
        let since = Question::new("Since when has the limit applied?", &store());
        assert!(!since.terms.contains(&stem("since")));
        assert_eq!(since.kind, AnswerKind::Time);
        // A verb of regard before `as` says how, not what: the line may say `treated as`.
        let counted = Question::new("After how many days is an item counted as lost?", &store());
        assert!(
            !counted.beyond.contains(&stem("counted")),
            "{:?}",
            counted.beyond
        );
    }

    /// Readings of the asker's words: a price asked with `what do I pay` or `is there …
    /// and what is it`; a season of two years states both; a year an arrangement ends in
    /// bounds it; numbers in brackets after a noun are no label.
    #[test]
    fn sums_seasons_and_bracketed_numbers_are_read_as_meant() {
        assert_eq!(
            AnswerKind::of("Band D, not metered. What do I pay for just the water part?"),
            AnswerKind::Quantity
        );
        assert_eq!(
            AnswerKind::of("is there a family price and what is it?"),
            AnswerKind::Quantity
        );
        assert_eq!(
            AnswerKind::of("What happens if I don't pay?"),
            AnswerKind::Thing
        );
        // A date asked by what it is the date of; `dates` asks for all a line lists.
        assert_eq!(
            AnswerKind::of("what's the last date I can report damage?"),
            AnswerKind::Time
        );
        assert_eq!(AnswerKind::of("Tree pick-up dates?"), AnswerKind::Thing);
        assert_eq!(stated_years("the charge in 2025/26"), vec![2025, 2026]);
        assert_eq!(stated_years("before 2001"), vec![2001]);
        assert_eq!(
            year_ranges("an arrangement that ends on 31 March 2027"),
            vec![(1900, 2027)]
        );
        let q = Question::new(
            "our 3 kids (6, 9 and 12) - what is the family price?",
            &store(),
        );
        assert!(
            !q.qualifiers
                .iter()
                .any(|x| matches!(x, Qualifier::Label { value, .. } if value == "6")),
            "{:?}",
            q.qualifiers
        );
    }

    /// A year inside a file name or a reference number is no time the line states.
    #[test]
    fn a_reference_or_a_file_name_states_no_time() {
        let store = store_of(&[(
            "TUB",
            "Hosepipe ban notice\nThe hosepipe ban starts on Friday 18 July 2025.",
        )]);
        let q = Question::new("When does the hosepipe ban kick in?", &store);
        let why = q.misses("tub-notice-2025.txt: temporary use ban notice DMW-OPS-2025-014");
        assert_eq!(
            why.as_deref(),
            Some("the question asks for a time, and it states none")
        );
        assert!(q
            .misses("The hosepipe ban starts on Friday 18 July 2025.")
            .is_none());
    }

    /// A range of dates is read at its `to` or dash; clock times are no range of dates.
    #[test]
    fn a_range_of_dates_parts_at_its_to_or_dash() {
        let line = "Tram T2 will not run from Saturday 11 April 2026 to Sunday 26 April 2026 while the track is renewed.";
        let (a, b) = date_range(line).expect("a range");
        assert_eq!(
            &line[..a],
            "Tram T2 will not run from Saturday 11 April 2026"
        );
        assert!(
            line[b..].starts_with("to Sunday 26 April 2026"),
            "{}",
            &line[b..]
        );
        let dashed = "Closed 2 June – 14 July 2025 for repairs.";
        let (a, b) = date_range(dashed).expect("a dashed range");
        assert_eq!(
            (&dashed[..a], &dashed[b..]),
            ("Closed 2 June", "14 July 2025 for repairs.")
        );
        assert_eq!(date_range("Mon: 08:30–17:30"), None);
        let q = Question::new("When does the T2 track work finish?", &store());
        let spans = q.spans(line);
        assert!(spans[0].starts_with("to Sunday 26 April 2026"), "{spans:?}");
    }

    /// A `when` question's event is the verb after its subject, read as phrasal verbs and
    /// `again` are; a verb a timetable answers without naming it, a pronoun's, or a `when
    /// is` without a verb asks none.
    #[test]
    fn a_when_question_asks_for_the_time_of_its_event() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            (
                "When does the Hill practice open again after the work?",
                Some(&["reopen"]),
            ),
            (
                "When are the band charges next going up?",
                Some(&["increase"]),
            ),
            (
                "When did the board hold its first review meeting?",
                Some(&["hold", "meeting"]),
            ),
            (
                "When will the council collect the bins?",
                Some(&["collect", "bin"]),
            ),
            ("When does the pool close on Sundays?", None),
            ("When does the last bus leave?", None),
            ("When can I drop in for help?", None),
            ("When is the next bus to town?", None),
            ("When is the evening class?", None),
        ];
        for (text, event) in cases {
            let want = event.map(|e| e.iter().map(|w| stem(w)).collect::<Vec<_>>());
            assert_eq!(asked_event(text), want, "{text}");
        }
        let q = Question::new("When does the Hill practice open again?", &store());
        assert!(q.states_event("The practice reopens on Monday 19 January 2026."));
        assert!(!q.states_event("Mon: 08:30-17:00"));
    }

    /// "Per person or per room?": each side keeps the words that lead it, so a line that
    /// mentions the room, but not per room, states neither.
    #[test]
    fn an_either_or_question_is_answered_by_one_side_as_asked() {
        let mut store = store();
        store
            .insert(SourceDocument::new(
                "HOTEL",
                "v1",
                true,
                "Hotel policy\nThe limit is 750 yuan per room per night.",
            ))
            .unwrap();
        let q = Question::new("Is the limit counted per person or per room?", &store);
        assert_eq!(
            q.alternatives,
            vec![
                vec![stem("per"), stem("person")],
                vec![stem("per"), stem("room")]
            ]
        );
        assert!(q
            .misses("The limit is 750 yuan per room per night.")
            .is_none());
        let why = q.misses("Breakfast is included in the limit when billed with the room.");
        assert_eq!(
            why.as_deref(),
            Some("the question asks which of two, and it states neither")
        );
    }

    /// A record stands alone: the first record of a records document is no title that the
    /// others inherit, so the address of Northgate is not stated for Central.
    #[test]
    fn a_record_inherits_no_name_from_the_first_record() {
        let records = "branch: Central Library; address: 1 Market Square\nbranch: Northgate; address: 48 Northgate Road";
        let northgate = "branch: Northgate; address: 48 Northgate Road";
        for (as_records, stated) in [(true, false), (false, true)] {
            let mut store = SourceStore::new();
            let document = SourceDocument::new("BRANCHES", "v1", true, records);
            assert!(document.title().is_some());
            let document = if as_records {
                document.records()
            } else {
                document
            };
            assert_eq!(document.title().is_none(), as_records);
            store.insert(document).unwrap();
            insert_rules(&mut store);
            let q = Question::new("What is the address of Central Library?", &store);
            assert_eq!(
                q.names_stated(northgate, "BRANCHES"),
                stated,
                "records: {as_records}"
            );
        }
    }

    /// A source that mentions the subject once is on subject, but only its lines about the
    /// subject (by their own words, their section or their title) may answer; the source
    /// titled by the subject is the one to read first.
    #[test]
    fn a_line_states_the_subject_itself_or_through_its_section_or_title() {
        let store = store_of(&[
            (
                "FEES",
                "Fees schedule (fictional)\nNo charges are made on junior cards, including DVDs.\nHoliday loans:\n- A holiday loan costs 2 pounds.",
            ),
            (
                "HOLIDAY",
                "Holiday loan procedure\nHoliday loans are run by the lending desk, led by Ada Brook.",
            ),
            ("A", "Opening hours\nThe branch opens at nine."),
            ("B", "Computers\nThe branch has twelve computers."),
            ("C", "Events\nThe branch runs a reading group."),
            ("D", "Parking\nThe car park has forty spaces."),
            ("E", "Rooms\nThe hall seats sixty people."),
            ("F", "Printing\nA page costs ten pence."),
        ]);
        let q = Question::new("Who runs the holiday loan service?", &store);
        assert!(q.on_subject("FEES"));
        assert!(!q.names_stated(
            "No charges are made on junior cards, including DVDs.",
            "FEES"
        ));
        // Its section names the subject.
        assert!(q.names_stated("- A holiday loan costs 2 pounds.", "FEES"));
        // Its title does.
        assert!(q.names_stated(
            "Holiday loans are run by the lending desk, led by Ada Brook.",
            "HOLIDAY"
        ));
        assert!(q.subject_in_title("HOLIDAY") > q.subject_in_title("FEES"));
    }

    #[test]
    fn a_change_records_earlier_value_answers_only_a_question_about_before() {
        let store = store_of(&[(
            "CHANGES",
            "Changes this year (fictional)\nWhat: Start of the evening rate; Before: 18:00; Now: 18:30\nWhat: Pool opening on Sundays; Until 2024: 09:00; In 2025: 08:00",
        )]);
        let spans = |q: &str, line: &str| Question::new(q, &store).spans(line);
        let rate = "What: Start of the evening rate; Before: 18:00; Now: 18:30";
        let now = spans("From what time does the evening rate start?", rate);
        assert!(!now.is_empty(), "{now:?}");
        assert!(now.iter().all(|s| !s.contains("18:00")), "{now:?}");
        let before = spans("When did the evening rate start before the change?", rate);
        assert!(before.iter().any(|s| s.contains("18:00")), "{before:?}");
        let pool = "What: Pool opening on Sundays; Until 2024: 09:00; In 2025: 08:00";
        let sunday = spans("What time does the pool open on Sundays?", pool);
        assert!(sunday.iter().all(|s| !s.contains("09:00")), "{sunday:?}");
        let then = spans("What time did the pool use to open on Sundays?", pool);
        assert!(then.iter().any(|s| s.contains("09:00")), "{then:?}");
    }

    #[test]
    fn what_kind_of_thing_a_name_is_is_said_by_a_line_defining_it() {
        assert_eq!(
            Question::text_asks_kind_of("What kind of drug is Florimab?").as_deref(),
            Some("Florimab")
        );
        assert_eq!(
            Question::text_asks_kind_of("which type of boiler is the Calder 40").as_deref(),
            Some("Calder 40")
        );
        assert_eq!(
            Question::text_asks_kind_of("What kind of food is served?"),
            None
        );
        assert_eq!(
            Question::text_asks_kind_of("What kind of drug treats it, and when?"),
            None
        );
        assert!(Question::defines_kind(
            "The study tests florimab, an engineered monoclonal antibody, in adults.",
            "Florimab"
        ));
        assert!(Question::defines_kind(
            "The Calder 40 is a condensing combi boiler.",
            "Calder 40"
        ));
        assert!(!Question::defines_kind(
            "Florimab 10 mg was given weekly.",
            "Florimab"
        ));
        // A longer word that holds the name is another word.
        assert!(!Question::defines_kind(
            "Noflorimab, a placebo, was given.",
            "florimab"
        ));
    }

    #[test]
    fn an_answer_states_what_is_asked_beyond_the_subject_not_only_its_name() {
        let store = store_of(&[
            ("BR", "Branches\nbranch: Kilnfield Library; facilities: Kilnfield Library has a makerspace.\nbranch: Northgate Library; facilities: Northgate Library has a cafe.\nbranch: Riverside Library; facilities: Riverside Library has a garden."),
            ("ILL", "Interlibrary loans\nThe interlibrary loan manager is Priya Okafor.\nRequests take two weeks."),
            ("WH", "Wren Hill Library\nWren Hill Library is closed on Sunday.\nWren Hill Library has a car park on Mill Lane."),
        ]);
        // The name is the subject; `branch` and `manager` are what is asked.
        let q = Question::new("Who is the branch manager at Kilnfield?", &store);
        assert!(q
            .misses("Kilnfield Library has a makerspace, run by Ada Brook.")
            .is_some());
        assert!(q
            .misses("The interlibrary loan manager is Priya Okafor.")
            .is_none());
        // The capitalised name is the subject: sharing it is not answering.
        let q = Question::new("Where can I park when I visit Wren Hill Library?", &store);
        assert!(q.misses("Wren Hill Library is closed on Sunday.").is_some());
        let park = "Wren Hill Library has a car park on Mill Lane.";
        assert!(q.misses(park).is_none(), "{:?}", q.misses(park));
    }

    #[test]
    fn a_superseded_version_is_asked_for_and_must_be_named() {
        let store = store();
        let q = Question::new("What was the limit under the previous policy?", &store);
        assert!(q.asks_earlier_version());
        assert!(!Question::new("What is the limit now?", &store).asks_earlier_version());
        assert!(!Question::new("Can my 9-year-old borrow?", &store).asks_earlier_version());
        assert!(Question::new("What did the v1 policy say?", &store).asks_earlier_version());
        assert!(
            Question::new("Under last year's policy, what was the limit?", &store)
                .asks_earlier_version()
        );
        assert!(
            !Question::new("I claimed last year; what is the limit?", &store)
                .asks_earlier_version()
        );
        // `How old` and `old enough` ask an age.
        for asked in [
            "How old must my son be to claim?",
            "Am I old enough to claim?",
        ] {
            assert!(
                !Question::new(asked, &store).asks_earlier_version(),
                "{asked}"
            );
        }
        let line = "The limit is 600 yuan.";
        assert!(!q
            .judge(line, &[("POL", "v1", line)], &store, "/c")
            .is_empty());
        assert!(q
            .judge(
                "v1 (superseded): The limit is 600 yuan.",
                &[("POL", "v1", line)],
                &store,
                "/c"
            )
            .is_empty());
    }

    #[test]
    fn asking_before_a_change_asks_for_the_earlier_version_and_its_date_names_nothing() {
        let store = store();
        let q = Question::new(
            "Before the April 2025 change, how far ahead did you have to apply?",
            &store,
        );
        assert!(q.asks_earlier_version());
        assert!(q.proper.is_empty(), "{:?}", q.proper);
        assert!(!Question::new("What changed before April?", &store).asks_earlier_version());
    }

    #[test]
    fn the_pronoun_i_is_no_label_and_phase_i_is_one() {
        let labels = |text: &str| {
            Qualifier::all_in(text)
                .into_iter()
                .filter(|q| matches!(q, Qualifier::Label { .. }))
                .count()
        };
        assert_eq!(labels("What is the most plots I can have at once?"), 0);
        assert_eq!(labels("When did Phase I end?"), 1);
        assert_eq!(labels("Why was Arm A terminated?"), 1);
        // A day of a month is a date, whatever word goes before it.
        assert_eq!(labels("What does a seat cost on Saturday 27 December?"), 0);
        assert_eq!(labels("Is the office open on March 3?"), 0);
        assert_eq!(labels("When does Bus 22 leave?"), 1);
    }

    #[test]
    fn a_number_joined_to_what_it_counts_is_no_id() {
        assert_eq!(
            id_tokens("Is the 18-month plan on the NCT01234567 trial?"),
            ["nct01234567"]
        );
        assert_eq!(
            id_tokens("Which 4-seater suits route X9 or room CY-2S?"),
            ["x9", "cy-2s"]
        );
        // A source that writes `18-month` does not make it the question's subject: every
        // source about plans stays on it.
        let store = store_of(&[
            ("PLANS", "Plans\nAn 18-month plan costs 20 pounds a month."),
            (
                "CHANGES",
                "Changing plan\nMoving to a cheaper plan costs 25 pounds.",
            ),
            ("A", "Opening hours\nThe shop opens at 09:00."),
            ("B", "Contacts\nCall us on 0100 000 000."),
        ]);
        let q = Question::new(
            "I'm on an 18-month plan. Does changing plan cost anything?",
            &store,
        );
        assert!(q.ids.is_empty(), "{:?}", q.ids);
        assert!(q.on_subject("CHANGES"));
    }

    #[test]
    fn what_the_asker_must_do_is_not_what_the_writer_does() {
        let store = store_of(&[
            ("TERMS", "Storage terms\nWe may end the licence by giving you 14 days' notice.\nYou may end the licence by giving us 7 days' notice."),
            ("A", "Fees\nA unit costs 40 pounds."),
        ]);
        let q = Question::new("How much notice do I have to give before I leave?", &store);
        assert_eq!(q.asker_verb.as_deref(), Some(stem("give").as_str()));
        assert!(q.other_party_does("We may end the licence by giving you 14 days' notice."));
        assert!(!q.other_party_does("You may end the licence by giving us 7 days' notice."));
        // A line of the writer's about another verb says nothing against it.
        assert!(!q.other_party_does("We send a reminder 14 days before."));
        // Asked what the writer does, nothing is held against the writer's lines.
        let theirs = Question::new("How much notice do you give before ending it?", &store);
        assert!(!theirs.other_party_does("We may end the licence by giving you 14 days' notice."));
    }

    #[test]
    fn a_share_of_a_sum_is_a_sum() {
        assert!(Measure::Money.stated("A deposit of 20% of the total price is taken."));
        assert!(Measure::Money.stated("Pay 10 per cent of the annual fee up front."));
        // A share of something that is not a sum is no money.
        assert!(!Measure::Money.stated("20% of members use the gym."));
        assert!(!Measure::Money.stated("The deposit is taken at booking."));
    }

    #[test]
    fn an_age_in_brackets_is_an_aside() {
        let store = store_of(&[(
            "FEES",
            "Fees\nBabies under 6 months (Riverside takes babies from 6 months): 77 pounds a day.\nRoom: Toddlers; age_group: 6-17 months; Day: 70 pounds",
        )]);
        let q = Question::new("What does a day cost for my 9-month-old?", &store);
        assert_eq!(
            q.age_fits(
                "Babies under 6 months (Riverside takes babies from 6 months): 77 pounds a day."
            ),
            Some(false)
        );
        assert_eq!(
            q.age_fits("Room: Toddlers; age_group: 6-17 months; Day: 70 pounds"),
            Some(true)
        );
        // A line stating an age only in brackets is still about that age.
        assert_eq!(
            q.age_fits("The day rate (for babies from 6 months) is 70 pounds."),
            Some(true)
        );
    }

    #[test]
    fn a_hedge_or_a_wish_is_not_asked() {
        let store = store_of(&[(
            "LESSONS",
            "Lessons\nA parent or guardian may sit in the back for the first lesson only.\nPlan: Scoot 100; Price: 22 pounds a month",
        )]);
        let q = Question::new(
            "My mum wants to sit in the back during my lesson. Is that allowed?",
            &store,
        );
        assert!(
            !q.beyond.iter().any(|t| t.starts_with("want")),
            "{:?}",
            q.beyond
        );
        let q = Question::new("I mostly ride scooters. Which plan should I get?", &store);
        assert!(
            !q.beyond.iter().any(|t| t.starts_with("most")),
            "{:?}",
            q.beyond
        );
    }

    #[test]
    fn an_age_asked_is_answered_by_an_age() {
        assert_eq!(
            Measure::asked("how old does my puppy have to be for its second injection?"),
            Some(Measure::Age)
        );
        assert_eq!(
            Measure::asked("what is the upper age limit for the study?"),
            Some(Measure::Age)
        );
        for stated in [
            "Second injection: not before 10 weeks of age.",
            "Open to children aged 8 and over.",
            "Members must be 18+.",
            "Under-16s must be with an adult.",
            "Adult (16+): 11.50 pounds",
        ] {
            assert!(Measure::Age.stated(stated), "{stated}");
        }
        // A length of time after something else is no age.
        assert!(!Measure::Age.stated("First booster: 12 months after the second injection."));
        let store = store_of(&[(
            "SCHEDULE",
            "Puppy injections\nSecond injection: 2 to 4 weeks after the first, and not before 10 weeks of age.\nFirst booster: 12 months after the second injection.",
        )]);
        let q = Question::new(
            "How old does my puppy have to be for his second injection?",
            &store,
        );
        assert!(q
            .misses("First booster: 12 months after the second injection.")
            .is_some());
        assert_eq!(
            q.misses(
                "Second injection: 2 to 4 weeks after the first, and not before 10 weeks of age."
            ),
            None
        );
    }

    #[test]
    fn what_a_thing_is_used_for_is_the_permission_asked() {
        assert_eq!(
            permitted_object("Can I use the AH-7 to heat my swimming pool?"),
            Some("pool")
        );
        assert_eq!(
            permitted_object("Can I keep a few chickens in my garden?"),
            Some("chickens")
        );
        // `use` alone is too general a verb to name what is asked.
        assert_eq!(permitted_object("Can I use my card abroad?"), None);
        assert_eq!(permitted_object("Can I use the app to pay?"), None);
        // A purpose no source states leaves no line to answer whether one may.
        let store = store_of(&[
            ("MANUAL", "User manual\nThe heat pump heats the house and the hot water.\nThe heat pump uses the night setback temperature."),
            ("A", "Fees\nA service costs 40 pounds."),
        ]);
        let q = Question::new("Can I use the heat pump to heat my swimming pool?", &store);
        assert!(q
            .misses("The heat pump uses the night setback temperature.")
            .is_some());
    }

    #[test]
    fn a_list_of_names_is_one_span() {
        let line = "Dogs may run off the lead at Ashby Common, Brindle Meadows and Quarry Hill.";
        let whole = clauses(line)
            .iter()
            .any(|&(a, b)| line[a..b].contains("Ashby Common, Brindle Meadows and Quarry Hill"));
        assert!(whole, "{:?}", clauses(line));
        // Clauses that are not names still part.
        assert_eq!(
            clauses("Fees are due monthly, and late fees apply.").len(),
            2
        );
    }

    #[test]
    fn a_rule_that_allows_or_forbids_settles_whether_one_may() {
        let store = store_of(&[
            ("RULES", "Allotment rules\nDogs are not allowed on any allotment site.\nTenants must keep paths clear."),
            ("PARKS", "Park bylaws\nFlying a drone in a park needs written permission.\nHollins Park closes at dusk."),
            ("A", "Fees\nA plot costs 40 pounds."),
            ("B", "Events\nEvents need a permit."),
        ]);
        let q = Question::new("Can I bring my dog to my allotment?", &store);
        assert!(q
            .misses("Dogs are not allowed on any allotment site.")
            .is_none());
        assert!(q.misses("Tenants must keep paths clear.").is_some());
        // Asked whether one *must*, a rule about something else does not settle it.
        let must = Question::new("Do I have to bring my dog to my allotment?", &store);
        assert!(!must.permission);
        // An adverb before the verb says how: the verb asked is the one after it, and a
        // rule saying what is accepted settles it.
        let store = store_of(&[
            ("PAY", "Paying for a plot\nCash is no longer accepted at the office.\nHand in your form at the office."),
            ("A", "Fees\nA plot costs 40 pounds."),
        ]);
        let q = Question::new("Can I just pay cash at the office?", &store);
        assert_eq!(q.predicate.as_deref(), Some(stem("pay").as_str()));
        assert!(q
            .misses("Cash is no longer accepted at the office.")
            .is_none());
        assert!(q.misses("Hand in your form at the office.").is_some());
    }

    #[test]
    fn a_rule_for_any_thing_of_a_kind_holds_for_the_one_named() {
        assert!(states_any(
            "Flying a drone in a park needs written permission.",
            "park"
        ));
        assert!(states_any("All parks close at dusk.", "park"));
        assert!(!states_any("Hollins Park closes at dusk.", "park"));
        assert!(!states_any("The park closes at dusk.", "park"));
    }
}
/// How documents written as people write them are read: tables as records, ages, group
/// sizes and days against their ranges, clipped words, pronouns and typed contractions.
#[cfg(test)]
mod natural_documents {
    use super::*;
    use crate::lexicon::{
        age_ranges, age_ranges_in_months, date_ranges, dates_held, days_stated, length_ranges,
        measure_ranges, party_ranges, release_ranges, stated_age, stated_age_in_months,
        stated_dates, stated_lengths, stated_measures, stated_party, stated_releases, year_ranges,
    };
    use crate::SourceDocument;

    fn prices() -> SourceStore {
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "prices",
                "v1",
                true,
                "Prices (fictional)\nRoom type: Private twin room; Sleeps: 2; Weekday (Sun–Thu): £58; Weekend (Fri–Sat): £69; Member price: £52\nRoom type: Family room; Sleeps: up to 4; Weekday (Sun–Thu): £84; Weekend (Fri–Sat): £98; Member price: £76\nRoom type: Large family room; Sleeps: up to 6; Weekday (Sun–Thu): £108; Weekend (Fri–Sat): £134; Member price: £101\nMembership: Young Explorer; Who it covers: one person aged 16–25; Price per year: £11\nMembership: Individual; Who it covers: one adult aged 26 or over; Price per year: £18\nGroup size: 12–19; Discount on weekday prices: 6%\nGroup size: 20–39; Discount on weekday prices: 10%\nDogs are welcome at six hostels.\nThey must sleep in a private room (never in a dormitory).",
            ))
            .unwrap();
        store
    }

    /// A store of one document in force, version `v1`.
    /// `text` as version v1, in force, of `source`.
    fn in_force(source: &str, text: &str) -> SourceDocument {
        SourceDocument::new(source, "v1", true, text)
    }

    fn one(source: &str, text: &str) -> SourceStore {
        let mut store = SourceStore::new();
        store.insert(in_force(source, text)).unwrap();
        store
    }

    /// [`one`], among twenty other lines, so that the names it states are rare ones.
    fn one_among_rules(source: &str, text: &str) -> SourceStore {
        let mut store = one(source, text);
        super::tests::insert_rules(&mut store);
        store
    }

    fn line(store: &SourceStore, start: &str) -> String {
        store
            .documents()
            .flat_map(|d| d.lines().iter())
            .find(|l| l.starts_with(start))
            .unwrap()
            .clone()
    }

    #[test]
    fn a_notices_subject_line_names_what_its_sentences_are_about() {
        let notice = in_force("notice", "SERVICE NOTICE SN-12\nIssued: 4 May\nSubject: Closure of Eastgate Pool, Marbury\n\nThe pool will close from 1 June and reopen on 2 September, once the new filters have been fitted and tested by the contractor.\nThe closure is needed so that the filters can be replaced.",
        );
        assert_eq!(
            notice.about().as_deref(),
            Some("SERVICE NOTICE SN-12 Closure of Eastgate Pool, Marbury")
        );
        // A `Subject:` line after the first sentence of prose is no header.
        let late = in_force("memo", "Memo\nThe pool will close from 1 June and reopen on 2 September, once the new filters are in.\nSubject: filters",
        );
        assert_eq!(late.about().as_deref(), Some("Memo"));
        let mut store = SourceStore::new();
        store.insert(notice).unwrap();
        let why = line(&store, "The closure is needed");
        for question in [
            "Why is Eastgate shutting this summer?",
            "When does the Marbury pool open again?",
        ] {
            let q = Question::new(question, &store);
            assert!(q.names_stated(&why, "notice"), "{question}");
        }
    }

    #[test]
    fn what_a_heading_says_its_document_applies_to_is_named_by_each_line() {
        let guide = in_force("guide", "Setting up Fernhollow Relay 4\nApplies to Fernhollow Relay 4.1 on Windows and macOS.\n\nThe relay keeps its settings in one file, which it reads again whenever the file changes on disk.\nSettings: C:\\ProgramData\\Relay\\relay.ini, read at start.",
        );
        assert_eq!(
            guide.scope().as_deref(),
            Some("Fernhollow Relay 4.1 on Windows and macOS.")
        );
        let notice = in_force("notice", "OPERATIONS NOTICE\nApplies to:  Brackwater Lido, Quay Road\n\nThe lido will stay shut while the boiler is replaced, which is expected to take about six weeks from the start of March.\nThe lido reopens on 14 April.",
        );
        assert_eq!(
            notice.scope().as_deref(),
            Some("Brackwater Lido, Quay Road")
        );
        // A document that says it in prose has no scope in its heading.
        let prose = in_force("policy", "Expenses\nThis policy explains what we pay for when you travel, and it applies to every employee and contractor.\nApplies to: the board",
        );
        assert_eq!(prose.scope(), None);
        // A letter whose lower case is longer than itself is read, not cut mid-character.
        let dotted = in_force("dotted", "Notice\nApplies to İzmir and Ödemiş");
        assert_eq!(dotted.scope().as_deref(), Some("İzmir and Ödemiş"));
        let short = in_force("short", "Notice\nApplİ");
        assert_eq!(short.scope(), None);
        let mut store = SourceStore::new();
        for d in [guide, notice, prose] {
            store.insert(d).unwrap();
        }
        let settings = line(&store, "Settings:");
        let q = Question::new("Where does the relay keep its settings on Windows?", &store);
        assert!(q.names_stated(&settings, "guide"));
        let q = Question::new("Where does the relay keep its settings on Linux?", &store);
        assert!(!q.names_stated(&settings, "guide"));
        let reopens = line(&store, "The lido reopens");
        let q = Question::new("When will Brackwater Lido open again?", &store);
        assert!(q.names_stated(&reopens, "notice"));
    }

    #[test]
    fn a_record_keyed_by_another_member_of_its_series_is_about_that_one() {
        let store = prices();
        let family = line(&store, "Room type: Family room");
        let large = line(&store, "Room type: Large family room");
        let twin = line(&store, "Room type: Private twin");
        // `family room` lies inside `large family room`: the longer one is named.
        let q = Question::new("What does the large family room cost on a Friday?", &store);
        assert_eq!(q.member_fits(&large), Some(true));
        assert_eq!(q.member_fits(&family), Some(false));
        assert!(!q.fits(&twin));
        let q = Question::new("How much is a family room for one night?", &store);
        assert_eq!(q.member_fits(&family), Some(true));
        assert_eq!(q.member_fits(&large), Some(false));
        // Prose naming the member is about it; a question naming none leaves every row.
        assert_eq!(
            q.member_fits(
                "Family rooms must be booked by phone and a family room is for one family."
            ),
            Some(true)
        );
        let q = Question::new("Which room sleeps the most people?", &store);
        assert_eq!(q.member_fits(&large), None);
        assert!(q.fits(&family));
    }

    #[test]
    fn a_setting_named_as_a_machine_writes_it_is_asked_about() {
        let store = one("config", "Configuration reference\nKey: server.port; Default: 8471\nKey: server.max_jobs; Default: 4\nThe file is read from /etc/app/app.toml at start.");
        // A setting no source writes is one they cannot answer about.
        let q = Question::new(
            "What's the default value of network.proxy in app.toml?",
            &store,
        );
        assert!(!q.names_stated("Key: server.port; Default: 8471", "config"));
        // One they write is what is asked about, not a place to look.
        let q = Question::new("What is the default of server.port?", &store);
        assert!(
            q.terms().iter().any(|t| t.starts_with("port")),
            "{:?}",
            q.terms()
        );
        assert!(q.names_stated("Key: server.port; Default: 8471", "config"));
        let q = Question::new(
            "How many jobs does server.max_jobs allow by default?",
            &store,
        );
        assert!(q.names_stated("Key: server.max_jobs; Default: 4", "config"));
        assert_eq!(
            identifiers("e.g. version 3.2.1 of app.toml, max_jobs"),
            ["app.toml", "max_jobs"]
        );
        // Where a program keeps a thing is a path.
        let q = Question::new("Where does server.port get written down?", &store);
        assert_eq!(
            q.misses("It is written to /etc/app/app.toml at start."),
            None
        );
        // A list keyed by bare labels under a heading naming its series states each member.
        let store = one(
            "cli",
            "Manual\nEXIT STATUS\n0: success\n4: repository locked by another process",
        );
        let q = Question::new(
            "The backup exited with status 4, what does that mean?",
            &store,
        );
        assert_eq!(q.misses("4: repository locked by another process"), None);
        assert!(q.misses("0: success").is_some());
    }

    #[test]
    fn a_records_field_answers_with_whose_it_is() {
        let store = prices();
        let twin = line(&store, "Room type: Private twin");
        let member = Question::new(
            "im a member, whats the price for a private twin room per night?",
            &store,
        );
        assert_eq!(
            member.spans(&twin)[0],
            "Room type: Private twin room; Member price: £52"
        );
        // The day asked for picks the column whose days hold it.
        let wednesday = Question::new(
            "What does a private twin room cost on a Wednesday night?",
            &store,
        );
        assert_eq!(
            wednesday.spans(&twin)[0],
            "Room type: Private twin room; Weekday (Sun–Thu): £58"
        );
        let weekend = Question::new(
            "What does a private twin room cost a night over the weekend?",
            &store,
        );
        assert_eq!(
            weekend.spans(&twin)[0],
            "Room type: Private twin room; Weekend (Fri–Sat): £69"
        );
    }

    #[test]
    fn the_askers_age_group_and_day_rule_out_rows_for_others() {
        let store = prices();
        let young = line(&store, "Membership: Young");
        let adult = line(&store, "Membership: Individual");
        let q = Question::new("I'm 22. Which membership would I get?", &store);
        assert!(q.fits(&young) && !q.fits(&adult));
        assert_eq!(q.fitted(&young), 1);
        let small = line(&store, "Group size: 12");
        let large = line(&store, "Group size: 20");
        let q = Question::new(
            "We're a group of 25 students. Do we get a discount?",
            &store,
        );
        assert!(!q.fits(&small) && q.fits(&large));
        let four = line(&store, "Room type: Family room");
        let six = line(&store, "Room type: Large family room");
        let q = Question::new("We're a family of six. What does one room cost?", &store);
        assert!(!q.fits(&four) && q.fits(&six));
        // The judge holds a citation to the same rule.
        let cited = [("prices", "v1", adult.as_str())];
        assert!(
            !Question::new("I'm 22. Which membership would I get?", &store)
                .judge("Membership: Individual", &cited, &store, "/citations")
                .is_empty()
        );
    }

    #[test]
    fn measures_and_years_are_read_as_ranges_of_their_units() {
        assert_eq!(
            stated_measures(
                "We've one permit; my other car does 150g/km CO2, and she weighs 18 kilos"
            ),
            [("g/km".to_owned(), 150.0), ("g".to_owned(), 18000.0)]
        );
        // A number in a name measures nothing, a verb is no unit, and a bound the question
        // states is what it asks about.
        assert!(stated_measures("What does a colour A4 violin cost in VELA-2?").is_empty());
        assert!(stated_measures("We're a group of 12 arriving Friday").is_empty());
        assert!(stated_measures("How many had ALT above 3 times the limit?").is_empty());
        assert_eq!(
            measure_ranges("Band: C; CO2 emissions: 111–170 g/km; 1st permit: £80"),
            [("g/km".to_owned(), 111.0, 170.0)]
        );
        // The words that state the asker's measure are the asker's.
        assert_eq!(
            measure_words("She weighs 30 kilos, and it is worth about £7,000"),
            ["kilos", "weighs", "£", "worth"]
        );
        // A measure meets another unit of its kind.
        assert_eq!(
            stated_measures("a 1.8 litre engine"),
            [("ml".to_owned(), 1800.0)]
        );
        assert_eq!(
            measure_ranges("banded by engine size (up to 1549cc is band C)"),
            [("ml".to_owned(), 0.0, 1549.0)]
        );
        // A sum of money is a measure in its currency.
        assert_eq!(
            stated_measures("Everything I'm storing is worth about £7,000."),
            [("£".to_owned(), 7000.0)]
        );
        assert_eq!(
            measure_ranges("Cover level: £5,001 – £10,000; Weekly premium: £6.75"),
            [("£".to_owned(), 5001.0, 10000.0)]
        );
        let ranges = measure_ranges("Weight: up to 10 kg; over 45 kg; 171 g/km and over; 25kg+");
        assert_eq!(ranges.len(), 4, "{ranges:?}");
        assert!(ranges[0].1 == 0.0 && ranges[0].2 == 10_000.0);
        assert!(ranges[1].1 > 45_000.0 && ranges[1].2.is_infinite());
        assert!(ranges[2].1 == 171.0 && ranges[3].1 == 25_000.0);
        // Lengths of time, ages and clock times have readings of their own.
        assert!(measure_ranges("Notice: 2 to 6 days; aged 16–25; open 08:00-16:00").is_empty());
        assert_eq!(year_ranges("for the 2025 season"), [(2025, 2025)]);
        assert_eq!(year_ranges("the 2025-26 calendar"), [(2025, 2026)]);
        assert_eq!(
            year_ranges("Vehicles registered before March 2001, or before 2001"),
            [(1900, 2001), (1900, 2000)]
        );
        assert_eq!(year_ranges("since 2019"), [(2019, 2100)]);
        let store = one(
            "permits",
            "Residents' permits\nBand: C; CO2 emissions: 111–170 g/km; 1st permit: £80; 2nd permit: £120\nBand: D; CO2 emissions: 171 g/km and over; 1st permit: £115; 2nd permit: £165\nA subscription costs £52 per bin for the 2025 season.",
        );
        let q = Question::new(
            "What would a 2nd permit cost for my car? It does 150g/km CO2.",
            &store,
        );
        let c = line(&store, "Band: C");
        let d = line(&store, "Band: D");
        assert_eq!(q.measure_fits(&c), Some(true));
        assert_eq!(q.measure_fits(&d), Some(false));
        assert!(!q.fits(&d));
        assert_eq!(q.spans(&c)[0], "Band: C; 2nd permit: £120");
        // A range of the asker's measure picks the row, not what of it is asked.
        let castration = "Procedure: Castration; Weight: 25.1–45 kg; Price: £398";
        let dog = Question::new(
            "How much is a cremation for a 30kg dog?",
            &one("p", castration),
        );
        assert_eq!(dog.measure_fits(castration), Some(true));
        assert!(dog.misses(castration).is_some());
        let q = Question::new("What did a bin cost per bin last year, in 2024?", &store);
        assert_eq!(
            q.year_fits("A subscription costs £52 per bin for the 2025 season."),
            Some(false)
        );
        assert_eq!(q.year_fits("A bin costs £44."), None);
    }

    #[test]
    fn a_year_a_superseded_version_applied_in_asks_for_it() {
        let mut store = SourceStore::new();
        for (version, in_force, effective, until, text) in [
            (
                "v1",
                false,
                "2024-01-08",
                Some("2025-01-05"),
                "Terms, 2024 season\nA bin costs £44 per year.",
            ),
            (
                "v2",
                true,
                "2025-01-06",
                None,
                "Terms, 2025 season\nA bin costs £52 per year.",
            ),
        ] {
            store
                .insert(
                    SourceDocument::new("terms", version, in_force, text)
                        .applied(Some(effective), until),
                )
                .unwrap();
        }
        assert!(Question::new("What did a bin cost in 2024?", &store).asks_earlier_version());
        assert!(!Question::new("What does a bin cost in 2025?", &store).asks_earlier_version());
        assert!(!Question::new("What does a bin cost?", &store).asks_earlier_version());
        assert!(Question::text_asks_earlier_version("a bin in 2024", &store));
        // `the 2024 terms` names that version; it is no amount of terms a line must state.
        let q = Question::new("What did a bin cost under the 2024 terms?", &store);
        assert!(q.qualifiers.is_empty(), "{:?}", q.qualifiers);
    }

    #[test]
    fn the_askers_situation_picks_one_of_a_lines_values() {
        let store = one(
            "fees",
            "Fees\nA consultation out of hours is charged a surcharge of £145 on weekday evenings, or £189 on Sundays.\nsite: North; sunday: gate 08:00-18:00, office 10:00-14:00",
        );
        let q = Question::new(
            "It's sunday afternoon. How much extra is the out of hours consultation?",
            &store,
        );
        let spans = q.spans(
            "A consultation out of hours is charged a surcharge of £145 on weekday evenings, or £189 on Sundays.",
        );
        assert!(
            spans[0].contains("£189") && !spans[0].contains("£145"),
            "{spans:?}"
        );
        // Unless what is asked is said of the later value alone.
        let q = Question::new(
            "What time does the office open on sundays at North?",
            &store,
        );
        let spans = q.spans("site: North; sunday: gate 08:00-18:00, office 10:00-14:00");
        assert!(spans[0].contains("office 10:00"), "{spans:?}");
    }

    /// A notice's kind heads its subject (`CUSTOMER NOTICE: STORM OTTILIE`), and its
    /// signature says who signed it; a limit asked (`the last date`) is stated by a clause
    /// stating one; a measure by its unit.
    #[test]
    fn a_notice_is_signed_by_its_signature_and_a_limit_is_stated_as_one() {
        let store = one(
            "notice",
            "THORNBURY MUTUAL\nCUSTOMER NOTICE: STORM OTTILIE - CLAIMS SURGE\nStorm Ottilie crossed our area on Friday 21 November 2025, with gusts of up to 83 mph recorded at the coast.\nFor Storm Ottilie we will accept claims reported up to and including 31 January 2026.\nMaren Ashdown, Head of Claims",
        );
        let q = Question::new("Who signed the Storm Ottilie notice?", &store);
        assert_eq!(
            q.spans_in("Maren Ashdown, Head of Claims", Some("notice"))[0],
            "Maren Ashdown, Head of Claims"
        );
        let q = Question::new(
            "what's the last date I can report damage from Storm Ottilie?",
            &store,
        );
        let line =
            "For Storm Ottilie we will accept claims reported up to and including 31 January 2026.";
        assert_eq!(q.misses_in(line, Some("notice")), None);
        let q = Question::new("What wind speed did Storm Ottilie reach?", &store);
        let line = "Storm Ottilie crossed our area on Friday 21 November 2025, with gusts of up to 83 mph recorded at the coast.";
        assert_eq!(q.misses_in(line, Some("notice")), None);
    }

    /// A rate asked per one period is not answered by a rate per another.
    #[test]
    fn a_rate_per_another_period_does_not_answer() {
        assert_eq!(
            rate_periods("£1.80 per dehumidifier per day"),
            BTreeSet::from(["day"])
        );
        assert_eq!(
            rate_periods("£120 a year, or £10.50/month"),
            BTreeSet::from(["month", "year"])
        );
        assert!(rate_periods("Room on the 2nd floor costs £40.").is_empty());
        let store = one(
            "extras",
            "Extras\nDrying equipment is paid at £1.80 per dehumidifier per day.\nHome business equipment cover costs £35 a year.",
        );
        let q = Question::new(
            "How much is the business equipment add-on per year?",
            &store,
        );
        assert!(q
            .misses("Drying equipment is paid at £1.80 per dehumidifier per day.")
            .is_some_and(|m| m.contains("per year")));
        assert_eq!(
            q.misses("Home business equipment cover costs £35 a year."),
            None
        );
    }

    /// "What does AHP mean?" is answered by the line that says what it stands for, with
    /// that definition alone.
    #[test]
    fn a_code_asked_the_meaning_of_is_answered_by_its_definition() {
        let store = one(
            "bins",
            "Bins\nPurple AHP sacks are free for approved households.\nAbbreviations: DMR = dry mixed recycling · AHP = absorbent hygiene products · CTR = Council Tax Reduction",
        );
        let q = Question::new("what does AHP mean on the bins page", &store);
        assert_eq!(q.defines(), Some("AHP"));
        assert!(q
            .misses("Purple AHP sacks are free for approved households.")
            .is_some());
        assert_eq!(
            q.spans("Abbreviations: DMR = dry mixed recycling · AHP = absorbent hygiene products · CTR = Council Tax Reduction")[0],
            "AHP = absorbent hygiene products"
        );
        assert_eq!(
            Question::new("How much are AHP sacks?", &store).defines(),
            None
        );
    }

    /// Values labelled with whom they are for are read one by one.
    #[test]
    fn a_labelled_list_gives_the_value_of_the_member_asked() {
        assert_eq!(
            labelled_values("Cash up to £250 (Essentials), £500 (Standard) or £1,000 (Premier)."),
            Some((
                "Cash up to",
                vec![
                    ("£250 (Essentials)", "Essentials"),
                    ("£500 (Standard)", "Standard"),
                    ("£1,000 (Premier)", "Premier")
                ]
            ))
        );
        assert_eq!(labelled_values("Open daily (except Mondays)."), None);
        assert_eq!(
            labelled_values("Bring ID (a passport) and proof of address (a bill)."),
            None
        );
        let store = one(
            "wording",
            "Policy wording\nCover level: Essentials; Buildings: £200\nCover level: Standard; Buildings: £260\nCover level: Premier; Buildings: £365\nCash up to £250 (Essentials), £500 (Standard) or £1,000 (Premier).\nThe EoW excess is £450 (Essentials and Standard) or £350 (Premier), plus any voluntary excess.",
        );
        let q = Question::new("How much cash is covered on a Premier policy?", &store);
        assert_eq!(
            q.spans("Cash up to £250 (Essentials), £500 (Standard) or £1,000 (Premier).")[0],
            "Cash up to £1,000 (Premier)"
        );
    }

    /// A code written out twice stands for its fuller name, whichever document comes first:
    /// the store is read in one order, and the answer does not depend on it.
    #[test]
    fn a_code_written_out_twice_stands_for_its_fuller_name() {
        for (first, second) in [("a-parking", "b-hours"), ("b-parking", "a-hours")] {
            let mut store = SourceStore::new();
            store
                .insert(SourceDocument::new(
                    first,
                    "v1",
                    true,
                    "Parking\n| Ashmere (ASH) | 45 spaces |",
                ))
                .unwrap();
            store
                .insert(SourceDocument::new(second, "v1", true, "Campuses\n- ASH = Ashmere Centre, Ashmere Road\nCampus: ASH; Friday: 09:30–15:00"))
                .unwrap();
            assert_eq!(
                abbreviations_of(&store).get("ASH").map(String::as_str),
                Some("Ashmere Centre"),
                "{first} read before {second}"
            );
        }
    }

    #[test]
    fn abbreviations_and_a_records_other_fields_pick_the_value_asked_for() {
        let store = one(
            "prices",
            "Unit prices\nThe first price applies at Wetherstow (WET) and Caddon Bridge (CAD); Hollinsford (HOL) has its own.\nUnit: Medium; Floor area: 36–60 sq ft; Roughly holds: a one-bedroom flat; Weekly (WET, CAD): £23.50; Weekly (HOL): £19.20\nUnit: Large; Floor area: 61–85 sq ft; Roughly holds: a two-bedroom flat; Weekly (WET, CAD): £31.40; Weekly (HOL): £26.10\nUnit: Jumbo; Floor area: 121–175 sq ft; Roughly holds: a house; Weekly (WET, CAD): £54.80; Weekly (HOL): £45.60\nPrices include VAT.\nYou pay every 4 weeks.\nA fee of £12 is charged once.\nLockers are excluded from offers.\nStudents get 25% off.\nGates open at 06:00.\nOffices close at 17:00.\nBring photo ID.\nKeep your PIN private.",
        );
        let large = "Unit: Large; Floor area: 61–85 sq ft; Roughly holds: a two-bedroom flat; Weekly (WET, CAD): £31.40; Weekly (HOL): £26.10";
        let q = Question::new(
            "What's the weekly price at caddon bridge for a 2 bedroom flat?",
            &store,
        );
        assert!(q.names_stated(large, "prices"));
        assert_eq!(q.spans(large)[0], "Unit: Large; Weekly (WET, CAD): £31.40");
        let q = Question::new(
            "We're putting a two bed flat into storage at Hollinsford. How much is that a week?",
            &store,
        );
        assert_eq!(q.spans(large)[0], "Unit: Large; Weekly (HOL): £26.10");
        // A field that names someone or states a value is no description of the row: the
        // address naming the town does not answer who the first aider is.
        let sites = one(
            "sites",
            "Sites\ncode: QR-BRS; town: Bristol; address: Unit 2, Temple Gate, Bristol; first_aider: Hattie Okonjo\ncode: QR-HUD; town: Huddersfield; address: Bay 3, Colne Valley, Huddersfield; first_aider: Maeve Duckworth",
        );
        let q = Question::new("Who's the first aider in the Bristol office?", &sites);
        let bristol = line(&sites, "code: QR-BRS");
        assert!(
            q.spans(&bristol)[0].contains("Hattie Okonjo"),
            "{:?}",
            q.spans(&bristol)
        );
        // A measure outside every band stated is one the sources give nothing for.
        let q = Question::new(
            "What would a unit of around 250 sq ft cost per week?",
            &store,
        );
        assert!(q
            .misses("Students get 25% off.")
            .is_some_and(|m| m.contains("250")));
        let q = Question::new("What would a unit of about 40 sq ft cost per week?", &store);
        assert_eq!(
            q.misses("Unit: Medium; Floor area: 36–60 sq ft; Roughly holds: a one-bedroom flat; Weekly (WET, CAD): £23.50; Weekly (HOL): £19.20"),
            None
        );
    }

    #[test]
    fn a_contact_asked_for_is_stated_in_its_form_and_a_share_answers_how_much_of() {
        let store = one(
            "contacts",
            "Contacts\nClinic: Quillford Surgery, 3 Mercer Street, Quillford\nEmail the surgery at quillford@example.org.\nCall the emergency line on 01632 960999.\nNotice given: 21–41 days; Refund of hire charge: 50%",
        );
        let q = Question::new(
            "What's the email address for the Quillford surgery?",
            &store,
        );
        assert!(q
            .misses("Clinic: Quillford Surgery, 3 Mercer Street, Quillford")
            .is_some_and(|m| m.contains("email")));
        assert_eq!(
            q.misses("Email the surgery at quillford@example.org."),
            None
        );
        let q = Question::new("What number do I ring in an emergency?", &store);
        assert!(q
            .misses("Call the emergency line on 01632 960999.")
            .is_none());
        assert!(q.misses("The emergency line is open all night.").is_some());
        // To get hold of someone is to contact them, which a number is for.
        let q = Question::new("What number do I ring to get hold of a warden?", &store);
        assert_eq!(
            q.misses("Wardens can be reached on 01632 960 777 every day."),
            None
        );
        assert!(q.misses("Wardens patrol every day.").is_some());
        let q = Question::new(
            "We cancel 30 days before the event. How much of the hire charge do we get back?",
            &store,
        );
        assert_eq!(
            q.misses("Notice given: 21–41 days; Refund of hire charge: 50%"),
            None
        );
    }

    #[test]
    fn words_meet_as_they_are_meant() {
        // An ordinal in digits is its word; `care` is not `car`; kin are the asker's.
        assert_eq!(stem("1st"), stem("first"));
        assert_eq!(stem("3rd"), stem("third"));
        assert_ne!(stem("care"), stem("vehicle"));
        assert_eq!(stem("car"), stem("vehicle"));
        assert_eq!(stem("closed"), stem("shut"));
        // A kind of an everyday animal meets it; a light verb asks nothing.
        assert_eq!(stem("spaniels"), stem("dog"));
        assert_ne!(stem("territory"), stem("terrier"));
        assert!(is_light_word("comes"));
        // `start the whole course again` does not restart a `recourse`; `Wi-Fi` stays one
        // word when a verb in the line is done again.
        assert!(!reading("start the whole course again").contains("recourse"));
        assert!(reading("the Wi-Fi terms; accept them, then open it again").contains("WiFi"));
        assert_eq!(reading("Is there a sign-up fee?"), "Is there a join fee");
        assert!(place_nouns("Line your kitchen caddy with newspaper").is_empty());
        assert_eq!(place_nouns("Tram stops have ticket machines"), ["stops"]);
        assert_eq!(
            place_nouns("Keep it in the kitchen cupboard"),
            ["kitchen", "cupboard"]
        );
        let store = one(
            "visitors",
            "Visitor permits\nA book costs £15, or £7.50 if someone in the household is aged 65+.",
        );
        let q = Question::new(
            "My nan lives with us and she's 70. How much is a book of visitor permits?",
            &store,
        );
        assert!(q.unheard.is_empty(), "{:?}", q.unheard);
        assert_eq!(
            q.misses("A book costs £15, or £7.50 if someone in the household is aged 65+."),
            None
        );
        let q = Question::new(
            "Who's in charge at the depot?",
            &one("d", "Depot\nSupervisor: Gemma Rusk"),
        );
        assert_eq!(q.misses("Supervisor: Gemma Rusk"), None);
    }

    #[test]
    fn records_refer_to_others_by_id_and_names_are_known_in_lower_case() {
        let mut store = SourceStore::new();
        store
            .insert(
                SourceDocument::new(
                    "clinics",
                    "v1",
                    true,
                    "id: pl; name: Pellinghurst Surgery; town: Pellinghurst; sunday: closed\nid: bw; name: Brackwater Hospital; town: Brackwater; sunday: 10:00-12:00",
                )
                .records(),
            )
            .unwrap();
        store
            .insert(
                SourceDocument::new(
                    "staff",
                    "v1",
                    true,
                    "id: st04; name: Priya Castellane; role: head nurse; clinic: bw\nid: st06; name: Dr Aniket Solberg; role: lead vet; clinic: pl",
                )
                .records(),
            )
            .unwrap();
        store
            .insert(SourceDocument::new(
                "notes",
                "v1",
                true,
                &format!(
                    "Notes\nThe Kettlemoor Bunkhouse is shut in winter.\n{}",
                    // Names are told from words stated by few lines.
                    [
                        "Parking is free.",
                        "Dogs must be on a lead.",
                        "Cards are taken."
                    ]
                    .repeat(5)
                    .join("\n")
                ),
            ))
            .unwrap();
        // `pellinghurst`, written in lower case, is a name the sources only capitalise; a
        // record of Brackwater's staff does not state it, one that refers to Pellinghurst's
        // clinic by its id does.
        let q = Question::new("who is the head nurse at pellinghurst?", &store);
        assert_eq!(q.proper, ["pellinghurst"]);
        let nurse = line(&store, "id: st04");
        let lead = line(&store, "id: st06");
        assert!(!q.names_stated(&nurse, "staff"));
        assert!(q.names_stated(&lead, "staff"));
        // `Bunkhouse` only ever follows another name: it is a kind of place, no name.
        let q = Question::new("is the kettlemoor bunkhouse open in winter?", &store);
        assert_eq!(q.proper, ["kettlemoor"]);
        // A record led by an opaque id answers with its name too.
        let q = Question::new("Who is the lead vet at Pellinghurst?", &store);
        assert_eq!(
            q.spans(&lead)[0],
            "id: st06; name: Dr Aniket Solberg; role: lead vet"
        );
    }

    #[test]
    fn dates_are_read_as_ranges_that_hold_the_askers() {
        assert_eq!(
            stated_dates("what day will my bins be emptied the week of 13th october 2025?"),
            [(Some(2025), 10, 13)]
        );
        assert_eq!(stated_dates("Quillford is shut in June."), [(None, 6, 0)]);
        // `may` is the verb unless a day or a year goes with it.
        assert!(stated_dates("May I bring my dog?").is_empty());
        assert_eq!(
            date_ranges("It will be closed from Monday 29 September 2025 to Friday 24 October 2025 inclusive."),
            [(Some((Some(2025), 9, 29)), Some((Some(2025), 10, 24)))]
        );
        assert_eq!(
            date_ranges("hours_winter: closed (Oct-Mar); closed 9–28 June"),
            [
                (Some((None, 10, 0)), Some((None, 3, 0))),
                (Some((None, 6, 9)), Some((None, 6, 28)))
            ]
        );
        assert_eq!(
            date_ranges("Collections resume from 6 January."),
            [(Some((None, 1, 6)), None)]
        );
        let closure = date_ranges("closed from 29 September 2025 to 24 October 2025");
        assert_eq!(dates_held(&[(Some(2025), 10, 13)], &closure), Some(true));
        assert_eq!(dates_held(&[(Some(2025), 11, 3)], &closure), Some(false));
        assert_eq!(dates_held(&[(None, 10, 0)], &closure), Some(true));
        // Across the new year: November is in `Oct-Mar`, June is not.
        let winter = date_ranges("closed (Oct-Mar)");
        assert_eq!(dates_held(&[(None, 11, 0)], &winter), Some(true));
        assert_eq!(dates_held(&[(None, 6, 0)], &winter), Some(false));
        assert_eq!(dates_held(&[], &winter), None);
        let store = one(
            "notices",
            "Notices\nThe depot will be closed from 29 September 2025 to 24 October 2025.\nThe hall is closed from 1 to 14 December 2025 for repairs.",
        );
        let q = Question::new("Is the depot open on 13 October 2025?", &store);
        let depot = line(&store, "The depot");
        let hall = line(&store, "The hall");
        assert_eq!(q.date_fits(&depot), Some(true));
        assert_eq!(q.date_fits(&hall), Some(false));
        assert_eq!(q.held(&depot), 1);
    }

    #[test]
    fn a_question_about_a_documents_subject_asks_only_the_answers_kind() {
        let mut store = SourceStore::new();
        store
            .insert(SourceDocument::new(
                "plan",
                "v1",
                true,
                "Care plan: terms and conditions, 2025\nPet: Cat; Monthly fee: £14.00",
            ))
            .unwrap();
        store
            .insert(SourceDocument::new(
                "prices",
                "v1",
                true,
                "Price list\nPet: Cat; Consultation: £48.00",
            ))
            .unwrap();
        let q = Question::new("How much is the care plan?", &store);
        let row = "Pet: Cat; Monthly fee: £14.00";
        // Every word asked beyond the subject is the plan's title's: the plan's row answers,
        // a row of another document does not, nor one of a title of another year.
        assert!(q.misses(row).is_some());
        assert_eq!(q.misses_in(row, Some("plan")), None);
        assert!(q
            .misses_in("Pet: Cat; Consultation: £48.00", Some("prices"))
            .is_some());
        let q = Question::new("How much is the care plan in 2026?", &store);
        assert!(q.misses_in(row, Some("plan")).is_some());
    }

    #[test]
    fn ages_group_sizes_and_days_are_read_as_ranges() {
        assert_eq!(stated_age("I'm 22. Which membership?"), Some(22));
        assert_eq!(
            stated_age("How much is breakfast for my 8-year-old?"),
            Some(8)
        );
        assert_eq!(stated_age("I'm 5 minutes late."), None);
        // Ages in months: a baby's, a room's, and a year's read in months.
        assert_eq!(
            stated_age_in_months("What would it cost for my 9-month-old?"),
            Some((9, 9))
        );
        assert_eq!(stated_age_in_months("I'm 22."), Some((264, 275)));
        assert_eq!(
            age_ranges_in_months("Babies under 6 months pay £77."),
            [(0, 5)]
        );
        assert_eq!(
            age_ranges_in_months("room: Minnows; age_group: 6-17 months"),
            [(6, 17)]
        );
        assert!(age_ranges_in_months("The contract runs for 6-12 months.").is_empty());
        assert_eq!(
            age_ranges(
                "Those aged 3 to 15 pay 75%, and they pay in full from their 16th birthday."
            ),
            [(3, 15), (16, 120)]
        );
        assert_eq!(
            age_ranges("Members aged 65 and over pay nothing."),
            [(65, 120)]
        );
        assert_eq!(
            age_ranges("Riders under 16 are never issued a penalty fare."),
            [(0, 15)]
        );
        assert!(age_ranges("Notice given: 2 to 6 days; Refund: 50%").is_empty());
        // A range after the people it is of is of their ages; a count is not.
        assert_eq!(
            age_ranges("Extra: Breakfast (children 3–12); Price: £4"),
            [(3, 12)]
        );
        assert!(age_ranges("Children: 2; Adults: 4; Price: £60").is_empty());
        // Releases: the asker's against a line's ranges.
        assert_eq!(
            stated_releases("We still run 2.9.3 on two servers, with 2.5 GB free."),
            [2_009_003]
        );
        assert_eq!(
            release_ranges("Affected: Server 3.0.0 to 3.2.0, 2.9.0–2.9.4"),
            [(3_000_000, 3_002_000), (2_009_000, 2_009_004)]
        );
        assert_eq!(
            release_ranges("Repositories created before 3.2.0 keep 8 MiB; agents 3.1 or later"),
            [(0, 3_001_999), (3_001_000, u32::MAX)]
        );
        assert!(release_ranges("Fixed in: 3.2.1, 2.9.5").is_empty());
        let store = prices();
        let q = Question::new("When is version 4.0 going to be released?", &store);
        assert_eq!(
            q.release_fits("3.2.0 (2025-05-06): Removed: the dedup key, deprecated since 3.0.0."),
            Some(false)
        );
        assert_eq!(q.release_fits("4.0 (2026-01-10): Added: sync."), Some(true));
        assert_eq!(q.release_fits("Fixed in: 3.2.1, 2.9.5"), None);
        assert_eq!(
            stated_party("We're a group of 25 students arriving Tuesday"),
            Some(25)
        );
        assert_eq!(stated_party("We're a family of six"), Some(6));
        assert_eq!(party_ranges("Group size: 20–39; Discount: 10%"), [(20, 39)]);
        assert_eq!(
            party_ranges("Room type: Family room; Sleeps: up to 4; Price: £9"),
            [(1, 4)]
        );
        assert!(party_ranges("A booking may be for up to 10 nights at one hostel.").is_empty());
        let days = |t: &str| days_stated(t).map(|d| d.iter().filter(|x| **x).count());
        assert_eq!(
            days_stated("Weekday (Sun–Thu): £58"),
            Some([true, true, true, true, false, false, true])
        );
        assert_eq!(days("It is open Tuesday to Friday."), Some(4));
        assert_eq!(days("Reception opens on weekdays."), Some(5));
        assert_eq!(days("Sit in the sun."), None);
        assert!(times("id: FH-03; season: Apr-Oct").contains(&"april".to_owned()));
        assert_eq!(stated_lengths("We were due to arrive in 10 days."), [10]);
        assert_eq!(stated_lengths("I cancelled more than a week before"), [7]);
        assert_eq!(stated_lengths("how much a day for 4 days?"), [4]);
        assert!(stated_lengths("£40 a week, twice a month").is_empty());
        assert!(stated_lengths("my 16 year old").is_empty());
        assert_eq!(
            length_ranges("Notice given: 4 to 13 days; Refund: 50%"),
            [(4, 13)]
        );
        assert_eq!(
            length_ranges("Notice given: 7 days or more; Refund: 100%"),
            [(7, u32::MAX)]
        );
        let store = prices();
        let q = Question::new(
            "We arrive in 10 days. How much do we get back if we cancel?",
            &store,
        );
        assert_eq!(
            q.length_fits("Notice given: 4 to 13 days; Refund: 50%"),
            Some(true)
        );
        assert_eq!(
            q.length_fits("Notice given: 1 to 3 days; Refund: 25%"),
            Some(false)
        );
    }

    #[test]
    fn clipped_words_pronouns_and_bare_contractions_are_read_whole() {
        let store = prices();
        // `dorm` is the sources' `dormitory`, and the line after `Dogs …` is about dogs.
        let q = Question::new("Can my dog sleep in the dorm with me?", &store);
        let they = line(&store, "They must sleep");
        assert!(
            q.names_stated(&they, "prices"),
            "{:?}",
            q.section("prices", &they)
        );
        assert!(q.misses(&they).is_none(), "{:?}", q.misses(&they));
        let known: BTreeSet<String> = [
            "dormitory",
            "dormitories",
            "park",
            "parking",
            "works",
            "workshop",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(unclipped("a dorm bed", &known), "a dormitory bed");
        assert_eq!(
            unclipped("the work at the Park", &known),
            "the work at the Park"
        );
        assert_eq!(
            with_apostrophes("Whats the price, im a member"),
            "What's the price, I'm a member"
        );
        assert_eq!(with_apostrophes("the ill will"), "the ill will");
    }

    /// A notice's `Affected area:` names the place every sentence under it is about; a
    /// record about a named country (`country: Portugal; zone: 1`) lets a line that
    /// speaks of its kind (`Zone 1`) state it; a line that refers back (`If you do not,
    /// …`, `… offer there …`) names what the line before it names.
    #[test]
    fn a_notices_area_a_records_kind_and_a_line_referred_to_state_the_name_asked() {
        let mut store = SourceStore::new();
        for (id, text) in [
            ("notice", "PLANNED WORK NOTICE\nReference: NW-31\nAffected area: Kelsford exchange (Millbank and Upper Tolley)\nContact: Network Operations\n\nWe are replacing the equipment at the exchange overnight, so that the network has more capacity for everyone in the town.\nBecause this is planned work we told you about early, we do not pay automatic compensation for these outages."),
            ("roaming", "Roaming\nid: PT; country: Portugal; zone: 1; partner_network: Lusanet\nid: CH; country: Switzerland; zone: 2; partner_network: Alpenruf\nid: ES; country: Spain; zone: 1; partner_network: Ibercom\nZone: Zone 1; Mobile 6GB: Roam Pass £2.25 a day; Mobile 40GB: Included\nZone: Zone 2; Mobile 6GB: Roam Pass £6.50 a day; Mobile 40GB: Roam Pass £6.50 a day"),
            ("plans", "Plans\n¹ Full Fibre 900 is not sold in Saltmere.\nThe fastest plan we can offer there is Full Fibre 500.\nYou must return your router within 30 days of your service ending.\nIf you do not, we charge £60.00."),
        ] {
            store
                .insert(SourceDocument::new(id, "v1", true, text))
                .unwrap();
        }
        let why = line(&store, "Because this is planned");
        let q = Question::new(
            "Why won't I get compensation during the Millbank work?",
            &store,
        );
        assert!(q.names_stated(&why, "notice"));
        let zone1 = line(&store, "Zone: Zone 1");
        let zone2 = line(&store, "Zone: Zone 2");
        let q = Question::new(
            "Going to Portugal for a week and I'm on the 6GB plan - what will it cost me per day?",
            &store,
        );
        assert_eq!(q.kind(), AnswerKind::Quantity);
        assert!(q.names_stated(&zone1, "roaming"));
        assert!(!q.names_stated(&zone2, "roaming"));
        // Another country's record in the same zone is about that country.
        let spain = line(&store, "id: ES");
        assert!(!q.names_stated(&spain, "roaming"));
        // `week` is the asker's length of stay, not what is asked.
        assert!(!q.beyond().contains(&stem("week")), "{:?}", q.beyond());
        let there = line(&store, "The fastest plan");
        let q = Question::new(
            "i'm in saltmere - what's the quickest package i can get?",
            &store,
        );
        assert!(q.names_stated(&there, "plans"));
        assert_eq!(q.misses_in(&there, Some("plans")), None);
        let charge = line(&store, "If you do not");
        let q = Question::new(
            "I never sent the router back. What's the charge for that?",
            &store,
        );
        assert_eq!(q.misses_in(&charge, Some("plans")), None);
    }

    /// A yes-or-no question names its row (`Wren Hub 6 Pro`) and still asks what the row
    /// must say (`wifi 7`); a brand written with an inner capital (`iPhone`) is a name no
    /// source states; "the most mesh discs" counts discs, so a price is no answer; a
    /// record's field named as the kind asked (`partner_network`) answers "which
    /// network … in Norway".
    #[test]
    fn rows_named_by_a_question_still_answer_only_what_it_asks() {
        let store = one(
            "prices",
            "Prices\nPlan: Full Fibre 500; 12-month contract: £38.50; 24-month contract: £34.99; Router: Wren Hub 6 Pro\nCharge or extra: Extra mesh disc; Price: £4.00 a month\nid: NO; country: Norway; zone: 1; partner_network: Fjordtel; notes: null\nWi-Fi is included.",
        );
        let row = line(&store, "Plan: Full Fibre 500");
        let q = Question::new("Does the Wren Hub 6 Pro support wifi 7?", &store);
        assert!(q.misses(&row).is_some());
        let q = Question::new("How much is an iPhone 16 on a 24 month contract?", &store);
        assert!(!q.names_stated(&row, "prices"));
        let mesh = line(&store, "Charge or extra: Extra mesh disc");
        let q = Question::new(
            "What's the most mesh discs I can rent on one account?",
            &store,
        );
        assert!(q.misses(&mesh).is_some());
        let norway = line(&store, "id: NO");
        let q = Question::new(
            "Which mobile network will my phone connect to in Norway?",
            &store,
        );
        assert_eq!(q.misses(&norway), None);
        // An agreement named by its length: the 2 year contract is the 24-month one.
        let q = Question::new(
            "how much is full fibre 500 a month on the 2 year contract?",
            &store,
        );
        assert_eq!(
            q.spans(&row)[0],
            "Plan: Full Fibre 500; 24-month contract: £34.99"
        );
    }

    /// The heading a line is under says what it is about, for a question answered by an
    /// amount; a thing asked by a name whose head no source states (`a car trailer`) is not
    /// answered by a line that states the modifier (`vehicle`); the most one can spend is
    /// one value.
    #[test]
    fn headings_names_and_limits_of_a_sum() {
        let store = one(
            "terms",
            "Terms\nAutomatic compensation\nIf your broadband stops working for two working days, we pay you £6.10 for each calendar day.\nService: Man and van; Crew and vehicle: 1 person; Per hour: £47\nExpense: Hotel, per night; London: £185; Elsewhere in the UK: £130",
        );
        let pay = line(&store, "If your broadband stops");
        let q = Question::new("How much compensation do you pay per day?", &store);
        assert_eq!(q.misses_in(&pay, Some("terms")), None);
        let van = line(&store, "Service: Man and van");
        let q = Question::new(
            "How much do you charge to hire a car trailer for the day?",
            &store,
        );
        assert!(q.misses(&van).is_some());
        let hotel = line(&store, "Expense: Hotel");
        let q = Question::new(
            "What's the most I can spend on a hotel room in London per night?",
            &store,
        );
        assert_eq!(
            q.spans(&hotel)[0],
            "Expense: Hotel, per night; London: £185"
        );
    }

    /// A question asking a key of a named thing's record (`address`) asks what the record
    /// says, whatever the asker means to do (`send a parcel`), and is answered by that
    /// field; a part of the day (`in the morning`) is what a clock time says.
    #[test]
    fn a_records_key_asked_of_a_named_thing_picks_its_field() {
        let store = one(
            "offices",
            "Offices\ncode: QR-CAM; office: Cambridge; type: research; address: Lab 7, Fenmoor Park, Cambridge CB4 2DW; desks: 43; opening: 07:45-18:30\ncode: QR-LDS; office: Leeds; type: sales; address: 4 Wharf Street, Leeds LS2 7EQ; desks: 60; opening: 08:00-18:00\nEvery office has a first aider.\nVisitors sign in at reception.\nDesks are booked in the app.\nParking is limited.\nThe kitchen closes at 15:00.\nBikes go in the cage.\nLockers are free.\nPets are not allowed.",
        );
        let cam = line(&store, "code: QR-CAM");
        let q = Question::new(
            "I need to send a parcel to the Cambridge office. What's the address?",
            &store,
        );
        assert_eq!(q.misses(&cam), None, "{q:?}");
        assert_eq!(
            q.spans(&cam)[0],
            "code: QR-CAM; address: Lab 7, Fenmoor Park, Cambridge CB4 2DW"
        );
        let q = Question::new(
            "What time does the Cambridge office open in the morning?",
            &store,
        );
        assert_eq!(q.spans(&cam)[0], "code: QR-CAM; opening: 07:45-18:30");
        // Without a key of the record asked, the asker's unheard word still counts.
        let q = Question::new(
            "I need to send a parcel to the Cambridge office. How much does it cost?",
            &store,
        );
        assert!(q.misses(&cam).is_some());
    }

    /// A table's footnote mark (`Group: B²`) is no part of its label; `how much a day` is
    /// a rate, not a length; a short day before its hours (`Sat 09:00–12:00`) is a day; a
    /// field listing its series (`Group: C, D, E`, `Full Fibre 150 and Full Fibre 500`)
    /// states each member, where separate records (`Arm A: …, Arm B: …`) do not.
    #[test]
    fn footnotes_rates_short_days_and_listed_labels() {
        // An amount is not said without the rate the line gives it past what it was.
        assert!(cuts_rate(
            "Late charge now £15 (was £10) for every 10 minutes.",
            "Late charge now £15"
        ));
        assert!(!cuts_rate(
            "Late charge now £15 (was £10).",
            "Late charge now £15"
        ));
        // Of values listed per member of a series after a lead (`About 18,600 households:
        // …`), the one for the member asked, read with the lead.
        let store = one(
            "regions",
            "Regions\nregion: North; office: Alnby\nregion: East; office: Brill\nregion: West; office: Cade\nAbout 9,000 households: 5,000 in the North, 3,000 in the East and 1,000 in the West.",
        );
        let q = Question::new("How many households do you supply in the West?", &store);
        let listed = line(&store, "About 9,000");
        assert_eq!(q.spans(&listed)[0], "1,000 in the West.");
        // A footnote names what the rows carrying its mark name.
        let store = one_among_rules(
            "tariffs",
            "Tariffs\nTariff: Night Saver; Low rate: 14.21p³\nTariff: Flex; Unit: 23.89p²\n² Flex prices change monthly.\n³ Cheap hours: 01:00 to 08:00.",
        );
        let q = Question::new("What hours is the cheap rate on Night Saver?", &store);
        assert!(q.names_stated(&line(&store, "³ Cheap"), "tariffs"));
        assert!(!q.names_stated(&line(&store, "² Flex"), "tariffs"));
        // And a row carrying a mark is read with its footnote: the day it names is stated.
        let dated = one_among_rules(
            "fares",
            "Fares\nTicket: Day return; Peak¹: £12; Off-peak: £8\nTicket: Single; Any time: £5\n¹ Peak: Saturday trains and every train in December.",
        );
        let q = Question::new("What is a day return on Saturday 6 December?", &dated);
        assert!(q.names_stated(&line(&dated, "Ticket: Day return"), "fares"));
        assert!(!q.names_stated(&line(&dated, "Ticket: Single"), "fares"));
        // A mark on a value points to an exception, which names where the value does not hold.
        let excepted = one_among_rules(
            "charges",
            "Charges\nCharge: Standing; Water: £38; Sewerage: £41¹\nCharge: Meter; Water: £2\n¹ In Eastby the sewerage standing charge is £36.",
        );
        let q = Question::new("What is the sewerage standing charge in Eastby?", &excepted);
        assert!(!q.names_stated(&line(&excepted, "Charge: Standing"), "charges"));
        // A name the question writes in a run (`EV Night`) is not stated by another name
        // that shares a word (`Night Saver`); a bracket's abbreviation is the same name.
        let q = Question::new("Why isn't the EV Night tariff sold any more?", &store);
        assert!(!q.names_stated(&line(&store, "Tariff: Night Saver"), "tariffs"));
        assert!(q.names_stated(&line(&store, "³ Cheap"), "tariffs"));
        assert_eq!(
            capital_runs("The Data Monitoring Board (DSMB) met EV Night users."),
            [
                vec!["the", "data", "monitoring", "board"],
                vec!["dsmb"],
                vec!["ev", "night"]
            ]
        );
        let store = one(
            "prices",
            "Prices\nGroup: B²; 1–2 days, per day: £44.00; 3–6 days, per day: £39.50\nGroup: C, D, E; SCDW price per day: £17.00\nid: PNK; town: Pennick; hours: Mon–Fri 08:00–17:00; Sat 09:00–12:00; Sun closed\nArm A: velorabine 10 mg, Arm B: velorabine 25 mg.",
        );
        let b = line(&store, "Group: B");
        let q = Question::new(
            "how much a day would a group B car be if I rent it for 4 days?",
            &store,
        );
        assert_eq!(q.spans(&b), ["Group: B²; 3–6 days, per day: £39.50"]);
        let cde = line(&store, "Group: C, D, E");
        let q = Question::new("What does SCDW cost per day on a group D car?", &store);
        assert_eq!(q.misses(&cde), None);
        let q = Question::new("What does SCDW cost per day on a group F car?", &store);
        assert!(q.misses(&cde).is_some());
        // A count of a unit of measure is written with its unit.
        let q = Question::new(
            "How many miles will a group B car do on a full tank?",
            &store,
        );
        assert!(q.misses(&b).is_some());
        let hours = line(&store, "id: PNK");
        let q = Question::new("what time does Pennick close on a saturday?", &store);
        assert_eq!(q.day_fits(&hours), Some(true));
        assert_eq!(listed_labels("Group: C, D, E", "group"), ["c", "d", "e"]);
        assert_eq!(
            listed_labels("£250 for a car in Groups A to C", "group"),
            ["a", "b", "c"]
        );
        assert_eq!(
            listed_labels("£3.50 on Full Fibre 150 and Full Fibre 500.", "fibr"),
            ["150", "500"]
        );
        assert!(
            listed_labels("Arm A: velorabine 10 mg, Arm B: velorabine 25 mg.", "arm").is_empty()
        );
    }

    #[test]
    fn courtesies_ask_nothing() {
        assert_eq!(
            without_courtesies("Good afternoon. I am hiring a van. What deposit is taken?"),
            "I am hiring a van. What deposit is taken?"
        );
        assert_eq!(
            without_courtesies("Hi team, when is the office open? Thanks in advance!"),
            "when is the office open?"
        );
        assert_eq!(without_courtesies("Hello!"), "Hello!");
        assert_eq!(
            without_courtesies("Is a good day ticket valid?"),
            "Is a good day ticket valid?"
        );
    }

    /// A holiday on a fixed date is read as its date unless the sources write its name; a
    /// temperature is answered by degrees, not by a length; a yes or no asked with what
    /// follows from it (`…, and what does that cost?`) asks for that; `15 yr old` is an age,
    /// not an old version; and `shortest time` asks a length.
    #[test]
    fn questions_read_as_a_member_writes_them() {
        let mut store = SourceStore::new();
        for (id, text) in [
            ("TT", "Timetable\nAll centres are closed on 25 and 26 December.\nThe main pool is kept at 29°C.\nname: Main Centre; pool_length: 25 m"),
            ("LP", "Lost property\nWe do not post lost property, except keys. We can send those by tracked delivery for £4.50."),
            ("TM", "Terms\nMemberships have a minimum term of 3 months."),
        ] {
            store.insert(SourceDocument::new(id, "v1", true, text)).unwrap();
        }
        let never = |_: &str| false;
        assert_eq!(
            with_named_days("Are you open on Boxing Day? Want to swim", &never),
            "Are you open on 26 December? Want to swim"
        );
        assert_eq!(
            with_named_days("Open on boxing day?", &|t: &str| t == "boxing day"),
            "Open on boxing day?"
        );
        let q = Question::new("Are you open on Boxing Day? Want to take the kids", &store);
        assert!(!q.proper.contains(&"want".to_owned()), "{:?}", q.proper);
        assert!(q.unstated.is_empty(), "{:?}", q.unstated);
        let warm = Question::new("What temperature is the water in the main pool?", &store);
        assert!(warm
            .misses("name: Main Centre; pool_length: 25 m")
            .is_some());
        assert_eq!(warm.misses("The main pool is kept at 29°C."), None);
        assert!(states_temperature("kept at 30 °C") && states_temperature("28 degrees"));
        assert!(!states_temperature("25 m long"));
        assert_eq!(
            AnswerKind::of("can you post them to me, and what does that cost?"),
            AnswerKind::Quantity
        );
        assert_eq!(
            AnswerKind::of("Can I claim lunch, and if so how much?"),
            AnswerKind::Quantity
        );
        assert_eq!(AnswerKind::of("Can I post them to you?"), AnswerKind::YesNo);
        let aged = Question::new("Can my 15 yr old come to the class too?", &store);
        assert_eq!(aged.age, Some(15));
        assert!(!aged.asks_earlier_version());
        assert_eq!(
            AnswerKind::of("what's the shortest time I'm tied in for?"),
            AnswerKind::Quantity
        );
        assert_eq!(
            Question::new("what's the shortest time I'm tied in for?", &store).measure,
            Some(Measure::Extent)
        );
        // A noun made of a word the sources write is theirs: `seater` of `Seats: 7`.
        let cars = one("P", "Prices\nGroup: F; Seats: 7; Weekly: £413.00");
        let seater = Question::new("What's the weekly price for your seven-seater?", &cars);
        assert!(seater.unheard.is_empty(), "{:?}", seater.unheard);
        // What the asker says around the asking part is theirs: a word no source states
        // there (`terrified`), a number's word (`4th`) or a length of time (`a 90 minute
        // slot`) does not make the question unanswerable, nor need a line state it.
        let plan = Question::new(
            "Im terrified of the drill. It's a 90 minute slot. How much is the deposit?",
            &store,
        );
        assert!(plan.unheard.is_empty(), "{:?}", plan.unheard);
        assert!(plan.qualifiers.is_empty(), "{:?}", plan.qualifiers);
        let sedation = Question::new("how much is the deposit? Im terrified of the drill", &store);
        assert!(!sedation.asking_stems().contains(&stem("drill")));
        let fourth = Question::new("Is the pool open on the 4th Saturday?", &store);
        assert!(fourth.unheard.is_empty(), "{:?}", fourth.unheard);
        // Who: a name after `at` is where, not who.
        let who = Question::new("Who is the contact for the closure?", &store);
        assert!(who
            .misses("Our branch at Station Yard will be closed for the closure.")
            .is_some());
        assert_eq!(
            who.misses("The contact for the closure is Ffion Marsh, Area Manager."),
            None
        );
    }

    /// A share is a measure in percent; `below 70% but at least 20%` is one range; the
    /// asker's `15%` picks the later case of a line, read with what the line opens with.
    #[test]
    fn the_askers_share_picks_a_later_case_of_a_line() {
        assert_eq!(
            measure_ranges("If the charge is below 70% but at least 20%, we charge £25.00"),
            [("%".to_owned(), 20.0, 70.0 - 1e-6)]
        );
        let store = one(
            "fees",
            "Fees\nIf the charge is below 70% but at least 20%, we charge a flat recharging fee of £25.00; below 20%, the fee is £60.00.",
        );
        let fee = line(&store, "If the charge");
        let q = Question::new(
            "I'll return the car with about 15% battery left. What will the recharging fee be?",
            &store,
        );
        assert_eq!(q.spans(&fee)[0], "below 20%, the fee is £60.00.");
        let q = Question::new(
            "I'll return the car with about 50% battery left. What will the recharging fee be?",
            &store,
        );
        assert_eq!(
            q.spans(&fee)[0],
            "we charge a flat recharging fee of £25.00"
        );
    }

    /// A record's terse keys (`dist`, `tel`, `pc`) name what a question asks in full words,
    /// and a postcode or a phone number is stated in its own shape, under any key.
    #[test]
    fn terse_keys_and_contact_shapes_answer_what_they_abbreviate() {
        let store = one(
            "depots",
            "Depots\nid: D1; name: Quarry Lane Depot; dist: Ebbfield; addr: 4 Kiln Row; pc: ZX4 9QA; tel: 01632 960 555\nid: D2; name: Harrow Gate Depot; dist: Ashwell; addr: 9 Mill Yard; pc: ZX2 1BB; tel: 01632 960 556\nDepots open at 07:00.\nVans must be booked.\nBring photo ID.\nNo dogs on site.\nParking is free.\nThe cafe closes at 15:00.\nLockers are free.\nBikes go in the rack.",
        );
        let quarry = line(&store, "id: D1");
        let q = Question::new("Which district is Quarry Lane Depot in?", &store);
        assert!(q.keys_asked_in(&quarry));
        assert!(
            q.spans(&quarry)[0].ends_with("dist: Ebbfield"),
            "{:?}",
            q.spans(&quarry)
        );
        let q = Question::new("What's the postcode of Quarry Lane Depot?", &store);
        assert!(q.unheard.is_empty(), "{:?}", q.unheard);
        assert_eq!(q.misses(&quarry), None);
        assert!(
            q.spans(&quarry)[0].ends_with("pc: ZX4 9QA"),
            "{:?}",
            q.spans(&quarry)
        );
        assert!(q.misses("Depots open at 07:00.").is_some());
        let q = Question::new(
            "What's the direct phone number for Quarry Lane Depot?",
            &store,
        );
        assert_eq!(q.misses(&quarry), None);
        assert!(q.spans(&quarry)[0].contains("tel: 01632 960 555"));
    }

    /// Of values each said for what (`£80 for a standard scooter and £200 for an
    /// e-scooter`), the one whose label the question names; a legend's codes (`Abbr.: CB;
    /// Meaning: Cargo bike`) read a table's columns as what they stand for.
    #[test]
    fn values_said_for_each_label_and_a_legends_codes() {
        let store = one(
            "terms",
            "Terms\nRepairs are capped at £80 for a standard scooter and £200 for an e-scooter.\nHire starts at 08:00.\nReturn by 20:00.\nHelmets are free.\nLights are fitted.\nLocks are provided.\nPay by card.\nNo cash accepted.\nKeep your receipt.\nReport faults at once.",
        );
        let capped = line(&store, "Repairs");
        let q = Question::new("What's the most I pay for repairs to an e-scooter?", &store);
        let spans = q.spans(&capped);
        assert!(
            spans[0].contains("£200") && !spans[0].contains("£80"),
            "{spans:?}"
        );
        assert_eq!(
            values_for(&capped).map(|(lead, items)| (lead, items.len())),
            Some(("Repairs are capped at", 2))
        );
        let store = one(
            "prices",
            "Prices\nItem: Hire per day; CB: £40; TB: £25\nItem: Hire per week; CB: £150; TB: £95\nAbbr.: CB; Meaning: Cargo bike\nAbbr.: TB; Meaning: Tandem bike\nPrices include VAT.\nPay at the desk.\nDeposits are returned.\nHelmets are free.\nLights are fitted.\nLocks are provided.",
        );
        assert_eq!(
            abbreviations_of(&store).get("CB").map(String::as_str),
            Some("Cargo bike")
        );
        let daily = line(&store, "Item: Hire per day");
        let q = Question::new("How much is a tandem bike per day?", &store);
        assert!(
            q.spans(&daily)[0].ends_with("TB: £25"),
            "{:?}",
            q.spans(&daily)
        );
    }

    #[test]
    fn a_reason_a_count_of_whom_and_a_change_asked_must_be_stated() {
        let store = one(
            "news",
            "News\nDara Vell left the school on 31 May 2025.\nDara Vell left because the family moved abroad.\n\
             Our learners who pass first time had 38 hours of lessons.\n\
             The Gold plan closed to new members on 2024-12-31.\n\
             The Gold plan goes from £12.00 to £15.00 on 1 June 2025.\n",
        );
        let why = Question::new("Why did Dara Vell leave the school?", &store);
        assert!(why
            .misses(&line(&store, "Dara Vell left the school"))
            .is_some());
        assert_eq!(why.misses(&line(&store, "Dara Vell left because")), None);
        // "How many of your learners": a count of learners, which `38 hours` is not.
        let many = Question::new("How many of your learners pass first time?", &store);
        assert_eq!(many.counted.first().map(String::as_str), Some("learn"));
        assert!(many.misses(&line(&store, "Our learners")).is_some());
        // "When is it going up": a date of another event does not say; a change does.
        let up = Question::new("When is the Gold plan price next going up?", &store);
        assert!(up.misses(&line(&store, "The Gold plan closed")).is_some());
        assert_eq!(up.misses(&line(&store, "The Gold plan goes")), None);
    }

    /// What the asker says before the asking part is their situation: a place they go to
    /// that no source names, or the stage they have been through, does not pin the
    /// answer; a place they are at does.
    #[test]
    fn what_is_said_in_passing_is_the_askers_situation() {
        let store = prices();
        let q = Question::new(
            "I'm flying to Peru and my friend says I need a private twin room - what's the member price?",
            &store,
        );
        assert!(q.unstated.is_empty(), "{:?}", q.unstated);
        let q = Question::new(
            "I'm at the Zedford hostel. What's the member price?",
            &store,
        );
        assert_eq!(q.unstated, ["zedford"]);
        let q = Question::new("My appeal failed at stage 1. Who handles stage 2?", &store);
        assert!(
            q.qualifiers
                .iter()
                .all(|x| !matches!(x, Qualifier::Label { value, .. } if value == "1")),
            "{:?}",
            q.qualifiers
        );
        // "Which insurance company": a name is asked for, and `insurance` must be stated.
        assert_eq!(
            AnswerKind::of("Which insurance company covers the vans?"),
            AnswerKind::Person
        );
        assert_eq!(
            AnswerKind::of("Back in 2024, what was the cut-off time to book?"),
            AnswerKind::Time
        );
        // An edition's year in a plan's name (`Gold Saver (2024)`) is no time it states.
        let plans = one(
            "plans",
            "Plans\nid: GS24; plan: Gold Saver (2024); status: withdrawn\nid: GS; plan: Gold Saver; status: active\nPlans renew monthly.\nCancel any time.\nPrices include VAT.\nPay by card.\nNo cash accepted.\nKeep your receipt.\nHelmets are free.\nLocks are provided.",
        );
        let q = Question::new("When is the Gold Saver price next going up?", &plans);
        assert!(q.misses("id: GS24; plan: Gold Saver (2024)").is_some());
    }
}
