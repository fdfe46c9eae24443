//! The application gate: rules declared with a contract that JSON Schema cannot express.
//!
//! A schema can say that `line_start` and `line_end` are positive integers; it cannot say
//! that the end does not precede the start. Rules are declared in Rust (any [`Rule`]) or in
//! the contract file's `x-proviso.rules` list, and run only after the schema gate passed, so
//! they may rely on the shape the schema guarantees.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::code::Code;
use crate::error::ContractError;
use crate::rejection::{Location, Violation};

/// A check on a schema-valid instance.
pub trait Rule: Send + Sync + fmt::Debug {
    /// Appends a violation to `out` for every way `instance` breaks the rule.
    fn check(&self, instance: &Value, out: &mut Vec<Violation>);
}

/// A rule from a closure, for contracts declared in Rust.
pub struct FnRule<F>(pub F);

impl<F> fmt::Debug for FnRule<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnRule")
    }
}

impl<F: Fn(&Value, &mut Vec<Violation>) + Send + Sync> Rule for FnRule<F> {
    fn check(&self, instance: &Value, out: &mut Vec<Violation>) {
        (self.0)(instance, out);
    }
}

/// `lower <= upper` for two numbers, in the instance or in each item of an array.
///
/// Declared in a contract file as
/// `{"rule": "ordered", "each": "/citations", "lower": "/line_start", "upper": "/line_end",
/// "code": "reversed_line_range"}`. Items where either number is absent or null are skipped:
/// presence is the schema's business.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Ordered {
    /// Pointer to an array whose items are each checked; `None` checks the instance itself.
    pub each: Option<String>,
    /// Pointer (relative to the item) to the lower bound.
    pub lower: String,
    /// Pointer (relative to the item) to the upper bound.
    pub upper: String,
    /// The code of a violation.
    pub code: Code,
}

impl Rule for Ordered {
    fn check(&self, instance: &Value, out: &mut Vec<Violation>) {
        let mut check_item = |item: &Value, base: &str| {
            let (Some(lower), Some(upper)) = (item.pointer(&self.lower), item.pointer(&self.upper))
            else {
                return;
            };
            if compare_numbers(lower, upper) == Some(Ordering::Greater) {
                out.push(Violation {
                    code: self.code.clone(),
                    keyword: Some("ordered".into()),
                    message: format!(
                        "{base}{upper_ptr} ({upper}) precedes {base}{lower_ptr} ({lower})",
                        upper_ptr = self.upper,
                        lower_ptr = self.lower,
                    ),
                    location: Location::instance(format!("{base}{}", self.upper)),
                });
            }
        };
        match &self.each {
            None => check_item(instance, ""),
            Some(each) => {
                if let Some(Value::Array(items)) = instance.pointer(each) {
                    for (i, item) in items.iter().enumerate() {
                        check_item(item, &format!("{each}/{i}"));
                    }
                }
            }
        }
    }
}

/// Compares two JSON numbers exactly when both are integers, else as `f64`.
fn compare_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    let (Value::Number(a), Value::Number(b)) = (a, b) else {
        return None;
    };
    match (
        proviso_json::exact_integer(a),
        proviso_json::exact_integer(b),
    ) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// Builds the rules of an `x-proviso.rules` list.
pub(crate) fn from_declaration(list: &Value) -> Result<Vec<Arc<dyn Rule>>, ContractError> {
    let Value::Array(list) = list else {
        return Err(ContractError::declaration(
            "/x-proviso/rules",
            "`rules` must be an array",
        ));
    };
    list.iter()
        .enumerate()
        .map(|(i, rule)| {
            let path = format!("/x-proviso/rules/{i}");
            let field = |name: &str| -> Result<Option<String>, ContractError> {
                match rule.get(name) {
                    None => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(ContractError::declaration(
                        &format!("{path}/{name}"),
                        format!("`{name}` must be a string"),
                    )),
                }
            };
            let required = |name: &str| {
                field(name)?.ok_or_else(|| {
                    ContractError::declaration(&path, format!("the rule needs `{name}`"))
                })
            };
            match rule.get("rule").and_then(Value::as_str) {
                Some("ordered") => {
                    for key in rule.as_object().into_iter().flat_map(|o| o.keys()) {
                        if !["rule", "each", "lower", "upper", "code"].contains(&key.as_str()) {
                            return Err(ContractError::declaration(
                                &format!("{path}/{key}"),
                                format!("unknown field `{key}` in an `ordered` rule"),
                            ));
                        }
                    }
                    Ok(Arc::new(Ordered {
                        each: field("each")?,
                        lower: required("lower")?,
                        upper: required("upper")?,
                        code: match field("code")? {
                            None => Code::OutOfOrder,
                            Some(c) => Code::declared(&c).ok_or_else(|| {
                                ContractError::declaration(
                                    &format!("{path}/code"),
                                    format!("`{c}` is a code proviso defines; a rule declares a code of its own, so that no rule can speak for a built-in gate"),
                                )
                            })?,
                        },
                    }) as Arc<dyn Rule>)
                }
                Some(other) => Err(ContractError::declaration(
                    &format!("{path}/rule"),
                    format!("unknown rule `{other}`; known rules: ordered"),
                )),
                None => Err(ContractError::declaration(
                    &path,
                    "a rule needs a string `rule` naming its kind",
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::Contract;
    use serde_json::json;

    #[test]
    fn a_rule_cannot_declare_a_built_in_code() {
        let document = |code: &str| {
            json!({"type": "object", "x-proviso": {"rules": [{"rule": "ordered", "each": "/items",
                "lower": "/a", "upper": "/b", "code": code}]}})
        };
        assert!(Contract::from_document(&document("reversed_range")).is_ok());
        for built_in in ["type_mismatch", "off_question", "schema_dependent_required"] {
            let error = Contract::from_document(&document(built_in))
                .err()
                .unwrap()
                .to_string();
            assert!(
                error.contains("/code") && error.contains(built_in),
                "{error}"
            );
        }
    }
}
