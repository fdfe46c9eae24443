//! The schema gate: JSON Schema Draft 2020-12 through the `jsonschema` crate.
//!
//! Two things are added on top of the validator. Every violation is reported, each with a
//! stable code, the failing keyword, the instance path and the schema path. And a schema is
//! checked for keywords the validator would silently ignore (a misspelled
//! `additionalproperties` enforces nothing): those are refused when the contract is built.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::{Draft, Retrieve, Uri, Validator};
use serde_json::Value;

use crate::code::Code;
use crate::error::ContractError;
use crate::rejection::{Location, Violation};

/// How a schema is compiled.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// Assert `format` (dates, e-mail addresses, ...) instead of treating it as an annotation.
    /// On by default: a contract that names a format means it, and a format the validator
    /// does not know is then an error when the contract is built.
    pub validate_formats: bool,
    /// Accept keywords that are not part of Draft 2020-12 (they then constrain nothing).
    /// Off by default; keywords starting with `x-` are always accepted as extensions.
    pub allow_unknown_keywords: bool,
    /// Documents that `$ref` may point to, by URI. Nothing is ever fetched from a network
    /// or a file system: a reference to anything else is an error when the contract is built.
    pub resources: HashMap<String, Value>,
    /// Read the draft from the schema's `$schema` instead of always using Draft 2020-12.
    /// Off for contracts (one dialect, explicitly); on for third-party corpora written
    /// against older drafts.
    pub detect_draft: bool,
    /// Bounds on `$ref` chains, checked before the validator resolves them.
    pub schema_limits: proviso_json::refs::SchemaLimits,
}

proviso_macros::setters!(SchemaOptions {
    validate_formats: bool,
    allow_unknown_keywords: bool,
    resources: HashMap<String, Value>,
    detect_draft: bool,
    schema_limits: proviso_json::refs::SchemaLimits,
});

impl Default for SchemaOptions {
    fn default() -> Self {
        Self {
            validate_formats: true,
            allow_unknown_keywords: false,
            resources: HashMap::new(),
            detect_draft: false,
            schema_limits: proviso_json::refs::SchemaLimits::default(),
        }
    }
}

/// A compiled schema.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    schema: Arc<Value>,
    validator: Arc<Validator>,
}

struct Resources(HashMap<String, Value>);

impl Retrieve for Resources {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let uri = uri.as_str();
        self.0
            .get(uri)
            .or_else(|| self.0.get(uri.trim_end_matches('#')))
            .cloned()
            .ok_or_else(|| {
                format!("`{uri}` is not a known resource; proviso fetches nothing").into()
            })
    }
}

impl CompiledSchema {
    /// Compiles `schema` as Draft 2020-12.
    ///
    /// # Errors
    ///
    /// [`ContractError`] when the schema is invalid, names an unknown keyword, or refers to a
    /// document that is not among the options' resources.
    pub fn compile(schema: &Value, options: &SchemaOptions) -> Result<Self, ContractError> {
        // Bounded before the validator resolves anything: its resolution recurses.
        proviso_json::refs::check_limits(schema, &options.schema_limits)?;
        if !options.allow_unknown_keywords {
            check_keywords(schema, "")?;
        }
        let mut builder = jsonschema::options();
        if !options.detect_draft {
            builder = builder.with_draft(Draft::Draft202012);
        }
        let validator = builder
            .should_validate_formats(options.validate_formats)
            // A format the validator does not know would be asserted by nobody: refuse it.
            .should_ignore_unknown_formats(!options.validate_formats)
            .with_retriever(Resources(options.resources.clone()))
            .build(schema)
            .map_err(|e| ContractError::InvalidSchema {
                message: e.to_string(),
                schema_path: e.schema_path().as_str().to_owned(),
            })?;
        Ok(Self {
            schema: Arc::new(schema.clone()),
            validator: Arc::new(validator),
        })
    }

    /// The schema as written.
    #[must_use]
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether `instance` is valid; faster than collecting violations.
    #[must_use]
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }

    /// Every violation of the schema by `instance`, in the validator's order.
    #[must_use]
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        self.validator
            .iter_errors(instance)
            .map(|error| {
                let keyword = error.kind().keyword().to_owned();
                let instance_path = error.instance_path().as_str().to_owned();
                Violation {
                    code: Code::for_keyword(&keyword),
                    message: if instance_path.is_empty() {
                        error.to_string()
                    } else {
                        format!("{instance_path}: {error}")
                    },
                    keyword: Some(keyword),
                    location: Location {
                        instance_path: Some(instance_path),
                        schema_path: Some(error.schema_path().as_str().to_owned()),
                        ..Location::default()
                    },
                }
            })
            .collect()
    }
}

/// Keywords whose value is one schema.
const SCHEMA_KEYWORDS: &[&str] = &[
    "additionalProperties",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an object of schemas.
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is an array of schemas.
const SCHEMA_ARRAY_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Every other Draft 2020-12 keyword (core, validation, applicator, meta-data, content,
/// format annotation).
const OTHER_KEYWORDS: &[&str] = &[
    // OpenAPI's `discriminator`, which Pydantic and the OpenAI client write beside a `oneOf`
    // of models: it only names the property whose `const` tells the branches apart, which
    // the branches themselves already enforce, so accepting it loosens nothing.
    "discriminator",
    "$schema",
    "$id",
    "$ref",
    "$dynamicRef",
    "$dynamicAnchor",
    "$anchor",
    "$vocabulary",
    "$comment",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "format",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords that annotate or organise a schema but assert nothing about an instance.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
];

/// Every assertion or applicator keyword used anywhere in `schema` (annotations such as
/// `title` and containers such as `$defs` are left out; so are `x-` extensions).
#[must_use]
pub fn assertion_keywords(schema: &Value) -> std::collections::BTreeSet<String> {
    keywords_used(schema)
        .into_iter()
        .filter(|k| !ANNOTATIONS.contains(&k.as_str()) && !k.starts_with("x-"))
        .collect()
}

/// Every keyword used anywhere in `schema` (in schema positions, not property names).
#[must_use]
pub fn keywords_used(schema: &Value) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let _ = walk(schema, "", &mut |key, _| {
        out.insert(key.to_owned());
        Ok(())
    });
    out
}

fn check_keywords(schema: &Value, path: &str) -> Result<(), ContractError> {
    walk(schema, path, &mut |key, here| {
        if SCHEMA_KEYWORDS.contains(&key)
            || SCHEMA_MAP_KEYWORDS.contains(&key)
            || SCHEMA_ARRAY_KEYWORDS.contains(&key)
            || OTHER_KEYWORDS.contains(&key)
            || key.starts_with("x-")
        {
            Ok(())
        } else {
            Err(ContractError::UnknownKeyword {
                keyword: key.to_owned(),
                schema_path: here.to_owned(),
            })
        }
    })
}

/// Visits every keyword of `schema` and its subschemas with its schema path.
fn walk(
    schema: &Value,
    path: &str,
    visit: &mut dyn FnMut(&str, &str) -> Result<(), ContractError>,
) -> Result<(), ContractError> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    let escape = |s: &str| s.replace('~', "~0").replace('/', "~1");
    for (key, value) in map {
        let here = format!("{path}/{}", escape(key));
        visit(key, &here)?;
        if SCHEMA_KEYWORDS.contains(&key.as_str()) {
            walk(value, &here, visit)?;
        } else if SCHEMA_MAP_KEYWORDS.contains(&key.as_str()) {
            if let Value::Object(children) = value {
                for (name, child) in children {
                    walk(child, &format!("{here}/{}", escape(name)), visit)?;
                }
            }
        } else if SCHEMA_ARRAY_KEYWORDS.contains(&key.as_str()) {
            if let Value::Array(children) = value {
                for (i, child) in children.iter().enumerate() {
                    walk(child, &format!("{here}/{i}"), visit)?;
                }
            }
        }
    }
    Ok(())
}
