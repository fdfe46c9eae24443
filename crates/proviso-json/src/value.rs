//! Building a `serde_json::Value` with the checks serde_json's own `Value` does not make.
//!
//! The seed below walks the document once. It counts object keys in document order so that a
//! duplicate can later be located precisely (see `locate`), tracks nesting depth, and records
//! the path of the failing value on the way back up so that errors carry a JSON pointer.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::DuplicateKeys;

/// serde_json's private marker for a number under `arbitrary_precision`: numbers reach a
/// visitor as a one-entry map whose key is this token and whose value is the number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// What the visitor noticed that serde_json itself would not report.
#[derive(Debug)]
pub(crate) enum Noticed {
    Duplicate {
        key: String,
        pointer: String,
        first_ordinal: usize,
        second_ordinal: usize,
    },
    TooDeep,
    BadNumber,
}

#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: serde_json::Error,
    pub(crate) noticed: Option<Noticed>,
}

struct State {
    depth: usize,
    max_depth: usize,
    duplicate_keys: DuplicateKeys,
    keys_seen: usize,
    noticed: Option<Noticed>,
    /// Path segments pushed while unwinding from an error, innermost first.
    path: Vec<String>,
}

pub(crate) fn parse_str(
    text: &str,
    max_depth: usize,
    duplicate_keys: DuplicateKeys,
) -> Result<Value, Failure> {
    let mut state = State {
        depth: 0,
        max_depth,
        duplicate_keys,
        keys_seen: 0,
        noticed: None,
        path: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let result = Seed(&mut state)
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    result.map_err(|error| {
        let mut noticed = state.noticed.take();
        if let Some(Noticed::Duplicate { pointer, .. }) = &mut noticed {
            *pointer = state
                .path
                .iter()
                .rev()
                .map(|segment| format!("/{}", escape_pointer(segment)))
                .collect();
        }
        Failure { error, noticed }
    })
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

struct Seed<'s>(&'s mut State);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor(self.0))
    }
}

struct ValueVisitor<'s>(&'s mut State);

impl ValueVisitor<'_> {
    fn enter<E: de::Error>(&mut self) -> Result<(), E> {
        self.0.depth += 1;
        if self.0.depth > self.0.max_depth {
            self.0.noticed = Some(Noticed::TooDeep);
            return Err(E::custom("nesting too deep"));
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            self.0.noticed = Some(Noticed::BadNumber);
            E::custom("number is not finite")
        })
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            match seq.next_element_seed(Seed(self.0)) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(e) => {
                    if self.0.noticed.is_some() {
                        self.0.path.push(items.len().to_string());
                    }
                    return Err(e);
                }
            }
        }
        self.0.depth -= 1;
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let Some(first_key) = map.next_key::<String>()? else {
            self.enter()?;
            self.0.depth -= 1;
            return Ok(Value::Object(Map::new()));
        };
        if first_key == NUMBER_TOKEN {
            // A number under `arbitrary_precision`. Its text was already checked against the
            // JSON number grammar by serde_json; we keep it exactly as written.
            let text: String = map.next_value()?;
            return Number::from_str(&text).map(Value::Number).map_err(|_| {
                self.0.noticed = Some(Noticed::BadNumber);
                de::Error::custom("invalid number")
            });
        }
        self.enter()?;
        let mut object = Map::new();
        // Document-order ordinals of this object's keys, for locating a duplicate later.
        let mut ordinals: Vec<usize> = Vec::new();
        let mut key = first_key;
        loop {
            let ordinal = self.0.keys_seen;
            self.0.keys_seen += 1;
            if self.0.duplicate_keys == DuplicateKeys::Reject && object.contains_key(&key) {
                // Insertion order is document order (`preserve_order`), so the position of
                // the key among the object's keys indexes `ordinals`.
                let index = object.keys().position(|k| *k == key).unwrap_or(0);
                self.0.noticed = Some(Noticed::Duplicate {
                    key: key.clone(),
                    pointer: String::new(),
                    first_ordinal: ordinals[index],
                    second_ordinal: ordinal,
                });
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            match map.next_value_seed(Seed(self.0)) {
                Ok(value) => {
                    object.insert(key, value);
                    ordinals.push(ordinal);
                }
                Err(e) => {
                    if self.0.noticed.is_some() {
                        self.0.path.push(key);
                    }
                    return Err(e);
                }
            }
            match map.next_key::<String>()? {
                Some(next) => key = next,
                None => break,
            }
        }
        self.0.depth -= 1;
        Ok(Value::Object(object))
    }
}
