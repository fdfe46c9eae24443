//! What counts as a word, a stem, an amount and a time: one reading, used by steering (which
//! lines to offer), by the answer-relevance gate (whether a line answers the question) and
//! by the question analysis both share. Two readings would give two answers to "is this
//! word in the question?" within one run.

/// Words that carry no content: they neither rank a line nor need to be quoted to be said.
#[rustfmt::skip] // A word list reads best packed; rustfmt stacks words over ten characters.
pub const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "both", "but", "by", "can", "could", "did", "do", "does", "due",
    "each", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its",
    "many", "may", "me", "more", "most", "much", "my", "no", "none", "not", "of", "on", "one",
    "only", "or", "other", "our", "over", "per", "s", "should", "so", "such", "t", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "two",
    "under", "up", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "whose", "why", "will", "with", "within", "would", "yes", "you", "your",
    // What a contraction leaves once its apostrophe separates it (`I'm`, `we're`, `you've`,
    // `we'll`, `I'd`, `don't`): pieces of function words, never what a question asks.
    "m", "re", "ve", "ll", "d", "don", "doesn", "didn", "isn", "aren", "wasn", "weren", "hasn",
    "haven", "hadn", "wouldn", "shouldn", "couldn",
    // Modals that open a question as `can` and `may` do (`Must I …?`).
    "must", "shall", "might",
    // Pronouns stand for what the question names elsewhere (`her junior card`), and these
    // conjunctions join clauses (`since when`, `whether`): neither is what is asked.
    "he", "she", "her", "hers", "him", "his", "us", "ours", "mine", "yours", "theirs", "myself",
    "yourself", "himself", "herself", "itself", "ourselves", "themselves", "since", "whether",
    "though", "although",
    // Prepositions and determiners that relate or count what the question names: `through
    // interlibrary loan` names the service, `through` asks nothing of it.
    "through", "throughout", "across", "during", "via", "onto", "upon", "between", "among",
    "towards", "toward", "along", "until", "till", "despite", "except", "every", "some",
    "another", "either", "neither", "several", "few",
];

/// Content words that say little of what a question asks: adverbs of time and emphasis
/// (`still`, `now`, `actually`), light verbs (`get`, `doing`, `meant`) and nouns that stand
/// for anything (`thing`, `stuff`). They rank lines like any word, but an answer need not
/// repeat them to answer ("Do I *still* pay …?" is answered by "… pay no overdue charges").
pub const LIGHT_WORDS: &[&str] = &[
    "actually",
    "reckon",
    "reckons",
    // `Whereabouts is it?` asks where, which the answer's kind checks.
    "whereabouts",
    "already",
    "always",
    "anymore",
    "currently",
    "even",
    "ever",
    "exactly",
    // How sure or how much the asker is (`I mostly ride scooters`, `I'll probably go
    // over`, `the very start`): a hedge or an emphasis, not what is asked.
    "mostly",
    "probably",
    "maybe",
    "perhaps",
    "possibly",
    "very",
    "quite",
    "apparently",
    "basically",
    "definitely",
    "certainly",
    "simply",
    // What the asker wants or thinks ("my mum wants to sit in the back"): what follows is
    // what is asked.
    "want",
    "wants",
    "wanted",
    "wanting",
    "think",
    "thinks",
    "guess",
    "suppose",
    "just",
    "now",
    "really",
    "still",
    "usually",
    "yet",
    // "A normal swim", "my usual class": the default one, which a page names without
    // saying it is the default.
    "normal",
    "usual",
    "ordinary",
    // "Thinking of pausing …": what the asker means to do is what follows.
    "thinking",
    // "We live in Harnmouth": where the asker is, which the place's name says.
    "live",
    "lives",
    "living",
    "get",
    "gets",
    "getting",
    "got",
    "doing",
    "done",
    "going",
    "go",
    "goes",
    "went",
    "come",
    "comes",
    "coming",
    "came",
    "meant",
    "mean",
    "means",
    "thing",
    "things",
    "stuff",
    "something",
    "anything",
    "everything",
    "nothing",
    "same",
    "someone",
    "somebody",
    "anyone",
    "anybody",
    // The people an asker speaks of (`my nan is 70`, `our son's car`): whose situation it
    // is, not what is asked.
    "mum",
    "mom",
    "dad",
    "nan",
    "nana",
    "nanna",
    "gran",
    "granny",
    "grandma",
    "grandmother",
    "grandad",
    "granddad",
    "grandpa",
    "grandfather",
    "son",
    "daughter",
    "wife",
    "husband",
    "brother",
    "sister",
    "aunt",
    "auntie",
    "uncle",
    "niece",
    "nephew",
    "cousin",
    "boyfriend",
    "girlfriend",
    "flatmate",
    "housemate",
    "roommate",
];

/// Whether `word` (any case) is a light word ([`LIGHT_WORDS`]).
#[must_use]
pub fn is_light_word(word: &str) -> bool {
    let lower = word.to_lowercase();
    LIGHT_WORDS.contains(&lower.as_str())
}

/// Whether `word` (any case, as written) is in common English use: at least ten times per
/// million words of general text (`data/common-words.txt`, from `wordfreq`). A common word
/// that no document states may still be answered in other words (`available`, `cover`,
/// `money`); a rarer one (`violin`, `sauna`) names something the documents never discuss.
#[must_use]
pub fn is_common_word(word: &str) -> bool {
    static COMMON: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    let common = COMMON.get_or_init(|| common_words().collect());
    common.contains(word.to_lowercase().as_str())
}

/// How many of the most frequent word forms [`is_everyday_word`] reads as everyday
/// vocabulary. Chosen on the development halves among 3,000, 5,000 and 6,000: fewer
/// let questions go unanswered whose paraphrasable words the sources say otherwise
/// (`bits`, `switching`); more let answers through for questions about things the sources
/// never name (`helicopter`), which then cite a line about something else.
const EVERYDAY_WORDS: usize = 5_000;

/// Whether `word` (any case, as written) belongs to everyday English: a common word
/// ([`is_common_word`]) whose stem is that of one of the [`EVERYDAY_WORDS`] most frequent
/// word forms (`switched` of `switch`, `bits` of `bit`). What a question asks in such a
/// word, the sources may say in others (`take`, `full`, `back`); a rarer word that no
/// source states (`helicopter`) names a thing they never discuss.
#[must_use]
pub fn is_everyday_word(word: &str) -> bool {
    static EVERYDAY: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    let everyday = EVERYDAY.get_or_init(|| common_words().take(EVERYDAY_WORDS).map(stem).collect());
    is_common_word(word) && everyday.contains(&stem(&word.to_lowercase()))
}

/// The words [`is_common_word`] knows, most frequent first.
pub fn common_words() -> impl Iterator<Item = &'static str> {
    include_str!("../data/common-words.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
}

/// Whether `short`, a record's terse key or a piece of one (`dist`, `lmk`, `hrs`, `elig`,
/// `tel`), abbreviates `word` or a word of its [`RELATED`] group (`district`, `landmark`,
/// `hours`, `eligible`, `phone` through `telephone`): three to five letters, no English
/// word itself, that open the word and follow in it in order. Two letters (`pc`) say too
/// little to read.
#[must_use]
pub fn abbreviates(short: &str, word: &str) -> bool {
    let short = short.to_lowercase();
    let word = word.to_lowercase();
    if !(3..=5).contains(&short.chars().count())
        || !short.chars().all(|c| c.is_ascii_lowercase())
        || is_common_word(&short)
        || is_function_word(&short)
    {
        return false;
    }
    let reads = |long: &str| {
        if long.len() <= short.len() || !long.starts_with(&short[..1]) {
            return false;
        }
        let mut rest = long.chars();
        short.chars().all(|c| rest.any(|l| l == c))
    };
    reads(&word)
        || RELATED
            .iter()
            .filter(|g| g.iter().any(|r| stem(r) == stem(&word)))
            .flat_map(|g| g.iter())
            .any(|r| reads(r))
}

/// Whether `word` (any case) is a function word.
#[must_use]
pub fn is_function_word(word: &str) -> bool {
    let lower = word.to_lowercase();
    FUNCTION_WORDS.contains(&lower.as_str())
}

/// The words of `text`, as written (letters and digits; everything else separates).
#[must_use]
pub fn words(text: &str) -> Vec<&str> {
    // A footnote's mark (`Group: B²`) is not part of the word it follows.
    text.split(|c: char| !c.is_alphanumeric() || is_footnote_mark(c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// A superscript or subscript digit, which marks a footnote in a table's cell.
#[must_use]
pub fn is_footnote_mark(c: char) -> bool {
    matches!(c, '¹' | '²' | '³' | '\u{2070}'..='\u{2079}' | '\u{2080}'..='\u{2089}')
}

/// The words of a name or a text, lower-cased, split where a lower-case letter meets an
/// upper-case one (`getWeatherNow` is `get weather now`), letters and digits only: how a
/// tool's name and its declaration are read against a conversation.
#[must_use]
pub fn name_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A crude stem, so `terminated` meets `termination` and `arms` meets `arm`: lower case,
/// a plural `s` dropped, then the first five characters. A word with a digit is a name and
/// is kept whole: `NCT04123456` must not meet `NCT04890123`. A word of a [`RELATED`] group,
/// or a longer form of one (`borrowers`), is its group's concept (`borro+`).
#[must_use]
pub fn stem(word: &str) -> String {
    if word.chars().any(|c| c.is_ascii_digit()) {
        // `over 60s` is `Over-60`, `under 5s` `Under 5`: a number's plural is the number.
        if let Some(n) = word
            .strip_suffix(['s', 'S'])
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        {
            return n.to_owned();
        }
        // `1st` is `first`: a small ordinal meets its word (`our first permit`).
        return ordinal_word(word).map_or_else(|| word.to_lowercase(), stem);
    }
    // A small number spelt out meets its digits (`three-bedroom` meets `3 bedroom`); `one`
    // is as often a pronoun (`a new one`), so it stays a word.
    const SPELT: [&str; 11] = [
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    ];
    if let Some(n) = SPELT.iter().position(|w| word.eq_ignore_ascii_case(w)) {
        return (n + 2).to_string();
    }
    let base = base_form(word);
    let short: String = base.chars().take(5).collect();
    // Words that ask for the same thing meet (`borrow` meets `lent`, `price` meets `cost`),
    // and so do their longer forms (`borrower`), but not a word that only shares their first
    // letters (`person` is not `personnel`).
    // A word whose silent `e` went is not the shorter word it leaves (`care` is not `car`).
    let lower = word.to_lowercase();
    let dropped_e = lower.trim_end_matches('s').strip_suffix('e') == Some(base.as_str());
    concepts()
        .get(short.as_str())
        .and_then(|related| {
            related.iter().find(|(b, _)| {
                base.starts_with(b.as_str()) && !(dropped_e && *b == base && !related_ends_in_e(b))
            })
        })
        .map_or(short, |(_, concept)| concept.clone())
}

/// Whether a [`RELATED`] word with base form `base` is written with a final `e` (`close`
/// of `clos`), so that a word that dropped its `e` meets it.
fn related_ends_in_e(base: &str) -> bool {
    RELATED
        .iter()
        .flat_map(|g| g.iter())
        .any(|w| w.strip_suffix('e') == Some(base))
}

/// The word of a small ordinal written in digits (`1st` is `first`, `3rd` is `third`).
fn ordinal_word(word: &str) -> Option<&'static str> {
    const WORDS: [&str; 10] = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
        "tenth",
    ];
    let lower = word.to_lowercase();
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|end| lower.strip_suffix(end))?;
    let n: usize = digits.parse().ok()?;
    (1..=WORDS.len()).contains(&n).then(|| WORDS[n - 1])
}

/// Groups of everyday English words that ask for the same thing, so that a question's word
/// meets the word a document uses for it. General vocabulary only: no domain's terms.
const RELATED: &[&[&str]] = &[
    &["borrow", "lend", "lent", "loan"],
    &["cost", "price", "fee", "charge", "fine", "pay", "bill"],
    &["buy", "purchase"],
    &["theft", "steal", "stole", "stolen", "thief"],
    &["bonfire", "burn", "burning"],
    &["start", "begin", "commence"],
    &["finish", "conclude", "complete", "end"],
    &["shut", "close", "closed", "closing", "closure"],
    &["reopen", "reopening"],
    &["child", "children", "kid", "kids"],
    &["phone", "telephone", "ring"],
    &["big", "large", "largest", "biggest"],
    &["small", "little", "smallest"],
    &["need", "require", "requirement", "necessary"],
    &["allow", "permit", "permission", "permitted"],
    &[
        "forbid",
        "prohibit",
        "ban",
        "banned",
        "prohibited",
        "forbidden",
    ],
    &["late", "overdue"],
    &["keep", "retain"],
    &["refund", "reimburse", "reimbursement", "repay", "repayment"],
    &["help", "assist", "assistance", "support"],
    &["fix", "repair", "mend"],
    &[
        "broken",
        "faulty",
        "fault",
        "defect",
        "defective",
        "damage",
        "damaged",
    ],
    &["staff", "employee", "worker", "personnel"],
    &["manager", "manage", "lead", "leader", "boss", "supervisor"],
    &["laptop", "computer", "pc"],
    &["senior", "pensioner", "elderly", "retired", "retiree"],
    &["holiday", "vacation"],
    &["sick", "ill", "illness", "sickness"],
    &["doctor", "physician"],
    &["medicine", "medication", "drug", "meds"],
    &[
        "injection",
        "jab",
        "vaccination",
        "vaccinate",
        "immunisation",
        "immunization",
    ],
    &["car", "vehicle"],
    // Kinds of an everyday animal meet it: an owner says `my springer spaniel` of what a
    // page calls a dog.
    &[
        "dog",
        "spaniel",
        "retriever",
        "labrador",
        "terrier",
        "collie",
        "poodle",
        "beagle",
        "dachshund",
        "greyhound",
        "whippet",
        "bulldog",
        "rottweiler",
        "doberman",
        "chihuahua",
        "corgi",
        "schnauzer",
        "dalmatian",
        "sheepdog",
        "lurcher",
        "springer",
        "labradoodle",
        "cockapoo",
        "alsatian",
        "mastiff",
        "newfoundland",
    ],
    &["cat", "moggy", "moggie", "tabby", "siamese"],
    &["bicycle", "bike"],
    // "Can I take pics?": what rules call photography.
    &[
        "photo",
        "photograph",
        "photography",
        "picture",
        "pic",
        "pics",
        "snap",
    ],
    // "For a whole day": what a price list calls a full day.
    &["whole", "full", "entire"],
    // "What is it worth?": what a page calls its value.
    &["worth", "value", "valued", "valuation"],
    &["wide", "wider", "widest", "width"],
    &["deep", "deeper", "deepest", "depth"],
    &["tall", "taller", "tallest", "height"],
    &["heavy", "heavier", "heaviest", "weight", "weigh"],
    &["trip", "travel", "journey", "ride"],
    &["hotel", "lodging", "accommodation"],
    &["meal", "food"],
    &["day", "days", "daily"],
    &["week", "weeks", "weekly"],
    &["month", "months", "monthly"],
    &["year", "years", "yearly", "annual", "annually", "yr", "yrs"],
    &["quick", "fast", "rapid", "quickly", "quickest", "fastest"],
    &["plan", "package", "tariff"],
    // "The lowest speed you promise": what a price list calls its minimum guaranteed.
    &["lowest", "minimum", "shortest"],
    &["highest", "maximum", "longest"],
    // "Pausing my membership": what terms call freezing it.
    &[
        "pause",
        "paused",
        "pausing",
        "freeze",
        "frozen",
        "suspend",
        "suspension",
    ],
    // "A normal swim": what a price list calls its standard one.
    &["standard", "normal", "regular", "usual", "ordinary"],
    &["surcharge", "supplement"],
    &["alone", "unaccompanied", "unsupervised", "solo"],
    &["promise", "promised", "guarantee", "guaranteed"],
    &["renovate", "renovation", "refurbish", "refurbishment"],
    &["participant", "patient"],
    &["harm", "injury", "injure", "hurt"],
    &["die", "death", "dead", "fatal"],
    // A measure is stated by its unit: `gusts of at least 55 mph` states a wind speed.
    &["speed", "mph", "kph"],
    &["weight", "kg", "kilos", "kilograms", "tonnes"],
    &["volume", "litres", "liters", "litre", "liter"],
];

/// Each related word's stem, with the word's base form (as [`base_form`] reads it) and its
/// group's concept: the first word's stem marked `+`, which no word's own stem can equal
/// (`medical` is not `medicine`).
fn concepts() -> &'static std::collections::HashMap<String, Vec<(String, String)>> {
    static MAP: std::sync::OnceLock<std::collections::HashMap<String, Vec<(String, String)>>> =
        std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        let mut map: std::collections::HashMap<String, Vec<(String, String)>> =
            std::collections::HashMap::new();
        for group in RELATED {
            let concept = format!("{}+", raw_stem(group[0]));
            for word in *group {
                let base = base_form(word);
                map.entry(raw_stem(word))
                    .or_default()
                    .push((base, concept.clone()));
            }
        }
        map
    })
}

/// [`stem`] without the related-word mapping (used to build that mapping).
fn raw_stem(word: &str) -> String {
    base_form(word).chars().take(5).collect()
}

/// A word's base form: lower case, an irregular verb's base, then without its plural or
/// verb ending and a silent final `e` (`charges` is `charg`, `borrowing` is `borrow`).
pub(crate) fn base_form(word: &str) -> String {
    let lower = word.to_lowercase();
    // An irregular verb meets its base form (`ran` meets `run`, `held` meets `hold`).
    let lower = IRREGULAR
        .iter()
        .find(|(forms, _)| forms.split(' ').any(|f| f == lower))
        .map_or(lower, |(_, base)| (*base).to_owned());
    let lower = match lower.strip_suffix("ies") {
        Some(rest) if rest.chars().count() >= 2 => format!("{rest}y"),
        _ => lower,
    };
    // A plural of a verb's `-ing` noun (`bookings`, `meetings`) is that noun.
    let lower = match lower.strip_suffix("ings") {
        Some(_) => lower[..lower.len() - 1].to_owned(),
        None => lower,
    };
    // `opened` meets `open`, `testing` meets `test`: a verb ending goes when a word of
    // three letters or more remains. `used` meets `use` (its `d` goes when the `-ed` would
    // leave too little, unless the word ends in `-eed`: `need`, `fee`).
    // A word ending in `-eed` (`speed`, `proceed`) keeps it: its `ed` is no ending.
    let lower = ["ing", "ed"]
        .iter()
        .filter(|suffix| **suffix != "ed" || !lower.ends_with("eed"))
        .find_map(|suffix| {
            lower
                .strip_suffix(suffix)
                .filter(|rest| rest.chars().count() >= 3)
                .map(str::to_owned)
        })
        .or_else(|| {
            lower
                .strip_suffix('d')
                .filter(|rest| rest.ends_with('e') && !rest.ends_with("ee"))
                .filter(|rest| rest.chars().count() >= 3)
                .map(str::to_owned)
        })
        .unwrap_or(lower);
    // A consonant doubled before the ending is one (`running` meets `run`, `stopped` meets
    // `stop`), unless the word itself ends so (`add`, `call`, `pass`, `buzz`).
    let lower = match lower.as_bytes() {
        [.., a, b]
            if lower.len() >= 4
                && a == b
                && b"bdgmnprt".contains(b)
                && !lower.ends_with("ing")
                && lower.len() < word.len() =>
        {
            lower[..lower.len() - 1].to_owned()
        }
        _ => lower,
    };
    let singular = match lower.strip_suffix('s') {
        Some(rest) if rest.chars().count() >= 3 && !rest.ends_with('s') => rest,
        _ => lower.as_str(),
    };
    // A silent final `e` goes, so that `close`, `closes` and `closed` meet (as `use`,
    // `uses` and `used` do), unless too little would remain or it is one of two (`fee`).
    let singular = match singular.strip_suffix('e') {
        Some(rest) if rest.chars().count() >= 2 && !rest.ends_with('e') => rest,
        _ => singular,
    };
    singular.to_owned()
}

/// Irregular forms of common verbs and their base forms.
const IRREGULAR: &[(&str, &str)] = &[
    // A rate per hour or night is that unit's (`hourly rate` meets `per hour`); `daily`,
    // `weekly`, `monthly` and `yearly` meet theirs in [`RELATED`].
    ("hourly", "hour"),
    ("nightly", "night"),
    ("ran", "run"),
    ("began begun", "begin"),
    ("met", "meet"),
    ("took taken", "take"),
    ("gave given", "give"),
    ("held", "hold"),
    ("made", "make"),
    ("went gone", "go"),
    ("came", "come"),
    ("found", "find"),
    ("left", "leave"),
    ("paid", "pay"),
    ("sent", "send"),
    ("spent", "spend"),
    ("kept", "keep"),
    ("told", "tell"),
    ("said", "say"),
    ("saw seen", "see"),
    ("chose chosen", "choose"),
    ("wrote written", "write"),
    ("rose risen", "rise"),
    ("fell fallen", "fall"),
    ("grew grown", "grow"),
    ("knew known", "know"),
    ("shown", "show"),
    ("brought", "bring"),
    ("bought", "buy"),
    ("led", "lead"),
    ("felt", "feel"),
    ("stood", "stand"),
    ("won", "win"),
    ("lost", "lose"),
    ("sold", "sell"),
    ("built", "build"),
    ("drew drawn", "draw"),
];

/// Whether `words[i]` is a label: a capital letter standing alone after the first word
/// (`Arm A`, `Phase I`), not the article `a` or the pronoun `I` (`can I`, `the object I
/// make`): `I` is a label only after a capitalised word that is not a function word (`Can
/// I`, which opens a question, asks as the pronoun) nor an acronym (`a DVD I borrow`).
#[must_use]
pub fn is_label(words: &[&str], i: usize) -> bool {
    let Some(w) = words.get(i) else {
        return false;
    };
    i > 0
        && w.len() == 1
        && w.chars().all(|c| c.is_ascii_uppercase())
        && (*w != "I"
            || words.get(i - 1).is_some_and(|p| {
                p.chars().next().is_some_and(char::is_uppercase)
                    && p.chars().any(char::is_lowercase)
                    && !is_function_word(p)
                    // `… on a Tuesday? I finish at 6`: a day or a month is no series.
                    && !is_calendar_word(p)
            }))
}

/// The locators `text` names, each once, in order: tokens (with the punctuation around
/// them taken off) that hold a `/`, a scheme (`x://`), or end in a file extension
/// (`name.ext`, one to five letters or digits after the last dot).
#[must_use]
pub fn locators(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '[' | ']' | ',' | ';'
            )
    }) {
        let token = token.trim_end_matches(['.', ':', '?', '!']);
        if token.len() < 3 || token.len() > 300 {
            continue;
        }
        let extension = token.rsplit_once('.').is_some_and(|(stem, ext)| {
            // `e.g` and `i.e` are abbreviations, not files.
            stem.len() >= 2
                && !stem.ends_with('/')
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        });
        let located = token.contains('/') || token.contains("://") || extension;
        if located && !out.iter().any(|o| o == token) {
            out.push(token.to_owned());
        }
    }
    out
}

/// Contractions written without their apostrophe, as people type them (`whats`, `im`,
/// `dont`), and the forms they stand for. `cant` and `wont` are words of their own, but
/// hardly in a question; `ill`, `its`, `were` and `id` are left alone.
const BARE_CONTRACTIONS: &[(&str, &str)] = &[
    ("whats", "what's"),
    ("wheres", "where's"),
    ("whens", "when's"),
    ("hows", "how's"),
    ("whos", "who's"),
    ("thats", "that's"),
    ("theres", "there's"),
    ("im", "I'm"),
    ("ive", "I've"),
    ("youre", "you're"),
    ("theyre", "they're"),
    ("dont", "don't"),
    ("doesnt", "doesn't"),
    ("didnt", "didn't"),
    ("isnt", "isn't"),
    ("arent", "aren't"),
    ("wasnt", "wasn't"),
    ("werent", "weren't"),
    ("hasnt", "hasn't"),
    ("havent", "haven't"),
    ("cant", "can't"),
    ("wont", "won't"),
    ("wouldnt", "wouldn't"),
    ("shouldnt", "shouldn't"),
    ("couldnt", "couldn't"),
];

/// `text` with its contractions written without an apostrophe ([`BARE_CONTRACTIONS`])
/// written with one: "whats the price" asks what the price is, as "what's" does.
#[must_use]
pub fn with_apostrophes(text: &str) -> std::borrow::Cow<'_, str> {
    let bare = |w: &str| {
        let lower = w.to_lowercase();
        BARE_CONTRACTIONS
            .iter()
            .find(|(b, _)| *b == lower)
            .map(|(_, full)| *full)
    };
    if !text
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| bare(w).is_some())
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match bare(word) {
            // A capital opening the word stays one (`Whats` is `What's`).
            Some(full) if word.starts_with(char::is_uppercase) => {
                let mut chars = full.chars();
                out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
                out.extend(chars);
            }
            Some(full) => out.push_str(full),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    std::borrow::Cow::Owned(out)
}

/// `text` with its locators ([`locators`]) blanked out: a path names where to look, and its
/// pieces (`tmp`, `agent`, `txt`) are not words of what is asked or said.
#[must_use]
pub fn without_locators(text: &str) -> String {
    without_locators_but(text, |_| false)
}

/// `text` with its locators blanked out ([`without_locators`]), except those `keep`
/// accepts (a dotted name the sources themselves write, `server.port`, is what is asked
/// about, not where to look).
#[must_use]
pub fn without_locators_but(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = text.to_owned();
    for locator in locators(text).into_iter().filter(|l| !keep(l)) {
        // `and/or`, `km/h`: one slash between two words is a pair of words, not a path.
        let pair = !locator.starts_with('/')
            && locator.matches('/').count() == 1
            && !locator.contains('.')
            && !locator.contains(':');
        if !pair {
            out = out.replace(&locator, " ");
        }
    }
    out
}

/// The content words of `text`, in order: every word that is not a function word, and the
/// labels ([`is_label`]).
#[must_use]
pub fn content_words(text: &str) -> Vec<&str> {
    let all = words(text);
    (0..all.len())
        .filter(|&i| is_label(&all, i) || !is_function_word(all[i]))
        .map(|i| all[i])
        .collect()
}

/// The content words of `text`, stemmed, in order (see [`content_words`]), after
/// [`with_redone`]: `open again` is `open` and `reopen`.
#[must_use]
pub fn content_stems(text: &str) -> Vec<String> {
    let mut stems: Vec<String> = content_words(&reading(text))
        .into_iter()
        .map(stem)
        .collect();
    // A compound written with a hyphen (`home-made`, `drop-off`) is also the one word it is
    // written as elsewhere (`homemade`, `dropoff`): one text may hyphenate what another
    // closes up.
    // Stems are short, so a compound whose first word is long is already that word's stem.
    for (first, whole) in hyphenated(text) {
        let whole = stem(&whole);
        if whole != stem(first) {
            stems.push(whole);
        }
    }
    stems
}

/// What one party does and the verbs the other says it with: the asker earns what the
/// provider pays (`Do I earn interest?`, `We pay interest at 1.5%`), receives what it sends.
/// General English only.
const CONVERSES: &[(&str, &[&str])] = &[
    ("earn", &["pay", "paid"]),
    ("receive", &["send", "sent", "give", "pay", "paid", "issue"]),
    ("borrow", &["lend", "lent", "loan"]),
    ("lend", &["borrow"]),
    ("buy", &["sell", "sold"]),
    ("sell", &["buy", "bought"]),
    ("rent", &["let", "hire"]),
];

/// The stems of the verbs that say from the other side what the verb of `verb_stem` says
/// ([`CONVERSES`]).
#[must_use]
pub fn converse_stems(verb_stem: &str) -> Vec<String> {
    CONVERSES
        .iter()
        .filter(|(verb, _)| stem(verb) == verb_stem)
        .flat_map(|(_, others)| others.iter().map(|o| stem(o)))
        .collect()
}

/// The seasons of the northern temperate year, from December's.
const SEASONS: [&str; 4] = ["winter", "spring", "summer", "autumn"];

/// Whether `stems` name a season ([`season_stems`] is worth reading for them).
#[must_use]
pub fn names_season(stems: &[String]) -> bool {
    static STEMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let seasons = STEMS.get_or_init(|| SEASONS.iter().map(|s| stem(s)).collect());
    stems.iter().any(|s| seasons.contains(s))
}

/// The stems of the seasons the dates of `text` fall in (`27 October` is in the autumn):
/// a question may name the season where a text gives the date.
#[must_use]
pub fn season_stems(text: &str) -> Vec<String> {
    let season = |month: usize| SEASONS[(month % 12) / 3];
    let mut seasons: Vec<&str> = stated_dates(text)
        .into_iter()
        .map(|(_, month, _)| season(month as usize))
        .collect();
    // A range of dates is in every season of the months it spans, past the year's end
    // too: `from 1 October to 31 March` is the winter months.
    for (from, to) in date_ranges(text) {
        if let (Some((_, a, _)), Some((_, b, _))) = (from, to) {
            let (a, b) = (a as usize, b as usize);
            if (1..=12).contains(&a) && (1..=12).contains(&b) {
                let span = (b + 12 - a) % 12;
                seasons.extend((0..=span).map(|k| season((a - 1 + k) % 12 + 1)));
            }
        }
    }
    seasons.sort_unstable();
    seasons.dedup();
    seasons.into_iter().map(stem).collect()
}

/// The hyphenated compounds of two words of letters in `text` (`home-made`), or of a
/// letter and a word (`e-bike`): the first word and the compound closed up (`homemade`).
fn hyphenated(text: &str) -> impl Iterator<Item = (&str, String)> + '_ {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '/'))
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter_map(|t| {
            let (a, b) = t.split_once('-')?;
            let letters = |p: &str| p.chars().count() >= 3 && p.chars().all(char::is_alphabetic);
            // `e-bike` is also `ebike`, which a pedal bike is not.
            let prefix = a.chars().count() == 1 && a.chars().all(char::is_alphabetic);
            ((letters(a) || prefix) && letters(b) && a.chars().count() + b.chars().count() >= 4)
                .then(|| (a, format!("{a}{b}")))
        })
}

/// `text` as its content is read: a verb done `again` gains its `re-` verb
/// ([`with_redone`]) and a phrasal verb its one-word equivalent ([`with_phrasal`]).
#[must_use]
pub fn reading(text: &str) -> std::borrow::Cow<'_, str> {
    // Compounds first: the other readings write the text back as its words, which would
    // part `Wi-Fi` into two fragments.
    let joined = joined_compounds(text);
    let whole = joined.as_deref().unwrap_or(text);
    let read = match with_redone(whole) {
        std::borrow::Cow::Borrowed(t) => with_phrasal(t).into_owned(),
        std::borrow::Cow::Owned(t) => with_phrasal(&t).into_owned(),
    };
    if joined.is_none() && read == text {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(read)
}

/// `text` with a hyphen taken out of a word made of two short pieces (`Wi-Fi` is `WiFi`,
/// `hi-fi` is `hifi`), which split would be two fragments too short to mean anything;
/// `None` when it has none. `e-book` keeps its hyphen: `book` means something alone.
fn joined_compounds(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let piece = |from: usize, step: isize| {
        let mut n = 0;
        let mut i = from as isize;
        while i >= 0 && (i as usize) < chars.len() && chars[i as usize].is_alphabetic() {
            n += 1;
            i += step;
        }
        // The piece must end at a non-letter that is not a digit either.
        let bounded = i < 0 || (i as usize) >= chars.len() || !chars[i as usize].is_alphanumeric();
        (n, bounded)
    };
    let joins: Vec<usize> = (1..chars.len().saturating_sub(1))
        .filter(|&i| chars[i] == '-')
        .filter(|&i| {
            let (left, left_bounded) = piece(i - 1, -1);
            let (right, right_bounded) = piece(i + 1, 1);
            (1..=2).contains(&left) && (1..=2).contains(&right) && left_bounded && right_bounded
        })
        .collect();
    if joins.is_empty() {
        return None;
    }
    Some(
        chars
            .iter()
            .enumerate()
            .filter(|(i, _)| !joins.contains(i))
            .map(|(_, c)| c)
            .collect(),
    )
}

/// Phrasal verbs and the one word a document often writes for them: the verbs (base forms,
/// or forms as written), the particle, the word. General English only.
const PHRASAL: &[(&[&str], &str, &str)] = &[
    (&["pick"], "up", "collect"),
    (&["check"], "out", "borrow"),
    (
        &[
            "be", "is", "are", "was", "were", "bring", "give", "take", "took", "hand", "send",
            "sent", "come", "came",
        ],
        "back",
        "return",
    ),
    (&["fill"], "in", "complete"),
    (&["sign"], "up", "join"),
    (&["fill"], "out", "complete"),
    (&["call"], "off", "cancel"),
    (&["set"], "up", "install"),
    (&["hand"], "in", "submit"),
    (&["put"], "off", "postpone"),
    // "How many days can I roll over?": what a policy calls carrying them over.
    (&["roll"], "over", "carry"),
    // "How long will you hang on to them?": how long they are kept.
    (&["hang", "hold"], "on", "keep"),
    (&["break", "broke"], "down", "broken"),
    // "When does the ban kick in?": when it starts.
    (&["kick"], "in", "start"),
    (&["grow", "grown"], "up", "adult"),
    // "How much will my bill go up by?": a price rises. (Not `went up`, which tells
    // the asker's situation: "before the prices went up".)
    (&["go", "goes", "going"], "up", "increase"),
    // Everyday phrasal verbs and the one verb a policy writes for them.
    (
        &["fall", "falls", "falling", "fell", "fallen"],
        "behind",
        "late",
    ),
    (
        &["turn", "turns", "turned", "show", "shows", "showed"],
        "up",
        "arrive",
    ),
    (&["pay", "paid"], "back", "refund"),
    (&["work", "works", "worked"], "out", "calculate"),
    (&["carry", "carries", "carried"], "on", "continue"),
    (
        &["drop", "drops", "dropped", "pull", "pulls", "pulled"],
        "out",
        "withdraw",
    ),
    (&["look", "looks", "looked"], "into", "investigate"),
];

/// Set phrases and the one word for them: `at the same time` and `at once` say one thing.
const IDIOMS: &[(&[&str], &str)] = &[
    (&["at", "the", "same", "time"], "simultaneously"),
    (&["at", "a", "time"], "simultaneously"),
    (&["at", "any", "one", "time"], "simultaneously"),
    (&["at", "once"], "simultaneously"),
    // "I lost my card. How much is a new one?"
    (&["a", "new", "one"], "replacement"),
    // "When did the current fares come in?": what is in force is what is current.
    (&["in", "force"], "current"),
    // "Who is in charge at the site?": who runs it.
    (&["in", "charge"], "manager"),
    (&["into", "force"], "current"),
    // "When does it close for good?": for ever.
    (&["for", "good"], "permanently"),
    // "How do I get in touch?": how to contact.
    (&["get", "in", "touch"], "contact"),
    // "How do I get hold of a ranger?": how to contact one.
    (&["get", "hold", "of"], "contact"),
    (&["get", "a", "hold", "of"], "contact"),
    // "What does it cost at the moment?": what applies now.
    (&["at", "the", "moment"], "currently"),
    (&["these", "days"], "currently"),
    // "How many days holiday do I get?": what a handbook calls annual leave, still read
    // as its own words too.
    (&["annual", "leave"], "annual leave holiday"),
    // "Can he use the gym on his own?": without anyone with him.
    (&["on", "his", "own"], "alone"),
    (&["on", "her", "own"], "alone"),
    (&["on", "their", "own"], "alone"),
    (&["on", "my", "own"], "alone"),
    (&["on", "your", "own"], "alone"),
    (&["on", "our", "own"], "alone"),
    // "Can we get dinner there?": what a price list calls an evening meal.
    (&["evening", "meal"], "dinner"),
    (&["evening", "meals"], "dinner"),
];

/// Words that may stand between a phrasal verb and its particle (`pick it up`).
const PHRASAL_OBJECTS: &[&str] = &["it", "them", "one", "this", "that", "these", "those"];

/// `text` with each phrasal verb (see [`PHRASAL`]) and set phrase (see [`IDIOMS`]) read as
/// the one word for it: `Where do I pick it up?` reads `Where do I collect it`, so what is
/// asked is `collect`, not `pick`.
/// Unchanged when it has none; otherwise its words, space-separated.
#[must_use]
pub fn with_phrasal(text: &str) -> std::borrow::Cow<'_, str> {
    let all = words(text);
    let lower: Vec<String> = all.iter().map(|w| w.to_lowercase()).collect();
    let verb_at = |j: usize, verbs: &[&str]| {
        verbs.contains(&lower[j].as_str()) || verbs.contains(&base_form(&lower[j]).as_str())
    };
    let mut out: Vec<String> = all.iter().map(|w| (*w).to_owned()).collect();
    let mut changed = false;
    for i in 0..all.len() {
        for (verbs, particle, one) in PHRASAL {
            if lower[i] != *particle {
                continue;
            }
            let verb = if i >= 1 && verb_at(i - 1, verbs) {
                Some(i - 1)
            } else if i >= 2
                && PHRASAL_OBJECTS.contains(&lower[i - 1].as_str())
                && verb_at(i - 2, verbs)
            {
                Some(i - 2)
            } else if i >= 3
                // `sent the router back`: a noun with its determiner between them.
                && ["the", "my", "our", "your", "his", "her", "their", "a", "an"]
                    .contains(&lower[i - 2].as_str())
                && !is_function_word(&lower[i - 1])
                && verb_at(i - 3, verbs)
            {
                Some(i - 3)
            } else {
                None
            };
            if let Some(v) = verb {
                out[v] = (*one).to_owned();
                out[i] = String::new();
                changed = true;
                break;
            }
        }
    }
    let mut i = 0;
    while i < out.len() {
        let found = IDIOMS.iter().find(|(phrase, _)| {
            out.len() - i >= phrase.len()
                && phrase
                    .iter()
                    .zip(&out[i..])
                    .all(|(p, w)| w.eq_ignore_ascii_case(p))
        });
        if let Some((phrase, one)) = found {
            out[i] = (*one).to_owned();
            for w in &mut out[i + 1..i + phrase.len()] {
                w.clear();
            }
            changed = true;
            i += phrase.len();
        } else {
            i += 1;
        }
    }
    out.retain(|w| !w.is_empty());
    if changed {
        std::borrow::Cow::Owned(out.join(" "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// `text` with each word done `again` followed by its `re-` verb (see `redone`) in place of
/// the `again`: `When will it open again?` reads `When will it open reopen`. The word stays,
/// because most verbs have no `re-` verb in use (`fail again` is no `refail`). Unchanged
/// when it says no `again`; otherwise its words, space-separated.
#[must_use]
pub fn with_redone(text: &str) -> std::borrow::Cow<'_, str> {
    let all = words(text);
    let mut changed = false;
    let out: Vec<String> = all
        .iter()
        .enumerate()
        .map(|(i, word)| {
            // `start the whole course again`: a noun after a determiner is done again by
            // the verb before it, and is no verb itself (`recourse`).
            let object = i > 1
                && [
                    "the", "a", "an", "whole", "this", "that", "my", "your", "our", "his", "her",
                    "their", "its",
                ]
                .contains(&all[i - 2].to_lowercase().as_str());
            // `be working again` is a state come back, not a thing redone (`reworking`).
            let state = i > 1
                && all[i - 1].to_lowercase().ends_with("ing")
                && ["be", "is", "are", "was", "were", "been", "being"]
                    .contains(&all[i - 2].to_lowercase().as_str());
            let verb = (i > 0 && word.eq_ignore_ascii_case("again") && !object && !state)
                .then(|| {
                    // `start up again`: a verb's particle goes between it and `again`.
                    let particle = i > 1 && all[i - 1].eq_ignore_ascii_case("up");
                    redone(all[if particle { i - 2 } else { i - 1 }])
                })
                .flatten();
            changed |= verb.is_some();
            verb.unwrap_or_else(|| (*word).to_owned())
        })
        .collect();
    if changed {
        std::borrow::Cow::Owned(out.join(" "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The `re-` verb of `word` done again (`open` gives `reopen`, `start` gives `restart`):
/// English makes a repeated action a verb of its own, and a document often writes that
/// verb where a question says `… again`. `None` for what cannot take the prefix (a number,
/// a word of fewer than three letters, one already led by `re`).
fn redone(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    (lower.chars().count() >= 3
        && lower.chars().all(|c| c.is_ascii_alphabetic())
        && !lower.starts_with("re")
        && !is_function_word(&lower))
    .then(|| format!("re{lower}"))
}

/// Number words a text may spell an amount with.
pub(crate) const NUMBER_WORDS: &[&str] = &[
    "once", "twice", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "twenty", "thirty", "hundred", "thousand", "half", "dozen",
];

/// A text's tokens: runs between spaces, with the punctuation around them taken off.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    // Closing marks in any order (`300mm).`, `(£25.00.)`).
    text.split_whitespace().map(|t| {
        t.trim_start_matches(|c: char| {
            matches!(c, ',' | ';' | ':' | '(' | ')' | '[' | ']' | '"' | '\'')
        })
        .trim_end_matches(|c: char| {
            matches!(
                c,
                ',' | ';' | ':' | '(' | ')' | '[' | ']' | '"' | '\'' | '.' | '?' | '!'
            )
        })
    })
}

/// The amounts `text` states, as written: numbers standing as numbers (`212`, `14.6%`,
/// `1,500`, `3x`, the `40` of `40-week`) and number words, but not the digits of a name
/// (`NCT04123456`, `VELA-2`, `v2`, `E04`), of a version (`version 2.1`) or of a date
/// (`2025-04-11`).
#[must_use]
pub fn amounts(text: &str) -> Vec<String> {
    amounts_with_units(text)
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// [`amounts`], each with what it counts: the stems of the words right after it, up to the
/// first function word or punctuation (`635 participants`, `26 weeks`, `5 active loan
/// requests`; nothing for `212 in` or `61;`). A unit glued on (`40-week`) is the only one.
#[must_use]
pub fn amounts_with_units(text: &str) -> Vec<(String, Vec<String>)> {
    const VERSION_WORDS: [&str; 5] = ["version", "v", "ver", "rev", "revision"];
    let raw: Vec<&str> = text.split_whitespace().collect();
    let clean: Vec<&str> = tokens(text).collect();
    let mut out = Vec::new();
    for (i, token) in clean.iter().enumerate() {
        let lower = token.to_lowercase();
        if NUMBER_WORDS.contains(&lower.as_str()) {
            // `at once` is "immediately", and `Once you…` opening a clause is "when".
            let before = i.checked_sub(1).map(|j| raw[j]);
            let idiom = lower == "once"
                && before.is_none_or(|b| {
                    b.eq_ignore_ascii_case("at") || b.ends_with([',', ';', ':', '.'])
                });
            if !idiom {
                out.push((lower, Vec::new()));
            }
            continue;
        }
        let Some(number) = amount_of(token) else {
            continue;
        };
        // The word right before, when nothing separates them (`Phase 3`, `week 16`).
        let head = i
            .checked_sub(1)
            .map(|j| raw[j])
            .filter(|w| w.chars().last().is_some_and(char::is_alphabetic))
            .unwrap_or("");
        // The word right after, when no punctuation separates them (`4 weeks`).
        let next = if raw[i].chars().last().is_some_and(char::is_alphanumeric) {
            clean.get(i + 1).copied().unwrap_or("")
        } else {
            ""
        };
        // The noun phrase it opens: `next` and the words after it, while nothing separates
        // them and none is a function word or a number.
        let mut phrase: Vec<String> = Vec::new();
        let mut j = i + 1;
        while j < clean.len() && phrase.len() < MAX_UNIT_WORDS {
            let word = clean[j];
            if word.is_empty()
                || !word.chars().all(char::is_alphabetic)
                || is_function_word(word)
                || !raw[j - 1].chars().last().is_some_and(char::is_alphanumeric)
            {
                break;
            }
            phrase.push(stem(word));
            j += 1;
        }
        let label = !head.is_empty()
            && !is_function_word(head)
            && token.chars().all(|c| c.is_ascii_digit())
            && (head.chars().next().is_some_and(char::is_uppercase)
                || !next.chars().next().is_some_and(char::is_alphabetic));
        if !label && !VERSION_WORDS.contains(&head.to_lowercase().as_str()) {
            // `40-week` carries its unit in the token; `26 weeks` in the next word.
            let glued = token
                .split_once('-')
                .map(|(_, u)| u)
                .filter(|u| !u.is_empty() && u.chars().all(char::is_alphabetic));
            let unit = match glued {
                Some(u) => vec![stem(u)],
                None => phrase,
            };
            out.push((number, unit));
        }
    }
    out
}

/// Units written with capitals and glued to their number (`35GB`, `900Mbps`).
const GLUED_UNITS: [&str; 12] = [
    "kb", "mb", "gb", "tb", "kbps", "mbps", "gbps", "kw", "kwh", "mwh", "mhz", "ghz",
];

/// The number a token states as an amount, if it does: digits (with `,` and `.`), a sign
/// or a currency sign before, `%`, `x` or a hyphenated unit (`40-week`) after.
fn amount_of(token: &str) -> Option<String> {
    let body = token
        .trim_start_matches(['-', '+', '~', '<', '>', '≤', '≥'])
        .trim_start_matches(CURRENCY_SIGNS);
    let digits: String = body
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect();
    if !digits.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    // A footnote's mark on a cell (`£279¹`) is no part of the amount.
    let rest = body[digits.len()..].trim_end_matches(is_footnote_mark);
    let unit_ok = rest.is_empty()
        || matches!(rest, "%" | "x" | "×")
        || rest
            .strip_prefix('-')
            .is_some_and(|u| !u.is_empty() && u.chars().all(char::is_alphabetic))
        // `£29.00/mo`, `£18.00/seat/mo`: a rate per a period or a unit.
        || rest.strip_prefix('/').is_some_and(|u| {
            u.chars().next().is_some_and(char::is_alphabetic)
                && u.chars().all(|c| c.is_alphabetic() || c == '/')
        })
        // `12mg`, `30cm`: a unit glued to the number.
        || (rest.len() <= 3 && rest.chars().all(|c| c.is_ascii_lowercase()))
        // `35GB`, `500Mbps`, `7kWh`: a unit written with capitals.
        || GLUED_UNITS.contains(&rest.to_ascii_lowercase().as_str());
    // A date (`2025-04-11`, `2025-04`) is a time, not an amount.
    let date = rest.starts_with('-') && rest[1..].starts_with(|c: char| c.is_ascii_digit());
    (unit_ok && !date).then(|| {
        digits
            .trim_end_matches(['.', ','])
            .replace(',', "")
            .to_owned()
    })
}

/// The month names a time may be written with.
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Whether `text` names a month, whole or cut short (`April`, `Apr`).
#[must_use]
pub fn names_month(text: &str) -> bool {
    words(&text.to_lowercase())
        .iter()
        .any(|w| month_of(w).is_some())
}

/// The days of the week (a time a schedule states).
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Units a numbered time point is written with (`week 24`, `12 weeks`).
const TIME_UNITS: [&str; 10] = [
    "week", "weeks", "day", "days", "month", "months", "year", "years", "quarter", "quarters",
];

/// The times `text` states, lower-cased: ISO dates (`2026-01-08`, `2026-01`), years, month
/// names, quarters and numbered weeks, days or months (`week 24`, `12 weeks`).
#[must_use]
pub fn times(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let tokens = words(&lower);
    let mut out: Vec<String> = Vec::new();
    for t in text.split(|c: char| !(c.is_ascii_digit() || c == '-')) {
        let parts: Vec<&str> = t.split('-').collect();
        if parts.len() >= 2
            && parts[0].len() == 4
            && parts[1..].iter().all(|p| p.len() == 2)
            && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit()))
        {
            out.push(t.to_owned());
        }
    }
    // A month cut short, as a season or a date writes it (`Apr-Oct`, `Sep 2025`): a
    // capitalised abbreviation beside a dash or before a number.
    let pieces: Vec<&str> = text.split_whitespace().collect();
    for (i, piece) in pieces.iter().enumerate() {
        for (j, part) in piece.split(['-', '\u{2013}']).enumerate() {
            let word = part.trim_matches(|c: char| !c.is_alphanumeric());
            let dashed = piece.contains(['-', '\u{2013}']) && j < 2;
            let numbered = pieces
                .get(i + 1)
                .is_some_and(|n| n.chars().next().is_some_and(|c| c.is_ascii_digit()));
            if !(3..=4).contains(&word.len())
                || !word.starts_with(char::is_uppercase)
                || !(dashed || numbered)
            {
                continue;
            }
            let lower = word.to_lowercase();
            if let Some(month) = MONTHS
                .iter()
                .find(|m| m.starts_with(&lower) && **m != lower)
            {
                out.push((*month).to_owned());
            }
        }
    }
    // Clock times: `17:30`, `9:00`.
    for t in lower.split(|c: char| !(c.is_ascii_digit() || c == ':')) {
        if let Some((h, m)) = t.split_once(':') {
            if (1..=2).contains(&h.len())
                && m.len() == 2
                && h.chars().chain(m.chars()).all(|c| c.is_ascii_digit())
            {
                out.push(t.to_owned());
            }
        }
    }
    for (i, t) in tokens.iter().enumerate() {
        let year = t.len() == 4
            && t.chars().all(|c| c.is_ascii_digit())
            && (t.starts_with("19") || t.starts_with("20"));
        if year && !out.iter().any(|d| d.starts_with(t)) {
            out.push((*t).to_owned());
        }
        if MONTHS.contains(t) || WEEKDAYS.contains(&t.trim_end_matches('s')) {
            out.push((*t).to_owned());
        }
        // A day of a month, either way round (`16 June`, `June 16`), as `16 june`: the month
        // alone does not tell `5 June` from `16 June`.
        if MONTHS.contains(t) {
            let day = |w: Option<&&str>| w.and_then(|w| day_of(w));
            let before = i.checked_sub(1).and_then(|j| day(tokens.get(j)));
            if let Some(d) = before.or_else(|| day(tokens.get(i + 1))) {
                out.push(format!("{d} {t}"));
            }
        }
        // A day of the month by its ordinal (`collected on the 1st or the 15th of the
        // month`): after `the`, in a text about months.
        if t.ends_with(['t', 'd', 'h'])
            && day_of(t).is_some()
            && i.checked_sub(1).is_some_and(|j| tokens[j] == "the")
            && tokens.iter().any(|w| w.starts_with("month"))
        {
            out.push((*t).to_owned());
        }
        if ["noon", "midday", "midnight"].contains(t) {
            out.push((*t).to_owned());
        }
        // `8 pm`, `8pm`.
        if let Some(next) = tokens.get(i + 1) {
            let hour = t.len() <= 2 && t.chars().all(|c| c.is_ascii_digit());
            if hour && ["am", "pm"].contains(next) {
                out.push(format!("{t} {next}"));
            }
        }
        if let Some(h) = t.strip_suffix("am").or_else(|| t.strip_suffix("pm")) {
            if !h.is_empty() && h.len() <= 2 && h.chars().all(|c| c.is_ascii_digit()) {
                out.push((*t).to_owned());
            }
        }
        if let Some(next) = tokens.get(i + 1) {
            let number = |w: &str| w.chars().all(|c| c.is_ascii_digit());
            if (TIME_UNITS.contains(t) && number(next)) || (number(t) && TIME_UNITS.contains(next))
            {
                out.push(format!("{t} {next}"));
            }
        }
    }
    out
}

/// Most words of the noun phrase an amount counts (`5 active interlibrary loan requests`).
const MAX_UNIT_WORDS: usize = 4;

/// The signs written before a sum of money (`£4.00`).
pub(crate) const CURRENCY_SIGNS: [char; 4] = ['$', '€', '£', '¥'];

/// The amounts `text` states as sums of money (`£4.00` is `4.00`), as [`amounts`] writes
/// them.
#[must_use]
pub fn money_amounts(text: &str) -> Vec<String> {
    tokens(text)
        .filter(|t| {
            t.trim_start_matches(['-', '+', '~'])
                .starts_with(CURRENCY_SIGNS)
        })
        .filter_map(amount_of)
        .collect()
}

/// Whether `word` names a month or a day of the week (`June`, `Mondays`).
#[must_use]
pub fn is_calendar_word(word: &str) -> bool {
    let lower = word.to_lowercase();
    MONTHS.contains(&lower.as_str()) || WEEKDAYS.contains(&lower.trim_end_matches('s'))
}

/// Whether a time [`times`] read is a length of time (`14 days`, `12 weeks`) rather than a
/// point in it (`week 24`, `2025-04-01`, `June`).
#[must_use]
pub fn is_duration(time: &str) -> bool {
    time.split_once(' ').is_some_and(|(n, unit)| {
        n.chars().all(|c| c.is_ascii_digit()) && TIME_UNITS.contains(&unit)
    })
}

/// Whether `text` states a sum of money: a currency sign before a number (`£0.60`, `$12`)
/// or a currency word after one (`750 yuan`, `20 pence`), or says it is free.
#[must_use]
pub fn states_money(text: &str) -> bool {
    const CURRENCIES: [&str; 16] = [
        "yuan", "euro", "euros", "dollar", "dollars", "pound", "pounds", "pence", "cent", "cents",
        "usd", "eur", "gbp", "kr", "sek", "chf",
    ];
    let lower = text.to_lowercase();
    let signed = lower.split_whitespace().any(|t| {
        let t = t.trim_start_matches(['(', '-', '+', '~']);
        t.starts_with(CURRENCY_SIGNS) && t.chars().nth(1).is_some_and(|c| c.is_ascii_digit())
    });
    let tokens = words(&lower);
    let worded = tokens.windows(2).any(|w| {
        w[0].chars().next().is_some_and(|c| c.is_ascii_digit()) && CURRENCIES.contains(&w[1])
    }) || tokens.iter().any(|t| {
        // `20p`
        t.strip_suffix('p')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    });
    signed || worded || tokens.windows(2).any(|w| w == ["free", "of"]) || tokens.contains(&"free")
}

/// Whether `text` states an amount with a unit of time or length (`7 days`, `3 hours`,
/// `150 cm`): what "how long" and "how far" ask for.
#[must_use]
pub fn states_extent(text: &str) -> bool {
    const UNITS: [&str; 24] = [
        "second", "seconds", "minute", "minutes", "min", "hour", "hours", "day", "days", "night",
        "nights", "week", "weeks", "month", "months", "year", "years", "mm", "cm", "m", "km",
        "metres", "meters", "miles",
    ];
    let lower = text.to_lowercase();
    let tokens = words(&lower);
    let glued = tokens.iter().any(|t| {
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && UNITS.contains(&&t[digits..])
    });
    const MORE: [&str; 7] = ["metre", "meter", "mile", "inch", "inches", "feet", "foot"];
    let number = |t: &str| {
        t.chars().next().is_some_and(|c| c.is_ascii_digit())
            || NUMBER_WORDS.contains(&t)
            || ["one", "two", "a"].contains(&t)
    };
    // `per day`, `each week`: a rate, not a length.
    let rate = |j: usize| j > 0 && ["per", "each", "every", "a", "an"].contains(&tokens[j - 1]);
    // `every 10 minutes`: how often, not how long.
    let often = |i: usize| i > 0 && tokens[i - 1] == "every";
    // `7 days`, `10 to 15 working days`: a number, then a unit within three words.
    glued
        || tokens.iter().enumerate().any(|(i, t)| {
            number(t)
                && !often(i)
                && tokens.iter().enumerate().skip(i + 1).take(4).any(|(j, u)| {
                    (UNITS.contains(u) || MORE.contains(u)) && (j == i + 1 || !rate(j))
                })
        })
}

/// Whether `text` states a size: an amount with a unit of length, area, volume, weight or
/// data (`20 cm`, `1.5 kg`, `25 x 21 x 20 cm`, `2 GiB`): what "the largest" and "how big" ask for, and
/// what a length of time (`14 days`) is not.
#[must_use]
pub fn states_size(text: &str) -> bool {
    const UNITS: [&str; 46] = [
        // Amounts of data: "the largest object" and "how big a file".
        "kb",
        "mb",
        "gb",
        "tb",
        "pb",
        "kib",
        "mib",
        "gib",
        "tib",
        "pib",
        "byte",
        "bytes",
        "kilobytes",
        "megabytes",
        "gigabytes",
        "terabytes",
        "petabytes",
        "kbyte",
        "mbyte",
        "mm",
        "cm",
        "m",
        "km",
        "millimetre",
        "millimetres",
        "centimetre",
        "centimetres",
        "metre",
        "metres",
        "meter",
        "meters",
        "inch",
        "inches",
        "foot",
        "feet",
        "ft",
        "g",
        "kg",
        "grams",
        "kilograms",
        "lb",
        "lbs",
        "litre",
        "litres",
        "liters",
        "ml",
    ];
    let lower = text.to_lowercase();
    let tokens = words(&lower);
    let number = |t: &str| t.chars().next().is_some_and(|c| c.is_ascii_digit());
    tokens.iter().enumerate().any(|(i, t)| {
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        let glued = digits > 0 && UNITS.contains(&&t[digits..]);
        // `20 cm`, `25 x 21 x 20 cm`: numbers joined by `x` or `by`, then the unit.
        let spaced = number(t)
            && tokens[i + 1..]
                .iter()
                .take_while(|u| number(u) || ["x", "by"].contains(*u) || UNITS.contains(*u))
                .any(|u| UNITS.contains(u));
        glued || spaced
    })
}

/// Whether `text` states a temperature: a number in degrees (`29°C`, `30 °C`, `84ºF`, `28
/// degrees`).
#[must_use]
pub fn states_temperature(text: &str) -> bool {
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    chars.iter().enumerate().any(|(i, c)| {
        if !c.is_ascii_digit() || chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            return false;
        }
        let rest: String = chars[i + 1..].iter().collect();
        let rest = rest
            .trim_start_matches(['.', ','])
            .trim_start_matches(|c: char| c.is_ascii_digit());
        let rest = rest.trim_start();
        rest.starts_with(['°', 'º']) || rest.starts_with("degree") || rest.starts_with("deg ")
    })
}

/// Whether `text` states an age: a number of years, months or weeks written as one (`10
/// weeks of age`, `8-year-olds`, `aged 16`, `age 5`, `from their 16th birthday`, `65+`,
/// `Age: 18`), or a range of ages ([`age_ranges_in_months`]). A length of time written
/// after something else (`12 months after the second injection`) is none.
#[must_use]
pub fn states_age(text: &str) -> bool {
    static AGE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let pattern = AGE.get_or_init(|| {
        regex::Regex::new(
            r"(?ix)
            \b\d+\s*[-\s]?\s*(?:years?|yrs?|months?|weeks?|days?)[\s-]*(?:old|olds|of\s+age)\b
            | \baged?\s*:?\s*(?:of\s+|under\s+|over\s+|between\s+)?\d+
            | \bages\s+\d+
            | \b\d+(?:st|nd|rd|th)\s+birthday
            | \b\d+\s*\+
            | \b(?:under|over)[\s-]\d+s\b",
        )
        .expect("a valid pattern")
    });
    pattern.is_match(text) || !age_ranges_in_months(text).is_empty()
}

/// Whether a line reads as a heading rather than a statement: a few words, no digit, no
/// `key: value`, and no closing punctuation (`Loan periods`, `How long it takes`).
#[must_use]
pub fn is_heading(line: &str) -> bool {
    let line = line.trim();
    let closed = line
        .chars()
        .last()
        .is_some_and(|c| matches!(c, '.' | '!' | '?' | ';' | ')' | '"' | '\''));
    !line.is_empty()
        && !closed
        && !line.contains(':')
        && !line.chars().any(|c| c.is_ascii_digit())
        && words(line).len() <= 10
}

/// Whether a line opens a section that the lines after it belong to: a heading
/// ([`is_heading`]), a short lead-in ending with a colon (`Booking the 3D printers:`),
/// which the list items under it continue, or a short question alone on its line, which
/// the lines after it answer (a FAQ's `How do I get on the Wi-Fi?`).
#[must_use]
pub fn opens_section(line: &str) -> bool {
    let line = line.trim();
    let lead = |end: char| {
        line.ends_with(end)
            && words(line).len() <= 12
            && !line[..line.len() - 1].contains(['.', ';', '?', '!', ':'])
    };
    is_heading(line) || lead(':') || lead('?')
}

/// Ordinals that number a floor of a building (`the second floor`, `the ground floor`).
const ORDINALS: &[&str] = &[
    "ground", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "top", "lower", "upper",
];

/// What an ordinal numbers when it names a place: a floor, not a participant.
const STOREYS: &[&str] = &["floor", "level", "storey", "story", "deck"];

/// Nouns of a kind of place, which answer "where" without a name (`at tram stops`, `at the
/// front desk`, `in the lobby`). General English only.
const PLACE_NOUNS: &[&str] = &[
    "stop",
    "station",
    "platform",
    "desk",
    "counter",
    "reception",
    "entrance",
    "lobby",
    "office",
    "foyer",
    "corridor",
    "basement",
    "shelf",
    "locker",
    "cupboard",
    "drawer",
    "garage",
    "yard",
    "kitchen",
];

/// Whether `text` states a numbered or an ordinal place: a word and its number (`room
/// 2.04`, `gate 12`), a number and a name (`48 Northgate Road`), or an ordinal floor (`the
/// second floor`). Sums of money, dates and lengths of time are not places.
#[must_use]
pub fn states_location(text: &str) -> bool {
    let raw: Vec<&str> = text.split_whitespace().collect();
    let tokens: Vec<&str> = raw
        .iter()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && !CURRENCY_SIGNS.contains(&c)))
        .collect();
    // `Blue Badge bays: 3` is a count keyed by its plural, not `room 2.04` (or `Platform:
    // 3`).
    let keyed = |i: usize| raw[i].ends_with("s:");
    // `3 (Blue Badge holders only)`: a number and a name apart are no address.
    let joined = |i: usize| {
        raw[i].ends_with(|c: char| c.is_alphanumeric())
            && raw[i + 1].starts_with(|c: char| c.is_alphanumeric())
    };
    let word = |t: &str| {
        t.chars().count() >= 2 && t.chars().all(char::is_alphabetic) && !is_function_word(t)
    };
    let number = |t: &str| {
        t.chars().next().is_some_and(|c| c.is_ascii_digit())
            && t.chars().all(|c| c.is_ascii_digit() || c == '.')
    };
    let timed = |t: &str| {
        let t = t.to_lowercase();
        MONTHS.contains(&t.as_str()) || TIME_UNITS.contains(&t.as_str()) || is_calendar_word(&t)
    };
    let name = |t: &str| t.chars().next().is_some_and(char::is_uppercase);
    // `Phone: 01632 960 430` is a number to call, not `room 2.04`.
    let dialled = |t: &str| {
        matches!(
            t.to_lowercase().as_str(),
            "phone"
                | "tel"
                | "telephone"
                | "mobile"
                | "fax"
                | "ext"
                | "extension"
                | "call"
                | "text"
        )
    };
    tokens.windows(2).enumerate().any(|(i, w)| {
        (word(w[0]) && number(w[1]) && !timed(w[0]) && !dialled(w[0]) && !keyed(i))
            || (number(w[0]) && word(w[1]) && name(w[1]) && !timed(w[1]) && joined(i))
            || (ORDINALS.contains(&w[0].to_lowercase().as_str())
                && STOREYS.contains(&w[1].to_lowercase().as_str()))
    })
}

/// The nouns of a kind of place `text` states ([`PLACE_NOUNS`]: `stops`, `desk`), as
/// written: they answer "where" without a name, unless they are what the question names.
#[must_use]
pub fn place_nouns(text: &str) -> Vec<&str> {
    // A place noun answers "where" as a place (`at the front desk`, `in the kitchen`, `Tram
    // stops have …`), not as what names a kind of thing (`your kitchen caddy`).
    const AT: &[&str] = &[
        "at", "in", "on", "inside", "behind", "beside", "near", "by", "from", "outside", "under",
        "opposite", "to", "into", "next",
    ];
    let all = words(text);
    (0..all.len())
        .filter(|&i| {
            let lower = all[i].to_lowercase();
            let place = PLACE_NOUNS.contains(&lower.as_str())
                || lower
                    .strip_suffix('s')
                    .is_some_and(|one| PLACE_NOUNS.contains(&one));
            // A singular one before another word may only name a kind of thing; plural,
            // or ending its phrase, it is the place (`Tram stops have …`, `the office is`).
            let head =
                lower.ends_with('s') || all.get(i + 1).is_none_or(|next| is_function_word(next));
            place
                && (head
                    || all[i.saturating_sub(3)..i]
                        .iter()
                        .any(|w| AT.contains(&w.to_lowercase().as_str())))
        })
        .map(|i| all[i])
        .collect()
}

/// Whether a text states a time (see [`times`]).
#[must_use]
pub fn states_time(text: &str) -> bool {
    !times(text).is_empty()
}

/// Lower-case word tokens of `text` with the numbers in them, hyphens and dashes splitting
/// (`16–25` is `16`, `25`; `8-year-old` is `8`, `year`, `old`), and `+` kept as a token
/// (`65+`).
fn age_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '\'' || c == '\u{2019}' {
            word.push(c);
        } else {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if c == '+' {
                out.push("+".into());
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A whole number of years a token states (`16`, `16th`), within a life's span.
fn years_in(token: &str) -> Option<u32> {
    let digits = token
        .strip_suffix("th")
        .or_else(|| token.strip_suffix("st"))
        .or_else(|| token.strip_suffix("nd"))
        .or_else(|| token.strip_suffix("rd"))
        .unwrap_or(token);
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=120).contains(n) && digits.len() <= 3)
}

/// The age a question states as the asker's or as the person's it asks about (`I'm 22`,
/// `my 8-year-old`, `a 16 year old`, `aged 70`), in years.
#[must_use]
pub fn stated_age(text: &str) -> Option<u32> {
    let t = age_tokens(text);
    let at = |i: usize| t.get(i).map(String::as_str);
    for (i, token) in t.iter().enumerate() {
        let Some(n) = years_in(token) else { continue };
        let before = i.checked_sub(1).and_then(at);
        let after = (at(i + 1), at(i + 2));
        let old = matches!(
            after,
            (Some("year" | "years" | "yr" | "yrs"), Some("old" | "olds"))
        );
        let aged = matches!(before, Some("aged" | "age"));
        // `I'm 22`, `I am 70`, `she's 10`: a bare number after who is.
        let is = matches!(
            before,
            Some("i'm" | "i\u{2019}m" | "am" | "he's" | "she's" | "is")
        ) && after
            .0
            .is_none_or(|w| is_function_word(w) || ["years", "yrs"].contains(&w));
        if old || aged || is {
            return Some(n);
        }
    }
    None
}

/// The ranges of age `text` states (`aged 16–25`, `aged 65 and over`, `under 16`, `from
/// their 16th birthday`, `12 to 15-year-olds`), in years, each as (lowest, highest).
/// Only a range written as an age counts: `2 to 6 days` is none.
#[must_use]
pub fn age_ranges(text: &str) -> Vec<(u32, u32)> {
    const ABOVE: &[&str] = &["over", "older", "above", "+"];
    let t = age_tokens(text);
    let at = |i: usize| t.get(i).map(String::as_str);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        // `aged 3–12`, and the people an age range is written after (`children 3–12`,
        // `juniors under 16`).
        let cue = matches!(at(i), Some("aged" | "ages" | "age"))
            || AGED_PEOPLE.contains(&at(i).unwrap_or_default());
        let bound = matches!(at(i), Some("under" | "over" | "below" | "above"));
        if cue || bound {
            let word = at(i).unwrap_or_default();
            let start = i + 1 + usize::from(matches!(at(i + 1), Some("of" | "between")));
            // `aged under 16`, `aged over 65`.
            let (limit, first) = match at(start) {
                Some(w @ ("under" | "over" | "below" | "above")) => (Some(w), start + 1),
                _ => (bound.then_some(word), start),
            };
            if let Some(lo) = at(first).and_then(years_in) {
                let next = at(first + 1);
                let range = match (limit, next) {
                    (Some("under" | "below"), _) => Some((0, lo.saturating_sub(1))),
                    (Some(_), _) => Some((lo + 1, 120)),
                    (None, Some("to" | "and")) if at(first + 2).and_then(years_in).is_some() => {
                        at(first + 2).and_then(years_in).map(|hi| (lo, hi))
                    }
                    (None, Some("and" | "or"))
                        if at(first + 2).is_some_and(|w| ABOVE.contains(&w)) =>
                    {
                        Some((lo, 120))
                    }
                    (None, Some("+")) => Some((lo, 120)),
                    (None, Some(hi)) if years_in(hi).is_some() => years_in(hi).map(|hi| (lo, hi)),
                    _ => None,
                };
                // A bound alone (`under 16`) is an age only when no unit follows it:
                // `under 50 people` is a count.
                let counted = bound
                    && limit == Some(word)
                    && next.is_some_and(|w| {
                        w.chars().all(char::is_alphabetic)
                            && !is_function_word(w)
                            && !["year", "years", "yrs"].contains(&w)
                            && !AGE_VERBS.contains(&w)
                    });
                // `babies under 6 months`: an age in months or weeks, which
                // [`age_ranges_in_months`] reads.
                let short = matches!(next, Some("month" | "months" | "week" | "weeks"));
                if let Some(r) = range.filter(|_| !counted && !short) {
                    out.push(r);
                }
            }
        }
        // `12 to 15-year-olds`, `65 and over`, `from their 16th birthday`.
        if let Some(n) = at(i).and_then(years_in) {
            if matches!(
                (at(i + 1), at(i + 2)),
                (Some("year" | "years"), Some("olds" | "old"))
            ) && i >= 2
                && matches!(at(i - 1), Some("to" | "and"))
            {
                if let Some(lo) = at(i - 2).and_then(years_in) {
                    out.push((lo, n));
                }
            }
            if matches!(at(i + 1), Some("birthday"))
                && matches!(at(i.wrapping_sub(2)), Some("from" | "after"))
            {
                out.push((n, 120));
            }
            if matches!(at(i + 1), Some("birthday"))
                && matches!(at(i.wrapping_sub(2)), Some("until" | "before"))
            {
                out.push((0, n.saturating_sub(1)));
            }
        }
        i += 1;
    }
    // A fare or a price for an `Adult` or a `Child` with no ages of its own (`Adult return:
    // £6.20`, `Child single: £1.85`) is for the ages the words mean: 16 and over, under 16.
    // Not a count of them (`Adults: 4`, `2 children`).
    if out.is_empty() {
        let counted = |j: usize| {
            [j.checked_sub(1), Some(j + 1)]
                .into_iter()
                .flatten()
                .filter_map(|k| t.get(k))
                .any(|n| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
        };
        for (j, w) in t.iter().enumerate() {
            if counted(j) {
                continue;
            }
            match w.as_str() {
                "adult" | "adults" => out.push((16, 120)),
                "child" | "children" | "kid" | "kids" => out.push((0, 15)),
                _ => {}
            }
        }
    }
    out.dedup();
    out
}

/// Words for people of an age, after which a range of numbers is a range of ages
/// (`children 3–12`, `juniors under 18`).
/// The age a question states, in months, as the range it spans: `my 9-month-old` is 9 to
/// 9, `I'm 22` ([`stated_age`]) 264 to 275.
#[must_use]
pub fn stated_age_in_months(text: &str) -> Option<(u32, u32)> {
    let t = age_tokens(text);
    let at = |i: usize| t.get(i).map(String::as_str);
    for (i, token) in t.iter().enumerate() {
        let Some(n) = years_in(token) else { continue };
        let months = matches!(at(i + 1), Some("month" | "months" | "mth" | "mths"));
        let old = matches!(at(i + 2), Some("old" | "olds"));
        let aged = matches!(i.checked_sub(1).and_then(at), Some("aged" | "age"));
        let is = matches!(
            i.checked_sub(1).and_then(at),
            Some("i'm" | "i\u{2019}m" | "am" | "he's" | "she's" | "is" | "turned")
        );
        if months && (old || aged || is) {
            return Some((n, n));
        }
    }
    stated_age(text).map(|y| (y * 12, y * 12 + 11))
}

/// The ranges of age `text` states, in months: those in years ([`age_ranges`]), and those
/// written in months where the text speaks of ages (`Babies under 6 months`, `age_group:
/// 6-17 months`, `from 3 months`).
#[must_use]
pub fn age_ranges_in_months(text: &str) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = age_ranges(text)
        .into_iter()
        .map(|(lo, hi)| (lo * 12, hi * 12 + 11))
        .collect();
    let t = age_tokens(text);
    let about_ages = t.iter().any(|w| {
        AGED_PEOPLE.contains(&w.as_str())
            || ["age", "aged", "ages", "baby", "old", "olds"].contains(&w.as_str())
    });
    if !about_ages {
        return out;
    }
    let at = |i: usize| t.get(i).map(String::as_str);
    for i in 0..t.len() {
        if !matches!(at(i), Some("month" | "months")) {
            continue;
        }
        let Some(n) = i.checked_sub(1).and_then(at).and_then(years_in) else {
            continue;
        };
        let before = i.checked_sub(2).and_then(at);
        let first = i.checked_sub(3).and_then(at).and_then(years_in);
        let range = match (before, first) {
            (Some("under" | "below"), _) => Some((0, n.saturating_sub(1))),
            (Some("over" | "above"), _) => Some((n + 1, 1440)),
            (Some("from"), _) => Some((n, 1440)),
            // `6-17 months`, `6 to 17 months`: the tokens drop the dash.
            (Some(lo), _) if years_in(lo).is_some() => years_in(lo).map(|lo| (lo, n)),
            (Some("to" | "and"), Some(lo)) => Some((lo, n)),
            _ => None,
        };
        out.extend(range);
    }
    out
}

const AGED_PEOPLE: &[&str] = &[
    "children",
    "child",
    "kids",
    "kid",
    "juniors",
    "junior",
    "infants",
    "infant",
    "babies",
    "toddlers",
    "teens",
    "teenagers",
    "youths",
    "youth",
    "adults",
    "adult",
    "seniors",
];

/// Verbs that follow a bound of age in a rule (`under 16 are`, `over 65 travel`): the
/// bound is then an age, not a count of something.
const AGE_VERBS: &[&str] = &[
    "travel", "pay", "get", "go", "need", "must", "may", "can", "cannot", "ride", "stay", "use",
    "receive", "qualify", "are", "is", "were", "need", "eat", "swim", "join",
];

/// The day of the week a word names (Monday is 0), written whole (`Saturday`, `Saturdays`)
/// or, when `short` allows, cut to its first letters (`Sat`, `Thur`, `Thurs`).
fn weekday(word: &str, short: bool) -> Option<usize> {
    let lower = word.to_lowercase();
    let lower = lower.trim_end_matches('.');
    WEEKDAYS.iter().position(|d| {
        *d == lower
            || d.strip_suffix("day")
                .is_some_and(|_| lower.strip_suffix('s') == Some(d))
            || (short && lower.len() >= 3 && lower.len() < d.len() && d.starts_with(lower))
    })
}

/// The days of the week `text` states, as a set (Monday first); `None` when it states none.
/// A day written whole counts anywhere; a short one (`Sun`, `Fri`) only as an end of a
/// range (`Sun–Thu`, `Friday to Sunday`), which holds every day between, wrapping past
/// Sunday, or before its hours (`Sat 09:00–12:00`). `weekdays` holds Monday to Friday and `weekend` Saturday and Sunday, unless the
/// text names its days itself (`Weekend (Fri–Sat)`).
#[must_use]
pub fn days_stated(text: &str) -> Option<[bool; 7]> {
    let mut tokens: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            if matches!(c, '-' | '\u{2013}' | '\u{2014}') {
                tokens.push("to".into());
            }
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let mut days = [false; 7];
    let mut named = false;
    let mut i = 0;
    while i < tokens.len() {
        let through = |t: &str| {
            ["to", "through", "thru", "until", "till"].contains(&t.to_lowercase().as_str())
        };
        if let (Some(a), Some(t), Some(b)) = (
            weekday(&tokens[i], true),
            tokens.get(i + 1),
            tokens.get(i + 2).and_then(|w| weekday(w, true)),
        ) {
            if through(t) {
                let mut d = a;
                loop {
                    days[d] = true;
                    if d == b {
                        break;
                    }
                    d = (d + 1) % 7;
                }
                named = true;
                i += 3;
                continue;
            }
        }
        // A short day written with its capital before its hours (`Sat 09:00–12:00`, `Sun
        // closed`) is a day too.
        let before_hours = tokens[i].starts_with(|c: char| c.is_uppercase())
            && tokens.get(i + 1).is_some_and(|n| {
                n.starts_with(|c: char| c.is_ascii_digit())
                    || ["closed", "open"].contains(&n.to_lowercase().as_str())
            });
        if let Some(d) = weekday(&tokens[i], before_hours) {
            days[d] = true;
            named = true;
        }
        i += 1;
    }
    if !named {
        for t in &tokens {
            match t.to_lowercase().as_str() {
                "weekday" | "weekdays" => days[..5].iter_mut().for_each(|d| *d = true),
                "weekend" | "weekends" => days[5..].iter_mut().for_each(|d| *d = true),
                _ => continue,
            }
            named = true;
        }
    }
    named.then_some(days)
}

/// Whether `word` names a day of the week, whole (`Saturday`, `Saturdays`).
#[must_use]
pub fn is_weekday(word: &str) -> bool {
    weekday(word, false).is_some()
}

/// A length of time's unit, as days (`week` is 7), or `None` for another word.
pub(crate) fn days_per(unit: &str) -> Option<u32> {
    match unit.trim_end_matches('s') {
        "day" | "night" => Some(1),
        "week" => Some(7),
        "month" => Some(30),
        "year" => Some(365),
        _ => None,
    }
}

/// A release number (`2.9.3`, `v3.1`, `3.1`) as one number that orders releases: two or
/// three parts of digits joined by dots, each part below a thousand.
fn release(token: &str) -> Option<u32> {
    let digits = token.strip_prefix(['v', 'V']).unwrap_or(token);
    let parts: Vec<u32> = digits
        .split('.')
        .map(|p| p.parse::<u32>().ok().filter(|n| *n < 1000))
        .collect::<Option<_>>()?;
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    Some(parts[0] * 1_000_000 + parts[1] * 1_000 + parts.get(2).copied().unwrap_or(0))
}

/// The releases `text` states (`we still run 2.9.3`, `on v3.1`), each as [`release`]
/// orders them: a number of two or three dotted parts that no unit follows (`2.5 GiB` is
/// a size).
#[must_use]
pub fn stated_releases(text: &str) -> Vec<u32> {
    let tokens: Vec<&str> = text
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .collect();
    tokens
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            let unit = tokens.get(i + 1).is_some_and(|u| {
                u.chars().next().is_some_and(char::is_alphabetic)
                    && u.len() <= 3
                    && !is_function_word(&u.to_lowercase())
            });
            !unit && t.contains('.')
        })
        .filter_map(|(_, t)| release(t))
        .collect()
}

/// The ranges of releases `text` states (`3.0.0 to 3.2.0`, `2.9.0–2.9.4`, `3.1 or later`,
/// `before 3.2.0`, `up to 2.9.4`, `since 3.0`), each inclusive, as [`release`] orders them.
#[must_use]
pub fn release_ranges(text: &str) -> Vec<(u32, u32)> {
    let tokens: Vec<String> = text
        .split_whitespace()
        .flat_map(|t| t.split(['–', '—']).map(str::to_owned).collect::<Vec<_>>())
        .map(|t| {
            t.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect();
    let at = |i: usize| tokens.get(i).map(String::as_str);
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some(v) = release(token) else { continue };
        let before = i.checked_sub(1).and_then(at);
        let before2 = i.checked_sub(2).and_then(at);
        match (at(i + 1), at(i + 2)) {
            (Some("to" | "through" | "and"), Some(w)) if release(w).is_some() => {
                out.push((v, release(w).unwrap_or(v)));
            }
            (Some(w), _) if release(w).is_some() && text.contains(&format!("{token}–")) => {
                out.push((v, release(w).unwrap_or(v)));
            }
            (Some("or" | "and"), Some("later" | "newer" | "above" | "higher")) => {
                out.push((v, u32::MAX));
            }
            _ => {}
        }
        match (before2, before) {
            (_, Some("before" | "below"))
            | (Some("prior" | "older" | "earlier"), Some("to" | "than")) => {
                out.push((0, v.saturating_sub(1)));
            }
            (Some("up"), Some("to")) => out.push((0, v)),
            (_, Some("since" | "from")) if !matches!(at(i + 1), Some("to" | "through")) => {
                out.push((v, u32::MAX));
            }
            _ => {}
        }
    }
    out
}

/// The lengths of time `text` states as a number and a unit (`10 days`, `two years`, `a
/// week`), in days.
#[must_use]
pub fn stated_lengths(text: &str) -> Vec<u32> {
    const RATE_LEADS: [&str; 12] = [
        "much", "cost", "costs", "pay", "paid", "charge", "charged", "price", "once", "twice",
        "times", "earn",
    ];
    let t = age_tokens(text);
    let mut out = Vec::new();
    for (i, token) in t.iter().enumerate() {
        let n = if token == "a" || token == "an" {
            Some(1)
        } else {
            count_in(token)
        };
        let (Some(n), Some(unit)) = (n, t.get(i + 1)) else {
            continue;
        };
        // `how much a day`, `£40 a week`, `twice a month`: a rate, not a length.
        let rate = (token == "a" || token == "an")
            && i > 0
            && (RATE_LEADS.contains(&t[i - 1].as_str())
                || t[i - 1].chars().any(|c| c.is_ascii_digit()));
        if rate {
            continue;
        }
        // `a 16 year old` is an age, not a length.
        if matches!(t.get(i + 2).map(String::as_str), Some("old" | "olds")) {
            continue;
        }
        if let Some(per) = days_per(unit) {
            out.push(n * per);
        }
    }
    out
}

/// The ranges of a length of time `text` states (`4 to 13 days`, `2–5 years`, `7 days or
/// more`, `less than 2 years`, `up to 14 nights`), in days, each as (lowest, highest).
#[must_use]
pub fn length_ranges(text: &str) -> Vec<(u32, u32)> {
    // An agreement named by how long it runs (`24-month contract`, `7-day pass`) is for
    // that length: "the 2 year contract" is the `24-month` one. A length alone (`within
    // 14 days`) is a limit, not a kind of agreement, and names no range.
    static NAMED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let named = NAMED.get_or_init(|| {
        regex::Regex::new(
            r"(?i)\b(\d{1,3})[- ](day|week|month|year)s?[- ](contract|plan|term|deal|pass|ticket|membership|subscription|tariff|lease|tenancy|agreement)s?\b",
        )
        .expect("a valid pattern")
    });
    text.split([';', ','])
        .flat_map(|piece| {
            let t = age_tokens(piece);
            let at = |i: usize| t.get(i).map(String::as_str);
            let mut out: Vec<(u32, u32)> = named
                .captures_iter(piece)
                .filter_map(|c| {
                    let n: u32 = c[1].parse().ok()?;
                    let per = days_per(&c[2].to_lowercase())?;
                    Some((n * per, n * per + per - 1))
                })
                .collect();
            for (i, token) in t.iter().enumerate() {
                let Some(n) = count_in(token) else { continue };
                let before = (i.checked_sub(2).and_then(at), i.checked_sub(1).and_then(at));
                // `4 to 13 days`, `2–5 years`: the unit after the second number.
                let second = match (at(i + 1), at(i + 2)) {
                    (Some("to"), Some(m)) => count_in(m).map(|m| (m, i + 3)),
                    (Some(m), _) if m.chars().all(|c| c.is_ascii_digit()) => {
                        count_in(m).map(|m| (m, i + 2))
                    }
                    _ => None,
                };
                if let Some((m, u)) = second {
                    if let Some(per) = at(u).and_then(days_per) {
                        if m > n {
                            out.push((n * per, m * per + per - 1));
                        }
                        continue;
                    }
                }
                let Some(per) = at(i + 1).and_then(days_per) else {
                    continue;
                };
                let after = (at(i + 2), at(i + 3));
                let range = match (before, after) {
                    ((Some("less" | "fewer"), Some("than")), _) | ((_, Some("under")), _) => {
                        Some((0, n * per - 1))
                    }
                    ((Some("up"), Some("to")), _) => Some((0, n * per + per - 1)),
                    ((Some("more"), Some("than")), _) | ((_, Some("over")), _) => {
                        Some((n * per + per, u32::MAX))
                    }
                    ((Some("at"), Some("least")), _) => Some((n * per, u32::MAX)),
                    (_, (Some("or" | "and"), Some("more" | "over" | "longer"))) => {
                        Some((n * per, u32::MAX))
                    }
                    _ => None,
                };
                out.extend(range);
            }
            out
        })
        .collect()
}

/// A token of a measure: a number, a word, or what joins or ends them.
#[derive(Debug, Clone, PartialEq)]
enum MeasureToken {
    Number(f64),
    Word(String),
    /// `–`, `-`, `to`: between the two ends of a range.
    Dash,
    /// `10+`: and more.
    Plus,
    /// `;`, `,`, `.` and brackets: a field or clause ends, and a measure with it.
    Stop,
}

/// `text` as [`MeasureToken`]s, lower case: `150g/km` is `150` and `g/km`, `10–25kg` is
/// `10`, a dash, `25` and `kg`. A clock time (`08:00`) or a dotted release (`2.9.3`) is a
/// word, not a number.
fn measure_tokens(text: &str) -> Vec<MeasureToken> {
    let chars: Vec<char> = text.to_lowercase().chars().collect();
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    let letter = |i: usize| chars.get(i).is_some_and(|c| c.is_alphabetic());
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A number inside a name (`A4`, `NCT04123456`, `VELA-2`) measures nothing.
        let named = i > 0
            && (chars[i - 1].is_alphanumeric()
                || (chars[i - 1] == '-' && i > 1 && chars[i - 2].is_alphabetic()));
        if c.is_ascii_digit() && named {
            let start = i;
            while chars.get(i).is_some_and(|c| c.is_alphanumeric()) {
                i += 1;
            }
            out.push(MeasureToken::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || (matches!(c, '£' | '$' | '€') && digit(i + 1)) {
            // A sum of money is a measure in its currency (`£5,001 – £10,000` holds the
            // asker's `£7,000`), its symbol read as the unit after the number.
            let currency = (!c.is_ascii_digit()).then(|| c.to_string());
            if currency.is_some() {
                i += 1;
            }
            let start = i;
            while digit(i) || (matches!(chars.get(i), Some('.' | ':' | ',')) && digit(i + 1)) {
                // `1,000` is a thousand; `Mon, 2` is a list.
                if chars[i] == ','
                    && !(digit(i + 1) && digit(i + 2) && digit(i + 3) && !digit(i + 4))
                {
                    break;
                }
                i += 1;
            }
            let written: String = chars[start..i].iter().filter(|c| **c != ',').collect();
            let dots = written.matches('.').count();
            match written.parse::<f64>() {
                Ok(n) if dots <= 1 && !written.contains(':') => out.push(MeasureToken::Number(n)),
                _ => out.push(MeasureToken::Word(written)),
            }
            if let Some(currency) = currency {
                out.push(MeasureToken::Word(currency));
            }
        } else if c.is_alphabetic() {
            let start = i;
            while letter(i) || (matches!(chars.get(i), Some('/' | '\'')) && letter(i + 1)) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(if word == "to" {
                MeasureToken::Dash
            } else {
                MeasureToken::Word(word)
            });
        } else {
            match c {
                '–' | '—' | '-' => out.push(MeasureToken::Dash),
                '+' => out.push(MeasureToken::Plus),
                // A share is a measure in percent (`below 20%`, `about 15% battery left`).
                '%' => out.push(MeasureToken::Word("%".into())),
                ';' | ',' | '.' | '(' | ')' | '?' | '!' | '|' => out.push(MeasureToken::Stop),
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// The unit a word after a number is (`kg`, `g/km`, `items`), in one spelling (`kilos`
/// is `kg`, `items` is `item`), or `None` when it is no unit: a function word, a length of
/// time in days (read by [`length_ranges`]), an age, a count of people (read by
/// [`party_ranges`]), a calendar word or an ordinal's ending (`1st`).
fn measure_unit(word: &str) -> Option<String> {
    const ALIASES: &[(&[&str], &str)] = &[
        (&["kilo", "kilos", "kilogram", "kilograms", "kgs"], "kg"),
        (&["gram", "grams", "gramme", "grammes"], "g"),
        (&["litre", "litres", "liter", "liters", "ltr"], "l"),
        (
            &["millilitre", "millilitres", "milliliter", "milliliters"],
            "ml",
        ),
        (&["metre", "metres", "meter", "meters"], "m"),
        (
            &["kilometre", "kilometres", "kilometer", "kilometers", "kms"],
            "km",
        ),
        (
            &[
                "centimetre",
                "centimetres",
                "centimeter",
                "centimeters",
                "cms",
            ],
            "cm",
        ),
        (
            &["millimetre", "millimetres", "millimeter", "millimeters"],
            "mm",
        ),
        (&["mile", "miles"], "mi"),
        (&["pound", "pounds", "lbs"], "lb"),
        (&["hour", "hours", "hr", "hrs"], "h"),
        (&["minute", "minutes", "mins"], "min"),
    ];
    const NOT_UNITS: &[&str] = &[
        "st", "nd", "rd", "th", "am", "pm", "old", "olds", "yr", "yrs", "more", "less", "or",
        "and", "per", "x", "p", "percent",
    ];
    // A verb's form after a number (`12 arriving`, `3 booked`) is no unit.
    let verb = word.chars().count() > 4 && (word.ends_with("ing") || word.ends_with("ed"));
    if word.chars().count() > 14
        || verb
        || is_light_word(word)
        || is_function_word(word)
        || NOT_UNITS.contains(&word)
        || days_per(word).is_some()
        || is_calendar_word(word)
        || PARTY_WORDS.contains(&word)
        || matches!(
            word,
            "person" | "adult" | "child" | "children" | "guest" | "student"
        )
    {
        return None;
    }
    if let Some((_, unit)) = ALIASES.iter().find(|(forms, _)| forms.contains(&word)) {
        return Some((*unit).to_owned());
    }
    let one = match word.strip_suffix('s') {
        Some(rest) if rest.chars().count() >= 3 && !rest.ends_with('s') => rest,
        _ => word,
    };
    Some(one.to_owned())
}

/// A measure in the smaller unit of its kind, so that a question's `1.8 litre engine`
/// meets a page's `up to 1549cc`: litres and cubic centimetres in millilitres, kilograms
/// in grams. Other units are as they are.
fn in_base(unit: String, n: f64) -> (String, f64) {
    match unit.as_str() {
        "l" => ("ml".to_owned(), n * 1000.0),
        "cc" | "cm3" | "cm³" => ("ml".to_owned(), n),
        "kg" => ("g".to_owned(), n * 1000.0),
        _ => (unit, n),
    }
}

/// The measures `text` states as a number and a unit (`my dog weighs 18kg`, `it does
/// 150g/km`), as (unit, value): the asker's own, which a range of the same unit may hold.
#[must_use]
pub fn stated_measures(text: &str) -> Vec<(String, f64)> {
    // A bound the question states (`above 3 times the limit`, `between 10 and 20 kg`) is
    // what it asks about, not the asker's own measure.
    const BOUNDS: &[&str] = &[
        "above",
        "over",
        "under",
        "below",
        "than",
        "to",
        "least",
        "most",
        "max",
        "maximum",
        "min",
        "minimum",
        "between",
        "and",
        "exceeding",
        "upto",
    ];
    let t = measure_tokens(text);
    (0..t.len().saturating_sub(1))
        .filter_map(|i| match (&t[i], &t[i + 1]) {
            (MeasureToken::Number(n), MeasureToken::Word(u)) => {
                let bound =
                    i.checked_sub(1).is_some_and(|j| match &t[j] {
                        MeasureToken::Word(w) => BOUNDS.contains(&w.as_str()),
                        MeasureToken::Dash => true,
                        _ => false,
                    }) || matches!(t.get(i + 2), Some(MeasureToken::Dash | MeasureToken::Plus));
                measure_unit(u).filter(|_| !bound).map(|u| in_base(u, *n))
            }
            _ => None,
        })
        .collect()
}

/// The words that state the measures `text` states (`weighs` of `she weighs 30 kilos`,
/// `worth` of `worth about £7,000`), with the units as written (`kilos`): the asker's
/// statement of their own measure, not what is asked.
#[must_use]
pub fn measure_words(text: &str) -> Vec<String> {
    const ABOUT: &[&str] = &[
        "about",
        "around",
        "roughly",
        "approximately",
        "approx",
        "nearly",
        "almost",
        "some",
        "just",
        "only",
    ];
    let t = measure_tokens(text);
    let stated = stated_measures(text);
    let mut out = Vec::new();
    for i in 0..t.len().saturating_sub(1) {
        let (MeasureToken::Number(n), MeasureToken::Word(u)) = (&t[i], &t[i + 1]) else {
            continue;
        };
        if !measure_unit(u).is_some_and(|u| stated.contains(&in_base(u, *n))) {
            continue;
        }
        out.push(u.clone());
        let verb = t[..i].iter().rev().find_map(|w| match w {
            MeasureToken::Word(w) if ABOUT.contains(&w.as_str()) => None,
            MeasureToken::Word(w) => Some(Some(w.clone())),
            _ => Some(None),
        });
        out.extend(verb.flatten());
    }
    out
}

/// The ranges of a measure `text` states, each as (unit, lowest, highest): `10–25 kg`,
/// `111 to 170 g/km`, `between 10 and 25 kg`, `up to 10 kg`, `under 5kg`, `over 25 kg`,
/// `171 g/km and over`, `25kg+`. A range ends at a field or a clause; lengths of time in
/// days, ages and counts of people have readings of their own ([`length_ranges`],
/// [`age_ranges`], [`party_ranges`]).
#[must_use]
pub fn measure_ranges(text: &str) -> Vec<(String, f64, f64)> {
    use MeasureToken::{Dash, Number, Plus, Word};
    let t = measure_tokens(text);
    let word = |i: usize| match t.get(i) {
        Some(Word(w)) => Some(w.as_str()),
        _ => None,
    };
    let number = |i: usize| match t.get(i) {
        Some(Number(n)) => Some(*n),
        _ => None,
    };
    let unit = |i: usize| word(i).and_then(measure_unit);
    // Just above or below a bound that is not itself held (`over 25 kg`).
    const STEP: f64 = 1e-6;
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    // Where the last bound's number was, and its unit.
    let mut last_bound: Option<(usize, String)> = None;
    for i in 0..t.len() {
        let Some(n) = number(i) else { continue };
        // `up to` reads its `to` as a dash.
        let up_to = i >= 2 && t[i - 1] == Dash && word(i - 2) == Some("up");
        let before = if up_to {
            (Some("up"), Some("to"))
        } else {
            (
                i.checked_sub(2).and_then(word),
                i.checked_sub(1).and_then(word),
            )
        };
        // `10–25 kg`, `10 to 25 kg`, `10kg–25kg`, `between 10 and 25 kg`.
        let second = match (t.get(i + 1), t.get(i + 2)) {
            (Some(Dash), Some(Number(m))) => Some((*m, i + 3)),
            (Some(Word(w)), Some(Number(m))) if w == "and" && before.1 == Some("between") => {
                Some((*m, i + 3))
            }
            (Some(Word(_)), Some(Dash)) => number(i + 3).map(|m| (m, i + 4)),
            _ => None,
        };
        if let Some((m, u)) = second {
            if let Some(u) = unit(u).filter(|_| m > n) {
                if unit(i + 1).is_none_or(|first| first == u) {
                    let (_, m) = in_base(u.clone(), m);
                    let (u, n) = in_base(u, n);
                    out.push((u, n, m));
                }
            }
            continue;
        }
        let Some(u) = unit(i + 1) else { continue };
        let bound = match (before, word(i + 2), word(i + 3), t.get(i + 2)) {
            (
                (_, Some("under" | "below")) | (Some("less" | "fewer" | "lower"), Some("than")),
                ..,
            ) => Some((0.0, n - STEP)),
            (
                (Some("up"), Some("to"))
                | (_, Some("max" | "maximum" | "upto"))
                | (Some("at"), Some("most")),
                ..,
            )
            | ((Some("no" | "not"), Some("more" | "over")), ..) => Some((0.0, n)),
            (
                (_, Some("over" | "above" | "exceeding"))
                | (Some("more" | "greater" | "higher"), Some("than")),
                ..,
            ) => Some((n + STEP, f64::INFINITY)),
            ((Some("at"), Some("least")) | (_, Some("min" | "minimum" | "from")), ..) => {
                Some((n, f64::INFINITY))
            }
            (_, Some("or" | "and"), Some("more" | "over" | "above" | "heavier" | "longer"), _)
            | (_, _, _, Some(Plus)) => Some((n, f64::INFINITY)),
            (_, Some("or" | "and"), Some("less" | "under" | "below" | "fewer" | "lighter"), _) => {
                Some((0.0, n))
            }
            _ => None,
        };
        if let Some((lo, hi)) = bound {
            let (_, hi) = in_base(u.clone(), hi);
            let (u, lo) = in_base(u, lo);
            // `below 70% but at least 20%`: two bounds of one unit joined by `but` or
            // `and` are one range between them.
            let joined = last_bound.as_ref().is_some_and(|(p, pu)| {
                *pu == u && i <= p + 5 && matches!(word(p + 2), Some("but" | "and"))
            });
            match out.last_mut() {
                Some(last) if joined => {
                    last.1 = last.1.max(lo);
                    last.2 = last.2.min(hi);
                }
                _ => out.push((u.clone(), lo, hi)),
            }
            last_bound = Some((i, u));
        }
    }
    out
}

/// Whether a token is a year (`2024`), within the years documents speak of.
#[must_use]
pub fn is_year(token: &str) -> bool {
    year_in(token).is_some()
}

/// A year a token states (`2024`), within the years documents speak of.
fn year_in(token: &str) -> Option<u32> {
    (token.len() == 4)
        .then(|| token.parse::<u32>().ok())
        .flatten()
        .filter(|y| (1900..=2100).contains(y))
}

/// The years `text` states (`in 2024`, `the 2025-26 season`, `1 January 2026`).
#[must_use]
pub fn stated_years(text: &str) -> Vec<u32> {
    let mut out: Vec<u32> = words(text).into_iter().filter_map(year_in).collect();
    // `in 2025/26`: a season of two years states both.
    for (lo, hi) in year_ranges(text) {
        if hi == lo + 1 && out.contains(&lo) && !out.contains(&hi) {
            out.push(hi);
        }
    }
    out
}

/// The years `text` states, each as an inclusive range: a year alone (`2024`) is itself;
/// `2025-26` and `2024 to 2026` are both ends; `before 2001` ends the year before, `before
/// March 2001` in it; `since 2019`, `from 2019`, `2019 onwards` and `2019 or later` have no
/// end, `after 2019` starts the year after.
#[must_use]
pub fn year_ranges(text: &str) -> Vec<(u32, u32)> {
    let lower = text.to_lowercase();
    let t = words(&lower);
    let mut out = Vec::new();
    for (i, token) in t.iter().enumerate() {
        let Some(y) = year_in(token) else { continue };
        // `2025-26`, `2025/26`, `2024 to 2026`.
        let next = t.get(i + 1).copied();
        let joined = next.filter(|n| {
            n.len() == 2
                && n.chars().all(|c| c.is_ascii_digit())
                && ["-", "/", "–"]
                    .iter()
                    .any(|j| lower.contains(&format!("{token}{j}{n}")))
        });
        if let Some(end) = joined.and_then(|n| n.parse::<u32>().ok()) {
            let end = y / 100 * 100 + end;
            if end > y {
                out.push((y, end));
                continue;
            }
        }
        if let (Some("to" | "until" | "through"), Some(end)) =
            (next, t.get(i + 2).and_then(|w| year_in(w)))
        {
            if end > y {
                out.push((y, end));
                continue;
            }
        }
        // What stands before the year, past a day and a month (`before 1 March 2001`).
        let mut j = i;
        while j > 0
            && (is_calendar_word(t[j - 1])
                || t[j - 1].chars().all(|c| c.is_ascii_digit()) && t[j - 1].len() <= 2
                || matches!(t[j - 1], "st" | "nd" | "rd" | "th" | "the" | "of"))
        {
            j -= 1;
        }
        let dated = j < i;
        let before = j.checked_sub(1).map(|k| t[k]);
        let before2 = j.checked_sub(2).map(|k| t[k]);
        let after = (next, t.get(i + 2).copied());
        let range = match (before2, before) {
            (_, Some("before" | "until" | "till" | "til")) | (Some("prior"), Some("to")) => {
                Some((1900, if dated { y } else { y - 1 }))
            }
            (Some("up"), Some("to")) => Some((1900, y)),
            // `an arrangement that ends on 31 March 2027`: in force until then.
            (Some("ends" | "ending" | "expires" | "expiring"), Some("on" | "in"))
            | (_, Some("ends" | "ending" | "expires" | "expiring")) => Some((1900, y)),
            (_, Some("after")) => Some((if dated { y } else { y + 1 }, 2100)),
            (_, Some("since" | "from")) if next != Some("to") => Some((y, 2100)),
            _ => match after {
                (Some("onwards" | "onward"), _)
                | (Some("or" | "and"), Some("later" | "after" | "onwards")) => Some((y, 2100)),
                (Some("or" | "and"), Some("earlier" | "before")) => Some((1900, y)),
                _ => None,
            },
        };
        out.push(range.unwrap_or((y, y)));
    }
    out
}

/// A day in the calendar: year (when stated), month (1–12) and day (0 for the whole
/// month).
pub type Day = (Option<u32>, u32, u32);

/// Whether `unit`, a stem, is a month's (`janua` of `January`).
pub(crate) fn is_month_stem(unit: &str) -> bool {
    MONTHS.iter().any(|m| stem(m) == unit)
}

/// The month a token names (`june`, `jun`, `sept`), 1–12. `may` is a month only where
/// [`calendar_tokens`] finds a day or a year beside it.
fn month_of(token: &str) -> Option<u32> {
    let token = token.trim_end_matches('.');
    if token.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| *m == token || (token.len() >= 3 && m.starts_with(token) && token.len() <= 4))
        .map(|i| i as u32 + 1)
}

/// A day of the month a token states (`9`, `13th`, `1st`), 1–31.
fn day_of(token: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|end| token.strip_suffix(end))
        .unwrap_or(token);
    (digits.len() <= 2)
        .then(|| digits.parse::<u32>().ok())
        .flatten()
        .filter(|d| (1..=31).contains(d))
}

/// The tokens of `text` as dates are read: lower case, words and numbers, with a dash
/// (`–`, `-`) and `to`, `through` as `-`, `till` as `until`, and a field's or a clause's
/// end as `;`.
fn calendar_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.to_lowercase().chars() {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        match c {
            '–' | '—' | '-' => out.push("-".into()),
            ';' | '(' | ')' | '.' => out.push(";".into()),
            _ => {}
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.into_iter()
        .map(|t| match t.as_str() {
            "to" | "through" | "thru" => "-".to_owned(),
            "till" | "til" => "until".to_owned(),
            _ => t,
        })
        .collect()
}

/// The dates `tokens` states, each with the index of its first and last token: `29
/// September 2025`, `Monday 9 June`, `June 9, 2025`, `13th of October`, a month alone
/// (`in November`), and a day alone before a dash and a date (`9` of `9–28 June`).
fn dates_in(tokens: &[String]) -> Vec<(usize, usize, Day)> {
    let at = |i: usize| tokens.get(i).map(String::as_str);
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some(month) = month_of(token) else {
            continue;
        };
        let before = i.checked_sub(1).and_then(at);
        let of = before == Some("of");
        let day_before = if of {
            i.checked_sub(2).and_then(at).and_then(day_of)
        } else {
            before.and_then(day_of)
        };
        let day_after = at(i + 1).and_then(day_of).filter(|_| day_before.is_none());
        let year_at = if day_after.is_some() { i + 2 } else { i + 1 };
        let year = at(year_at)
            .filter(|y| is_year(y))
            .and_then(|y| y.parse().ok());
        let day = day_before.or(day_after);
        // `may` is the verb unless a day or a year goes with it.
        if token == "may" && day.is_none() && year.is_none() {
            continue;
        }
        let start = if day_before.is_some() {
            i - if of { 2 } else { 1 }
        } else {
            i
        };
        let end = if year.is_some() {
            year_at
        } else if day_after.is_some() {
            i + 1
        } else {
            i
        };
        out.push((start, end, (year, month, day.unwrap_or(0))));
    }
    out
}

/// The dates `text` states (`the week of 13th October 2025`, `in November`): the asker's,
/// which a stated range of dates may hold.
#[must_use]
pub fn stated_dates(text: &str) -> Vec<Day> {
    dates_in(&calendar_tokens(text))
        .into_iter()
        .map(|(_, _, d)| d)
        .collect()
}

/// The ranges of dates `text` states, each inclusive: `from 29 September 2025 to 24
/// October 2025`, `9–28 June`, `Apr-Oct`, `closed (Oct-Mar)`; `from 6 January` and `until
/// 5 January` are open at one end (`None`).
#[must_use]
pub fn date_ranges(text: &str) -> Vec<(Option<Day>, Option<Day>)> {
    let tokens = calendar_tokens(text);
    let dates = dates_in(&tokens);
    let at = |i: usize| tokens.get(i).map(String::as_str);
    let mut out = Vec::new();
    let mut used = vec![false; dates.len()];
    for (k, (start, end, day)) in dates.iter().enumerate() {
        if used[k] {
            continue;
        }
        // A dash (or `to`) and a date: both ends. A bare day before it (`9–28 June`) is
        // of the second date's month.
        // `between 2 June and 15 June` too.
        let between =
            start.checked_sub(1).and_then(at) == Some("between") && at(end + 1) == Some("and");
        if matches!(at(end + 1), Some("-" | "until")) || between {
            if let Some((j, next)) = dates
                .iter()
                .enumerate()
                .skip(k + 1)
                .find(|(_, (s, ..))| *s == end + 2 || *s == end + 3)
            {
                let mut first = *day;
                if first.0.is_none() {
                    first.0 = next.2 .0;
                }
                out.push((Some(first), Some(next.2)));
                used[j] = true;
                continue;
            }
        }
        if let (Some(d), Some("-")) = (
            start.checked_sub(2).and_then(at).and_then(day_of),
            start.checked_sub(1).and_then(at),
        ) {
            if day.2 != 0 {
                out.push((Some((day.0, day.1, d)), Some(*day)));
                continue;
            }
        }
        let before = start.checked_sub(1).and_then(at);
        let before = if before.is_some_and(|w| WEEKDAYS.contains(&w.trim_end_matches('s'))) {
            start.checked_sub(2).and_then(at)
        } else {
            before
        };
        // `moved to 16 June` is a date, not an end.
        match before {
            Some("from" | "since" | "after") => out.push((Some(*day), None)),
            Some("until" | "before" | "by") => out.push((None, Some(*day))),
            _ => {}
        }
    }
    out
}

/// Whether the days `asked` fall in a range `ranges` states ([`date_ranges`]); `None` when
/// either is empty. A month alone is all its days; a year is compared only when both
/// state one; a range across the new year (`Oct–Mar`) wraps.
#[must_use]
pub fn dates_held(asked: &[Day], ranges: &[(Option<Day>, Option<Day>)]) -> Option<bool> {
    if asked.is_empty() || ranges.is_empty() {
        return None;
    }
    let key = |d: &Day, end: bool, years: bool| {
        let day = if d.2 == 0 {
            if end {
                31
            } else {
                1
            }
        } else {
            d.2
        };
        let year = if years { d.0.unwrap_or(0) } else { 0 };
        year * 400 + d.1 * 32 + day
    };
    Some(ranges.iter().any(|(lo, hi)| {
        asked.iter().any(|a| {
            let years = a.0.is_some()
                && lo.is_none_or(|l| l.0.is_some())
                && hi.is_none_or(|h| h.0.is_some());
            // The asked day (or month) overlaps the range.
            let (a_lo, a_hi) = (key(a, false, years), key(a, true, years));
            let lo = lo.map(|l| key(&l, false, years));
            let hi = hi.map(|h| key(&h, true, years));
            match (lo, hi) {
                (Some(l), Some(h)) if l > h => a_hi >= l || a_lo <= h,
                (l, h) => l.is_none_or(|l| a_hi >= l) && h.is_none_or(|h| a_lo <= h),
            }
        })
    }))
}

/// Words that say a number counts people (`a group of 25`, `sleeps up to 6`).
const PARTY_WORDS: &[&str] = &[
    "group",
    "groups",
    "party",
    "family",
    "people",
    "persons",
    "guests",
    "adults",
    "students",
    "members",
    "participants",
    "sleeps",
    "size",
    "capacity",
    "seats",
    "us",
];

/// Whether the stem `counted` (of what "how many" counts) names people.
pub(crate) fn counts_people(counted: &str) -> bool {
    const PEOPLE: [&str; 18] = [
        "people",
        "person",
        "guest",
        "visitor",
        "adult",
        "child",
        "children",
        "kid",
        "student",
        "learner",
        "passenger",
        "rider",
        "participant",
        "member",
        "user",
        "customer",
        "attendee",
        "pupil",
    ];
    PEOPLE.iter().any(|p| stem(p) == counted)
}

/// Whether the stem `unit` (of a stated count) names places kept for one person each
/// (`6 wheelchair spaces`, `40 seats`).
pub(crate) fn counts_places(unit: &str) -> bool {
    const PLACES: [&str; 5] = ["space", "place", "seat", "spot", "bed"];
    PLACES.iter().any(|p| stem(p) == unit)
}

/// A count a token states, in digits or a small number word (`25`, `six`).
fn count_in(token: &str) -> Option<u32> {
    const SMALL: [&str; 12] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    SMALL
        .iter()
        .position(|w| *w == token)
        .map(|i| i as u32 + 1)
        .or_else(|| token.parse().ok().filter(|n| (1..=10_000).contains(n)))
}

/// How many people the question says it is about (`a group of 25`, `a family of six`,
/// `12 of us`, `25 students`).
#[must_use]
pub fn stated_party(text: &str) -> Option<u32> {
    let t = age_tokens(text);
    let at = |i: usize| t.get(i).map(String::as_str);
    (0..t.len()).find_map(|i| {
        let n = count_in(&t[i])?;
        let of_group = i >= 2
            && at(i - 1) == Some("of")
            && matches!(
                at(i - 2),
                Some("group" | "party" | "family" | "team" | "class")
            );
        let of_us = matches!((at(i + 1), at(i + 2)), (Some("of"), Some("us")));
        let people = matches!(
            at(i + 1),
            Some("people" | "persons" | "guests" | "adults" | "students" | "friends")
        );
        (of_group || of_us || people).then_some(n)
    })
}

/// The ranges of a count of people `text` states, when it says it counts people
/// ([`PARTY_WORDS`]): `20–39`, `up to 6`, `12 or more`, `more than 50`, `at least 10`,
/// each as (lowest, highest). A range with another unit after it (`2 to 6 days`) or an age
/// (`aged 16–25`) is none.
#[must_use]
pub fn party_ranges(text: &str) -> Vec<(u32, u32)> {
    if !age_tokens(text)
        .iter()
        .any(|w| PARTY_WORDS.contains(&w.as_str()))
    {
        return Vec::new();
    }
    // A record's field or a clause ends what a count is followed by.
    text.split([';', ','])
        .flat_map(|piece| party_ranges_in(&age_tokens(piece)))
        .collect()
}

/// [`party_ranges`] within one field or clause's tokens.
fn party_ranges_in(t: &[String]) -> Vec<(u32, u32)> {
    let at = |i: usize| t.get(i).map(String::as_str);
    // What follows a count: nothing, a word for people, or a word that is no unit.
    let counts = |i: usize| {
        at(i).is_none_or(|w| {
            PARTY_WORDS.contains(&w) || is_function_word(w) || !w.chars().all(char::is_alphabetic)
        }) && !matches!(at(i), Some("to" | "and" | "or"))
    };
    let mut out = Vec::new();
    for (i, token) in t.iter().enumerate() {
        let Some(n) = count_in(token) else { continue };
        if i >= 1 && matches!(at(i - 1), Some("aged" | "age" | "ages")) {
            continue;
        }
        let before = (i.checked_sub(2).and_then(at), i.checked_sub(1).and_then(at));
        let range = match (before, at(i + 1), at(i + 2)) {
            ((Some("up"), Some("to")), _, _) if counts(i + 1) => Some((1, n)),
            ((Some("more" | "over"), Some("than")), _, _) if counts(i + 1) => {
                Some((n + 1, u32::MAX))
            }
            ((Some("fewer" | "less"), Some("than")), _, _) if counts(i + 1) => {
                Some((1, n.saturating_sub(1)))
            }
            ((Some("at"), Some("least")), _, _) if counts(i + 1) => Some((n, u32::MAX)),
            (_, Some("or" | "and"), Some("more" | "over" | "above")) if counts(i + 3) => {
                Some((n, u32::MAX))
            }
            (_, Some("to"), Some(m)) => count_in(m)
                .filter(|m| *m > n && counts(i + 3))
                .map(|m| (n, m)),
            (_, Some(m), _) if t[i + 1].chars().all(|c| c.is_ascii_digit()) => {
                // `20–39` (the dash splits the tokens).
                count_in(m)
                    .filter(|m| *m > n && counts(i + 2))
                    .map(|m| (n, m))
            }
            _ => None,
        };
        out.extend(range);
    }
    out
}

/// Endings that make a longer word of a shorter one (`parking` of `park`): a word that
/// only adds one of them is another word, not the whole of a clipped one.
const ENDINGS: &[&str] = &[
    "s", "es", "ing", "ings", "ed", "er", "ers", "est", "ly", "ment", "ments", "ness", "able",
    "ible", "ion", "ions", "ity", "ful", "less", "ous", "ive", "al", "ally", "ist", "ists", "ism",
    "y", "ie", "ies",
];

/// `text` with each word cut short (`dorm`, `info`, `admin`) that `known` does not hold
/// written whole, as the one word `known` holds that it begins (`dormitory`,
/// `information`): people clip the words documents write out. A word is read so only when
/// it has four letters or more, every such word of `known` is one word in its forms
/// (`dormitory`, `dormitories`), and the rest is no mere ending (`parking` is not `park`).
#[must_use]
pub fn unclipped<'a>(
    text: &'a str,
    known: &std::collections::BTreeSet<String>,
) -> std::borrow::Cow<'a, str> {
    let whole = |w: &str| -> Option<String> {
        let lower = w.to_lowercase();
        let base = lower
            .strip_suffix('s')
            .filter(|b| b.len() >= 4)
            .unwrap_or(&lower);
        // A capitalised word is a name, written as its owner writes it.
        if base.len() < 4
            || w.starts_with(char::is_uppercase)
            || !base.chars().all(|c| c.is_ascii_alphabetic())
            || known.contains(&lower)
            || known.contains(base)
            || is_function_word(&lower)
        {
            return None;
        }
        let begun: Vec<&String> = known
            .range(base.to_owned()..)
            .take_while(|k| k.starts_with(base))
            .collect();
        // A word the sources write with an ending (`works` for `work`) is known.
        if begun.iter().any(|k| ENDINGS.contains(&&k[base.len()..])) {
            return None;
        }
        let longer: Vec<&String> = begun
            .into_iter()
            .filter(|k| k.len() >= base.len() + 3)
            .collect();
        let first = longer.iter().min_by_key(|k| k.len())?;
        longer
            .iter()
            .all(|k| stem(k) == stem(first))
            .then(|| (*first).clone())
    };
    rewrite_words(text, whole)
}

/// `text` with each word (a run of letters and digits) that `rewrite` gives another for
/// written as that one, everything between words kept; borrowed when none is rewritten.
fn rewrite_words(
    text: &str,
    rewrite: impl Fn(&str) -> Option<String>,
) -> std::borrow::Cow<'_, str> {
    if !words(text).iter().any(|w| rewrite(w).is_some()) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        match rewrite(&word) {
            Some(other) => out.push_str(&other),
            None => out.push_str(&word),
        }
        word.clear();
        out.push(c);
    }
    out.pop();
    std::borrow::Cow::Owned(out)
}

/// `text` with each misspelt word read as the one word of `known` (the sources' words) it
/// is one edit from (a letter left out, added, changed or two swapped: `acurate` is
/// `accurate`, `presure` is `pressure`), when it is a word of five letters or more that
/// neither the sources nor common English write, and one known word alone is that near.
#[must_use]
pub fn corrected<'a>(
    text: &'a str,
    known: &std::collections::BTreeSet<String>,
) -> std::borrow::Cow<'a, str> {
    let fix = |w: &str| -> Option<String> {
        let lower = w.to_lowercase();
        if lower.chars().count() < 5
            || w.starts_with(char::is_uppercase)
            || !lower.chars().all(|c| c.is_ascii_alphabetic())
            || known.contains(&lower)
            || is_common_word(&lower)
            || is_function_word(&lower)
        {
            return None;
        }
        let near: Vec<&String> = known
            .iter()
            .filter(|k| {
                k.len().abs_diff(lower.len()) <= 1
                    && k.chars().all(|c| c.is_ascii_alphabetic())
                    && strsim::osa_distance(k, &lower) == 1
            })
            .collect();
        match near.as_slice() {
            // An inflection (`discs` of `disc`) is no misspelling: the word stays as written.
            [one] if stem(one) != stem(&lower) => Some((*one).clone()),
            _ => None,
        }
    };
    rewrite_words(text, fix)
}

/// Whether `line` opens with a word that stands for something a line before it names: a
/// pronoun or a determiner alone (`It costs £3.50.`, `They must …`, `These are …`,
/// `Those aged 3 to 15 …`), or with a clause that stands for what it says (`If you do
/// not, we charge £60.00.`, `Otherwise …`).
#[must_use]
pub fn refers_back(line: &str) -> bool {
    const BACK: &[&str] = &[
        "it",
        "its",
        "they",
        "their",
        "them",
        "these",
        "this",
        "those",
        "he",
        "she",
        "his",
        "her",
        "such",
        "both",
        "either",
        "neither",
        "otherwise",
    ];
    // The clause ends at its comma: `If you do not return it, …` says what it means.
    const ELLIPTIC: &[&str] = &[
        "if you do not,",
        "if you don't,",
        "if you don’t,",
        "if not,",
        "if so,",
        "in that case,",
        "in this case,",
    ];
    let lower = line.trim_start().to_lowercase();
    let all = words(&lower);
    // `The fastest plan we can offer there is …`: `there` after a word of content is a
    // place the line before names (`There is a fee` and `is there` point nowhere), unless
    // a name before it in the line is that place (`… gives the Glasgow team a workshop,
    // which can be built there`).
    let written = words(line);
    let there = all.windows(2).enumerate().any(|(i, p)| {
        p[1] == "there"
            && !is_function_word(p[0])
            && !p[0].ends_with("ly")
            && !written[1..=i]
                .iter()
                .any(|w| w.chars().next().is_some_and(char::is_uppercase))
    });
    // `We can send those by tracked delivery …`, `You can renew them online`: a pronoun
    // standing alone as the object of the line's first verb stands for what the line
    // before names.
    let object = (1..all.len().min(5)).any(|i| {
        ["them", "those", "these", "it"].contains(&all[i])
            && !["there", "is", "was"].contains(&all[i - 1])
            && all.get(i + 1).is_none_or(|w| is_function_word(w))
    });
    all.first().is_some_and(|w| BACK.contains(w))
        || ELLIPTIC.iter().any(|e| lower.starts_with(e))
        || there
        || object
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label is a capital letter after a capitalised content word; a contraction's
    /// pieces and the pronoun that follows a question's opening modal are function words.
    /// A place may be numbered (`room 2.04`, `48 Northgate Road`, `the second floor`); a
    /// count, a sum, a date or an ordinal that numbers no floor is not one.
    #[test]
    fn numbered_places_are_told_from_counts_sums_and_dates() {
        assert!(states_location(
            "The makerspace is in room 2.04 on the second floor."
        ));
        assert!(states_location("The office is at 48 Northgate Road."));
        assert!(states_location("Boarding is at gate 12."));
        // A kind of place answers without a name.
        assert_eq!(place_nouns("Tram stops have ticket machines."), ["stops"]);
        assert_eq!(place_nouns("Ask at the front desk."), ["desk"]);
        assert!(!states_location("First participant was dosed at 22 sites."));
        assert!(!states_location("A card costs £2.50."));
        assert!(!states_location(
            "It reopens on 14 March 2026, after 9 months."
        ));
    }

    /// A day of a month is told from another day of the same month, either way round.
    #[test]
    fn a_day_of_a_month_is_a_time_of_its_own() {
        let due = times("moved to 16 June 2025");
        assert!(due.contains(&"16 june".to_owned()), "{due:?}");
        assert!(times("on June 5").contains(&"5 june".to_owned()));
        // A year after the month is no day.
        assert!(!times("June 2025").iter().any(|t| t.ends_with(" june")));
    }

    /// A short question alone on its line opens the section that answers it, as a heading
    /// does; a long one, or a sentence that asks in passing, does not.
    #[test]
    fn a_faq_question_opens_its_section() {
        assert!(opens_section("How do I get on the Wi-Fi?"));
        assert!(opens_section("Booking the 3D printers:"));
        assert!(!opens_section("Ask at the desk. Why wait?"));
        assert!(!opens_section(
            "Is there anything else that you would like to know about the many services we offer here?"
        ));
        assert!(is_light_word("Still") && !is_light_word("fee"));
        // A hedge and a wish are the asker's, not what is asked.
        assert!(is_light_word("mostly") && is_light_word("wants") && is_light_word("Probably"));
    }

    #[test]
    fn labels_pronouns_and_contractions_are_told_apart() {
        assert_eq!(
            content_words("Phase I trial and Arm A"),
            ["Phase", "I", "trial", "Arm", "A"]
        );
        assert_eq!(content_words("Can I renew it?"), ["renew"]);
        assert_eq!(content_words("Must I pay?"), ["pay"]);
        // After an acronym, `I` is the pronoun.
        assert_eq!(content_words("a DVD I borrow"), ["DVD", "borrow"]);
        assert_eq!(
            content_words("Is it free if I'm not a member?"),
            ["free", "member"]
        );
        assert_eq!(
            content_words("We're told you've paid and don't owe"),
            ["told", "paid", "owe"]
        );
    }

    #[test]
    fn amounts_are_numbers_that_stand_as_numbers() {
        assert_eq!(
            amounts("with 212 in Arm A: calpetrant 70 mg (14.6%), a 40-week extension, 3x ULN"),
            ["212", "70", "14.6", "40", "3"]
        );
        assert!(amounts("DOC-CAL-PROT-01: protocol synopsis, version 2.1 (NCT05550001), VELA-2, v2, on 2025-04-11").is_empty());
        assert_eq!(amounts("1,500 mg taken twice"), ["1500", "twice"]);
        // A number labelling a member of a series is not an amount.
        assert!(amounts("a Phase 3 study, assessed at week 16, Arm 2").is_empty());
        assert_eq!(amounts("every 4 weeks; enrolled: 41"), ["4", "41"]);
        assert_eq!(
            amounts_with_units(
                "a 4-week period, 26 weeks, 61; 212 in, 5 active loan requests at once"
            ),
            [
                ("4".to_owned(), vec![stem("week")]),
                ("26".to_owned(), vec![stem("weeks")]),
                ("61".to_owned(), vec![]),
                ("212".to_owned(), vec![]),
                (
                    "5".to_owned(),
                    vec![stem("active"), stem("loan"), stem("requests")]
                ),
            ]
        );
    }

    #[test]
    fn sizes_and_sections_are_told_apart() {
        assert!(states_size("Objects up to 25 x 21 x 20 cm can be printed."));
        assert!(states_size("Bags must weigh under 7kg."));
        assert!(states_size("The board is 2.4 metres long."));
        assert!(!states_size("Book up to 14 days in advance."));
        assert!(states_size("max_object_size: 2 GiB; status: beta"));
        assert!(states_size("Attachments up to 100MB are accepted."));
        assert!(!states_size("Open 3 in the afternoon, room 2.04."));
        assert!(opens_section("Loan periods"));
        assert!(opens_section("Booking the 3D printers:"));
        assert!(!opens_section("Fees: £2.00 per day. Cash only:"));
        assert!(!opens_section("Adult books are lent for 21 days."));
    }

    #[test]
    fn times_are_dates_years_months_and_numbered_weeks() {
        for line in [
            "It met on 2026-01-08.",
            "Dosing starts in March.",
            "Assessed at week 24.",
            "It ran 12 weeks.",
            "Founded in 1998.",
        ] {
            assert!(states_time(line), "{line}");
        }
        for line in [
            "It enrolled 212 participants.",
            "Arm A: 10 mg.",
            "NCT04123456 is completed.",
        ] {
            assert!(!states_time(line), "{line}");
        }
        assert_eq!(times("cutoff 2025-03-14, in 2025"), ["2025-03-14"]);
        // A day of the month by its ordinal, in a text about months; not a floor.
        assert_eq!(
            times("collected on the 1st or the 15th of the month"),
            ["1st", "15th"]
        );
        assert!(times("Room on the 2nd floor.").is_empty());
        assert_eq!(times("from 1st April"), ["april", "1 april"]);
        // Clock times and days of the week are times a schedule states.
        for line in [
            "It closes at 20:00.",
            "Open from 9:30.",
            "Doors open at 8 pm.",
            "Inductions start at 5pm.",
            "It opens at noon.",
            "Closed on Mondays.",
        ] {
            assert!(states_time(line), "{line}");
        }
        assert!(!states_time("Version 2:1 of the ratio"));
    }

    #[test]
    fn money_extent_and_headings_are_read_from_the_text() {
        for line in [
            "It costs £0.60 a page.",
            "The limit is 750 yuan.",
            "A fine of 20p.",
        ] {
            assert!(states_money(line), "{line}");
        }
        assert!(!states_money("Up to 20 items on loan."));
        for line in [
            "Lent for 7 days.",
            "Keep 150 cm clear.",
            "A 30-minute slot.",
        ] {
            assert!(states_extent(line), "{line}");
        }
        assert!(!states_extent("Up to 20 items on loan."));
        assert!(!states_extent("Trams run every 10 minutes."));
        for line in [
            "Loan periods",
            "How long it takes",
            "Interlibrary Loan Procedure",
        ] {
            assert!(is_heading(line), "{line}");
        }
        for line in [
            "Books are lent for 21 days.",
            "code: E04; meaning: Low flow",
            "Phase 3",
            "",
        ] {
            assert!(!is_heading(line), "{line}");
        }
    }

    /// Prepositions relate what a question names and ask nothing of it; `without` and `out`
    /// change what is asked (`without an adult`, `checked out`), so they stay content.
    /// A phrasal verb meets the one word for it, however inflected, with an object between.
    #[test]
    fn a_phrasal_verb_meets_its_one_word() {
        for (a, b) in [
            ("Where do I pick it up?", "Collect it from the desk."),
            (
                "How many books can I have checked out?",
                "You can borrow 20 items.",
            ),
            ("When do they have to be back?", "Return them by Friday."),
            ("Can I call off the booking?", "Cancel a booking online."),
            ("a grown-up card", "an adult card"),
            ("How many at the same time?", "Up to 20 at once."),
            ("How much is a new one?", "A replacement card costs £2.50."),
            (
                "When did the current fares come in?",
                "Version 2 is in force from 2026-01-04.",
            ),
            (
                "What if I fall behind on paying?",
                "Cards stop when a payment is 14 days late.",
            ),
            (
                "When does it close for good?",
                "It closes permanently in May.",
            ),
            ("When is the deposit paid back?", "We refund it in 14 days."),
            ("How do I get in touch?", "Contact us by phone."),
            (
                "How do I get hold of the warden?",
                "Contact the warden by email.",
            ),
            (
                "Can I drop out of the course?",
                "You may withdraw at any time.",
            ),
            (
                "Can we get dinner at the lodge?",
                "Extra: Evening meal; Price: £12.",
            ),
        ] {
            let (a, b) = (content_stems(a), content_stems(b));
            assert!(b.iter().any(|s| a.contains(s)), "{a:?} {b:?}");
        }
        // A word that is not the verb's particle is read as written.
        assert_eq!(with_phrasal("Pick a room."), "Pick a room.");
        assert!(!content_stems("Look back at the results.").contains(&stem("return")));
    }

    #[test]
    fn prepositions_that_relate_are_function_words() {
        for w in ["through", "during", "via", "between", "until", "every"] {
            assert!(is_function_word(w), "{w}");
        }
        for w in ["without", "out", "helicopter"] {
            assert!(!is_function_word(w), "{w}");
        }
        assert_eq!(
            content_stems("pay through interlibrary loan"),
            ["cost+", "inter", "borro+"]
        );
    }

    #[test]
    fn everyday_words_that_ask_for_the_same_thing_meet() {
        assert_eq!(stem("borrow"), stem("lent"));
        assert_eq!(stem("price"), stem("fees"));
        assert_eq!(stem("closed"), stem("shut"));
        assert_eq!(stem("ends"), stem("finish"));
        assert_eq!(stem("paid"), stem("cost"));
        assert_eq!(stem("burn"), stem("bonfires"));
        assert_eq!(stem("stolen"), stem("theft"));
        assert_ne!(stem("borrow"), stem("cost"));
        // A related word's longer forms meet it; a word that only shares its first letters
        // does not, nor does a word whose own stem spells the group's first word.
        assert_eq!(stem("borrowers"), stem("lent"));
        assert_ne!(stem("person"), stem("personnel"));
        assert_eq!(stem("personnel"), stem("staff"));
        assert_ne!(stem("medical"), stem("medicine"));
        assert_eq!(stem("medications"), stem("drug"));
        // A word done again is also its `re-` verb, and stays itself.
        let again = content_stems("When will it open again?");
        assert!(again.contains(&stem("reopen")) && again.contains(&stem("open")));
        assert!(!again.contains(&stem("again")));
        assert_eq!(
            with_redone("Start again, then open it."),
            "Start restart then open it"
        );
        assert_eq!(with_redone("Open it."), "Open it.");
        assert_eq!(
            with_redone("When did lessons start up again?"),
            "When did lessons start up restart"
        );
        assert_eq!(redone("start").as_deref(), Some("restart"));
        assert_eq!(redone("it"), None);
        assert_eq!(redone("return"), None);
        // Pausing is freezing, a normal one asks nothing a line must say, `on his own` is
        // alone, and hanging on to a thing is keeping it.
        assert_eq!(stem("pausing"), stem("frozen"));
        assert_eq!(stem("shortest"), stem("minimum"));
        assert!(is_light_word("normal"));
        assert!(content_stems("can he use the gym on his own?").contains(&stem("unaccompanied")));
        assert!(content_stems("how long will you hang on to them?").contains(&stem("keep")));
        assert!(content_stems("how many days can I roll over?").contains(&stem("carry")));
        assert!(!content_stems("close on a Tuesday? I finish at 6").contains(&"i".to_owned()));
        let leave = content_stems("Annual leave (working days): 27 days");
        assert!(leave.contains(&stem("holiday")) && leave.contains(&stem("leave")));
    }

    /// A line refers back when it opens with a pronoun, or when a pronoun stands alone as
    /// the object of its first verb; a determiner before a noun, or `there is`, does not.
    #[test]
    fn object_pronouns_refer_back() {
        assert!(refers_back("They may not join spin classes."));
        assert!(refers_back(
            "We can send those by tracked delivery for £4.50."
        ));
        assert!(refers_back("You can renew them at any branch."));
        assert!(!refers_back("We can send those items by post."));
        assert!(!refers_back("Bring your card to every visit."));
    }

    #[test]
    fn stems_meet_their_inflections_but_ids_stay_whole() {
        assert_eq!(stem("terminated"), stem("termination"));
        assert_eq!(stem("arms"), stem("arm"));
        assert_eq!(stem("ran"), stem("run"));
        assert_eq!(stem("studies"), stem("Study"));
        assert_eq!(stem("opened"), stem("open"));
        assert_eq!(stem("enrolled"), stem("enrollment"));
        assert_eq!(stem("testing"), stem("tests"));
        assert_eq!(stem("bookings"), stem("booking"));
        assert_eq!(stem("meetings"), stem("meet"));
        // A silent `e`: the base form, its plural and its past meet.
        for (a, b) in [
            ("used", "use"),
            ("uses", "use"),
            ("closed", "close"),
            ("based", "base"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
        // A consonant doubled before the ending: `running` is `run`, but `added` is `add`.
        for (a, b) in [
            ("running", "run"),
            ("stopped", "stop"),
            ("planned", "plan"),
            ("added", "add"),
            ("calling", "call"),
            ("passed", "pass"),
            ("wider", "width"),
            ("bicycles", "bike"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} {b}");
        }
        assert_ne!(stem("added"), stem("ad"));
        // A word of two short pieces is one word; `e-book` is still a book.
        assert_eq!(
            content_stems("Is there Wi-Fi on board?"),
            content_stems("wifi board")
        );
        assert!(content_stems("an e-book").contains(&stem("books")));
        // ... and an `ebook` too, which a printed book is not.
        assert!(content_stems("an e-bike").contains(&stem("ebike")));
        assert!(!content_stems("a pedal bike").contains(&stem("ebike")));
        // A record's terse key abbreviates the word it stands for, or one of its group.
        assert!(abbreviates("dist", "district") && abbreviates("lmk", "landmark"));
        assert!(abbreviates("tel", "phone") && abbreviates("hrs", "hours"));
        assert!(!abbreviates("pc", "postcode") && !abbreviates("day", "daytime"));
        assert!(!abbreviates("dist", "price"));
        assert!(converse_stems(&stem("earn")).contains(&stem("pays")));
        assert!(converse_stems(&stem("pay")).is_empty());
        // A date states its season; `may` the verb states none.
        assert_eq!(
            season_stems("Training day: Monday 27 October 2025"),
            [stem("autumn")]
        );
        assert_eq!(
            season_stems("from 1 December to 28 February"),
            [stem("winter")]
        );
        // A range is in every season of the months it spans, over the year's end too.
        let spanned = season_stems("From 1 October to 31 March the gates close at 17:00.");
        assert!(spanned.contains(&stem("winter")), "{spanned:?}");
        let summer = season_stems("From 1 April to 30 September the gates close at 21:00.");
        assert!(summer.contains(&stem("summer")), "{summer:?}");
        assert!(!summer.contains(&stem("winter")), "{summer:?}");
        assert!(season_stems("You may bring a friend.").is_empty());
        // A compound one text hyphenates is the word another closes up; not a phrasal
        // verb's particle (`grown-up`), nor a long first word's own stem again.
        assert!(content_stems("home-made cakes").contains(&stem("homemade")));
        assert!(content_stems("home-made cakes").contains(&stem("home")));
        assert_eq!(
            content_stems("a grown-up card"),
            content_stems("a grown up card")
        );
        assert_eq!(
            content_stems("a placebo-controlled study"),
            content_stems("a placebo controlled study")
        );
        assert_ne!(stem("need"), stem("ne"));
        assert_eq!(stem("speed"), stem("speeds"));
        assert_ne!(stem("speed"), stem("spa"));
        assert_ne!(stem("feed"), stem("fee"));
        assert_ne!(stem("NCT04123456"), stem("NCT04890123"));
        assert_eq!(
            content_stems("What does Arm A of the trial get?"),
            ["arm", "a", "trial", "get"]
        );
    }
}
