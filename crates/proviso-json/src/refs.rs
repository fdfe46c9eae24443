//! Local `$ref`s in JSON Schema documents: bounds on how deep they chain, refusal of cycles
//! that make no progress, rebasing a schema that is embedded inside another, and inlining.
//!
//! Every schema compiler proviso hands a schema to (the validator, the grammar compiler,
//! llama.cpp's GBNF converter) resolves `$ref`s recursively. A request body of a few kilobytes
//! can chain a thousand `$defs` and overflow whichever thread compiles it, and a `$ref` that
//! points at itself (`{"$ref": "#"}`) describes no value at all. [`check_limits`] runs first, on
//! an explicit stack of its own, so such a schema is refused with an error naming the limit and
//! the pointer before any compiler recurses into it. Only local references (`#` followed by a
//! JSON pointer) are followed: proviso never fetches a schema, and the compilers refuse the
//! others themselves.

use serde_json::{Map, Value};

/// Bounds on a schema's size and on its `$ref` resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaLimits {
    /// Most JSON values in one schema (every keyword's value, every `enum` member, counted
    /// recursively). A request can carry a 100,000-value `enum` in 2 MB; compiling it costs
    /// hundreds of megabytes before any compiler's own size limit stops it.
    pub max_nodes: usize,
    /// Longest chain of `$ref`s followed one inside another (a `$ref` found in the target of
    /// the previous one). Recursion through a property or an item counts once.
    pub max_depth: usize,
    /// Most `$ref` keywords in one schema.
    pub max_refs: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        // Pydantic models nest a handful of levels; 64 leaves room for generated schemas
        // while keeping every compiler's recursion far from a thread's stack limit.
        // The largest of MaskBench's 8,540 real-world schemas has 28,520 values.
        Self {
            max_nodes: 50_000,
            max_depth: 64,
            max_refs: 10_000,
        }
    }
}

impl SchemaLimits {
    /// Sets [`SchemaLimits::max_depth`].
    #[must_use]
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// Sets [`SchemaLimits::max_nodes`].
    #[must_use]
    pub fn max_nodes(mut self, nodes: usize) -> Self {
        self.max_nodes = nodes;
        self
    }

    /// Sets [`SchemaLimits::max_refs`].
    #[must_use]
    pub fn max_refs(mut self, refs: usize) -> Self {
        self.max_refs = refs;
        self
    }
}

/// Why a schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// The schema has more values than [`SchemaLimits::max_nodes`].
    #[error("the schema has more than {limit} values (the limit was passed inside `{pointer}`)")]
    TooLarge {
        /// The limit.
        limit: usize,
        /// The JSON pointer of the object or array being counted when the limit was passed.
        pointer: String,
    },
    /// A chain of `$ref`s is deeper than [`SchemaLimits::max_depth`].
    #[error("`$ref` chain deeper than the limit of {limit}, at `{pointer}`")]
    TooDeep {
        /// The limit.
        limit: usize,
        /// The JSON pointer (into the schema) of the `$ref` that went past the limit.
        pointer: String,
    },
    /// More `$ref`s than [`SchemaLimits::max_refs`].
    #[error("more than {limit} `$ref` keywords in one schema")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// A cycle of references that never descends into a property or an item: the schema
    /// refers to itself without describing any value.
    #[error("`$ref` cycle that describes no value: `{pointer}` refers back to itself through `$ref`/`allOf`/`anyOf`/`oneOf` alone")]
    Cycle {
        /// The JSON pointer of the `$ref` that closes the cycle.
        pointer: String,
    },
    /// A local reference whose target does not exist.
    #[error("`$ref` `{reference}` at `{pointer}` points at nothing in the schema")]
    Unresolvable {
        /// The reference as written.
        reference: String,
        /// The JSON pointer of the `$ref`.
        pointer: String,
    },
    /// A reference to the schema's own root or into it, asked to be inlined, is recursive.
    #[error("`$ref` `{reference}` at `{pointer}` is recursive and cannot be inlined")]
    Recursive {
        /// The reference as written.
        reference: String,
        /// The JSON pointer of the `$ref`.
        pointer: String,
    },
}

/// Keywords whose value is one subschema applied to a part of the instance (a property, an
/// item, a key): following them is progress, so a cycle through them is recursion over a
/// finite value, not a loop.
const DESCEND_ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords whose value maps names to subschemas applied to parts of the instance.
const DESCEND_MAP: &[&str] = &["properties", "patternProperties"];
/// Keywords whose value lists subschemas applied to parts of the instance.
const DESCEND_LIST: &[&str] = &["prefixItems", "items"];
/// Keywords whose subschemas apply to the same instance: no progress.
const IN_PLACE_ONE: &[&str] = &["not", "if", "then", "else"];
const IN_PLACE_LIST: &[&str] = &["allOf", "anyOf", "oneOf"];
const IN_PLACE_MAP: &[&str] = &["dependentSchemas"];
/// Keywords that only annotate: they constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];
/// Keywords whose subschemas are definitions, reached only through a `$ref`.
const DEFINITIONS: &[&str] = &["$defs", "definitions"];

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Every subschema directly below `schema`, with its pointer suffix and whether reaching it
/// descends into the instance. Definitions are included when `definitions` is set.
fn children(schema: &Map<String, Value>, definitions: bool) -> Vec<(String, &Value, bool)> {
    let mut out = Vec::new();
    for (key, value) in schema {
        let k = key.as_str();
        let progress =
            if DESCEND_ONE.contains(&k) || DESCEND_MAP.contains(&k) || DESCEND_LIST.contains(&k) {
                true
            } else if IN_PLACE_ONE.contains(&k)
                || IN_PLACE_LIST.contains(&k)
                || IN_PLACE_MAP.contains(&k)
            {
                false
            } else if DEFINITIONS.contains(&k) {
                if !definitions {
                    continue;
                }
                false
            } else {
                continue;
            };
        let base = format!("/{}", escape(k));
        match value {
            Value::Object(map)
                if DESCEND_MAP.contains(&k)
                    || IN_PLACE_MAP.contains(&k)
                    || DEFINITIONS.contains(&k) =>
            {
                for (name, sub) in map {
                    out.push((format!("{base}/{}", escape(name)), sub, progress));
                }
            }
            Value::Array(items) if DESCEND_LIST.contains(&k) || IN_PLACE_LIST.contains(&k) => {
                for (i, sub) in items.iter().enumerate() {
                    out.push((format!("{base}/{i}"), sub, progress));
                }
            }
            Value::Object(_) | Value::Bool(_)
                if DESCEND_ONE.contains(&k) || IN_PLACE_ONE.contains(&k) =>
            {
                out.push((base, value, progress));
            }
            _ => {}
        }
    }
    out
}

/// The JSON pointer a local reference names, or `None` for a reference that is not local or
/// names an anchor rather than a pointer.
fn local_pointer(reference: &str) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    if !fragment.is_empty() && !fragment.starts_with('/') {
        return None;
    }
    Some(percent_decode(fragment))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One `$ref` found inside a schema node: where it is, what it names, and whether the path to
/// it from the node descends into the instance.
struct Edge {
    at: String,
    target: String,
    progress: bool,
}

/// The `$ref`s applied within the node at `pointer` (not those inside its definitions, which
/// apply only when referenced), without following any of them.
fn edges(
    root: &Value,
    pointer: &str,
    count: &mut usize,
    limits: &SchemaLimits,
) -> Result<Vec<Edge>, LimitError> {
    let mut out = Vec::new();
    let Some(node) = root.pointer(pointer) else {
        return Ok(out);
    };
    let mut stack = vec![(pointer.to_owned(), node, false)];
    while let Some((at, value, progress)) = stack.pop() {
        let Value::Object(map) = value else { continue };
        if let Some(Value::String(reference)) = map.get("$ref") {
            *count += 1;
            if *count > limits.max_refs {
                return Err(LimitError::TooMany {
                    limit: limits.max_refs,
                });
            }
            // A target that does not resolve from the root is left to the compilers, which
            // resolve against nested `$id`s and report a missing target themselves.
            if let Some(target) = local_pointer(reference).filter(|t| root.pointer(t).is_some()) {
                out.push(Edge {
                    at: format!("{at}/$ref"),
                    target,
                    progress,
                });
            }
        }
        for (suffix, child, step) in children(map, false) {
            // A nested `$id` starts another resource, whose references resolve against it.
            if child.get("$id").is_some() {
                continue;
            }
            stack.push((format!("{at}{suffix}"), child, progress || step));
        }
    }
    Ok(out)
}

/// Checks `schema`'s local references against `limits`: every target exists, no chain is
/// deeper than the limit, and no cycle loops without descending into a property or an item.
///
/// Runs on an explicit stack, so it is safe on any thread whatever the schema.
///
/// ```
/// use proviso_json::refs::{check_limits, LimitError, SchemaLimits};
/// use serde_json::json;
///
/// let tree = json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}});
/// assert!(check_limits(&tree, &SchemaLimits::default()).is_ok());
/// let itself = json!({"$ref": "#"});
/// assert!(matches!(check_limits(&itself, &SchemaLimits::default()), Err(LimitError::Cycle { .. })));
/// ```
///
/// # Errors
///
/// [`LimitError`] naming the limit and the pointer of the `$ref` at fault.
pub fn check_limits(schema: &Value, limits: &SchemaLimits) -> Result<(), LimitError> {
    use std::collections::HashMap;

    count_nodes(schema, limits.max_nodes)?;

    // The refs of each node are collected once, so the work is linear in the number of
    // distinct targets however often each is referenced.
    let mut count = 0usize;
    let mut cache: HashMap<String, std::rc::Rc<Vec<Edge>>> = HashMap::new();
    // Longest chain below each finished node.
    let mut depth: HashMap<String, usize> = HashMap::new();
    let get_edges = |pointer: &str,
                     cache: &mut HashMap<String, std::rc::Rc<Vec<Edge>>>,
                     count: &mut usize|
     -> Result<std::rc::Rc<Vec<Edge>>, LimitError> {
        if let Some(e) = cache.get(pointer) {
            return Ok(e.clone());
        }
        let e = std::rc::Rc::new(edges(schema, pointer, count, limits)?);
        cache.insert(pointer.to_owned(), e.clone());
        Ok(e)
    };

    struct Frame {
        node: String,
        edges: std::rc::Rc<Vec<Edge>>,
        next: usize,
        /// Whether the edge that led here descended into the instance.
        entered_with_progress: bool,
        best: usize,
    }
    let root_edges = get_edges("", &mut cache, &mut count)?;
    let mut stack = vec![Frame {
        node: String::new(),
        edges: root_edges,
        next: 0,
        entered_with_progress: true,
        best: 0,
    }];
    let too_deep = |pointer: &str| LimitError::TooDeep {
        limit: limits.max_depth,
        pointer: pointer.to_owned(),
    };
    while let Some(top) = stack.last_mut() {
        if top.next == top.edges.len() {
            let done = stack.pop().unwrap_or_else(|| unreachable_frame());
            depth.insert(done.node, done.best);
            if let Some(parent) = stack.last_mut() {
                let edge = &parent.edges[parent.next - 1];
                let below = depth.get(&edge.target).copied().unwrap_or(0);
                parent.best = parent.best.max(below + 1);
                if parent.best > limits.max_depth {
                    return Err(too_deep(&edge.at));
                }
            }
            continue;
        }
        let edges = top.edges.clone();
        let edge = &edges[top.next];
        top.next += 1;
        if let Some(at) = stack.iter().position(|f| f.node == edge.target) {
            // A back edge: recursion. It is a loop only if no edge of the cycle descends.
            let progress = edge.progress || stack[at + 1..].iter().any(|f| f.entered_with_progress);
            if !progress {
                return Err(LimitError::Cycle {
                    pointer: edge.at.clone(),
                });
            }
            let top = stack.last_mut().unwrap_or_else(|| unreachable_frame());
            top.best = top.best.max(1);
            continue;
        }
        if let Some(&d) = depth.get(&edge.target) {
            let top = stack.last_mut().unwrap_or_else(|| unreachable_frame());
            top.best = top.best.max(d + 1);
            if top.best > limits.max_depth {
                return Err(too_deep(&edge.at));
            }
            continue;
        }
        if stack.len() > limits.max_depth {
            return Err(too_deep(&edge.at));
        }
        let next_edges = get_edges(&edge.target, &mut cache, &mut count)?;
        stack.push(Frame {
            node: edge.target.clone(),
            edges: next_edges,
            next: 0,
            entered_with_progress: edge.progress,
            best: 0,
        });
    }
    let longest = depth.get("").copied().unwrap_or(0);
    if longest > limits.max_depth {
        return Err(LimitError::TooDeep {
            limit: limits.max_depth,
            pointer: String::new(),
        });
    }
    Ok(())
}

/// Counts `schema`'s values, stopping as soon as there are more than `limit`.
fn count_nodes(schema: &Value, limit: usize) -> Result<(), LimitError> {
    let mut count = 0usize;
    // Containers carry their pointer, so the error can say where the bulk is; scalars are
    // only counted.
    let mut stack: Vec<(&Value, String)> = vec![(schema, String::new())];
    while let Some((value, pointer)) = stack.pop() {
        count += 1;
        let children: Box<dyn Iterator<Item = (String, &Value)>> = match value {
            Value::Object(map) => Box::new(map.iter().map(|(k, v)| (escape(k), v))),
            Value::Array(items) => {
                Box::new(items.iter().enumerate().map(|(i, v)| (i.to_string(), v)))
            }
            _ => Box::new(std::iter::empty()),
        };
        for (token, child) in children {
            if child.is_object() || child.is_array() {
                stack.push((child, format!("{pointer}/{token}")));
            } else {
                count += 1;
            }
            if count > limit {
                return Err(LimitError::TooLarge {
                    limit,
                    pointer: pointer.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cold]
fn unreachable_frame() -> ! {
    // The loop only pops or peeks while the stack is non-empty.
    panic!("reference walk: empty stack")
}

/// Whether `schema` has any local `$ref` (one that starts with `#`).
#[must_use]
pub fn has_local_refs(schema: &Value) -> bool {
    let mut stack = vec![schema];
    while let Some(value) = stack.pop() {
        let Value::Object(map) = value else { continue };
        if matches!(map.get("$ref"), Some(Value::String(r)) if r.starts_with('#')) {
            return true;
        }
        for (_, child, _) in children(map, true) {
            stack.push(child);
        }
    }
    false
}

/// `schema` with every local reference rewritten to resolve from a document in which
/// `schema` sits at the JSON pointer `base`: `#` becomes `#{base}`, `#/$defs/x` becomes
/// `#{base}/$defs/x`. A root `$id` is dropped, because the rewritten references resolve from
/// the enclosing document's root. Data (`const`, `enum`, `default`, `examples`) is never
/// touched: only `$ref` keywords in schema positions are rewritten.
#[must_use]
pub fn rebase_refs(schema: &Value, base: &str) -> Value {
    let mut out = schema.clone();
    if let Value::Object(map) = &mut out {
        map.remove("$id");
    }
    let mut stack = vec![&mut out];
    while let Some(value) = stack.pop() {
        let Value::Object(map) = value else { continue };
        if let Some(Value::String(reference)) = map.get_mut("$ref") {
            if let Some(rest) = reference.strip_prefix('#') {
                if rest.is_empty() || rest.starts_with('/') {
                    *reference = format!("#{base}{rest}");
                }
            }
        }
        for (key, child) in map.iter_mut() {
            let k = key.as_str();
            let is_map =
                DESCEND_MAP.contains(&k) || IN_PLACE_MAP.contains(&k) || DEFINITIONS.contains(&k);
            let is_list = DESCEND_LIST.contains(&k) || IN_PLACE_LIST.contains(&k);
            let is_one = DESCEND_ONE.contains(&k) || IN_PLACE_ONE.contains(&k);
            if is_one && child.is_object() {
                stack.push(child);
                continue;
            }
            match child {
                Value::Object(sub) if is_map => stack.extend(sub.values_mut()),
                Value::Array(items) if is_list => stack.extend(items.iter_mut()),
                _ => {}
            }
        }
    }
    out
}

/// `schema` with every local `$ref` replaced by a copy of its target, for consumers that have
/// no references (a grammar written for one call format). Sibling keywords of a `$ref` are
/// kept beside the inlined target in an `allOf`. Definitions are dropped once inlined.
///
/// # Errors
///
/// [`LimitError::Recursive`] for a recursive reference, which has no finite inlining, and the
/// errors of [`check_limits`].
pub fn inline_refs(schema: &Value, limits: &SchemaLimits) -> Result<Value, LimitError> {
    check_limits(schema, limits)?;
    fn walk(
        root: &Value,
        value: &Value,
        at: &str,
        active: &mut Vec<String>,
        budget: &mut usize,
    ) -> Result<Value, LimitError> {
        let Value::Object(map) = value else {
            return Ok(value.clone());
        };
        // `check_limits` bounded the chain depth, so this recursion is bounded too; the budget
        // bounds the size of the result (a diamond of references doubles at each level).
        if *budget == 0 {
            return Err(LimitError::TooMany { limit: 0 });
        }
        *budget -= 1;
        let mut out = Map::new();
        let mut inlined = None;
        for (key, child) in map {
            let k = key.as_str();
            if DEFINITIONS.contains(&k) {
                continue;
            }
            if k == "$ref" {
                if let Value::String(reference) = child {
                    if let Some(target) = local_pointer(reference) {
                        if active.contains(&target) {
                            return Err(LimitError::Recursive {
                                reference: reference.clone(),
                                pointer: format!("{at}/$ref"),
                            });
                        }
                        let node =
                            root.pointer(&target)
                                .ok_or_else(|| LimitError::Unresolvable {
                                    reference: reference.clone(),
                                    pointer: format!("{at}/$ref"),
                                })?;
                        active.push(target.clone());
                        let resolved = walk(root, node, &target, active, budget)?;
                        active.pop();
                        inlined = Some(resolved);
                        continue;
                    }
                }
                out.insert(key.clone(), child.clone());
                continue;
            }
            let is_map = DESCEND_MAP.contains(&k) || IN_PLACE_MAP.contains(&k);
            let is_list = DESCEND_LIST.contains(&k) || IN_PLACE_LIST.contains(&k);
            let is_one = DESCEND_ONE.contains(&k) || IN_PLACE_ONE.contains(&k);
            let base = format!("{at}/{}", escape(k));
            let new = match child {
                Value::Object(sub) if is_map => {
                    let mut m = Map::new();
                    for (name, s) in sub {
                        m.insert(
                            name.clone(),
                            walk(root, s, &format!("{base}/{}", escape(name)), active, budget)?,
                        );
                    }
                    Value::Object(m)
                }
                Value::Array(items) if is_list => Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, s)| walk(root, s, &format!("{base}/{i}"), active, budget))
                        .collect::<Result<_, _>>()?,
                ),
                Value::Object(_) if is_one => walk(root, child, &base, active, budget)?,
                other => other.clone(),
            };
            out.insert(key.clone(), new);
        }
        Ok(match inlined {
            None => Value::Object(out),
            Some(target) if out.is_empty() => target,
            // Annotations beside a `$ref` (Pydantic writes `description` and `default` there)
            // are merged into the target instead of adding an `allOf`.
            Some(Value::Object(mut target))
                if out.keys().all(|k| ANNOTATIONS.contains(&k.as_str())) =>
            {
                for (k, v) in out {
                    target.entry(k).or_insert(v);
                }
                Value::Object(target)
            }
            Some(target) => {
                let mut both = Map::new();
                both.insert(
                    "allOf".into(),
                    Value::Array(vec![target, Value::Object(out)]),
                );
                Value::Object(both)
            }
        })
    }
    let mut active = vec![String::new()];
    let mut budget = 100_000usize;
    walk(schema, schema, "", &mut active, &mut budget).map_err(|e| match e {
        LimitError::TooMany { limit: 0 } => LimitError::TooMany {
            limit: limits.max_refs,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(depth: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..depth {
            defs.insert(
                format!("d{i}"),
                json!({"$ref": format!("#/$defs/d{}", i + 1)}),
            );
        }
        defs.insert(format!("d{depth}"), json!({"type": "string"}));
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    #[test]
    fn huge_schemas_are_refused_before_any_compiler_sees_them() {
        let values: Vec<Value> = (0..100_000).map(|i| json!(format!("value-{i}"))).collect();
        let schema = json!({"properties": {"x": {"enum": values}}});
        match check_limits(&schema, &SchemaLimits::default()) {
            Err(LimitError::TooLarge { limit, pointer }) => {
                assert_eq!(limit, 50_000);
                assert_eq!(pointer, "/properties/x/enum");
            }
            other => panic!("{other:?}"),
        }
        let values: Vec<Value> = (0..1_000).map(|i| json!(i)).collect();
        assert!(check_limits(&json!({"enum": values}), &SchemaLimits::default()).is_ok());
    }

    #[test]
    fn deep_chains_are_refused_at_the_limit() {
        let limits = SchemaLimits::default();
        assert!(check_limits(&chain(10), &limits).is_ok());
        assert!(check_limits(&chain(limits.max_depth - 1), &limits).is_ok());
        for depth in [limits.max_depth + 1, 1_000, 10_000] {
            match check_limits(&chain(depth), &limits) {
                Err(LimitError::TooDeep { limit, pointer }) => {
                    assert_eq!(limit, 64);
                    assert!(pointer.starts_with("/$defs/d"), "{pointer}");
                }
                other => panic!("depth {depth}: {other:?}"),
            }
        }
    }

    #[test]
    fn cycles_without_progress_are_refused_and_recursion_is_not() {
        let limits = SchemaLimits::default();
        let two = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"});
        assert!(matches!(
            check_limits(&two, &limits),
            Err(LimitError::Cycle { .. })
        ));
        assert!(matches!(
            check_limits(&json!({"$ref": "#"}), &limits),
            Err(LimitError::Cycle { .. })
        ));
        let list = json!({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}}, "$ref": "#/$defs/node"});
        assert!(check_limits(&list, &limits).is_ok());
        assert!(matches!(
            inline_refs(&list, &limits),
            Err(LimitError::Recursive { .. })
        ));
    }

    #[test]
    fn missing_targets_name_the_pointer_when_inlined() {
        let s = json!({"properties": {"x": {"$ref": "#/$defs/nope"}}});
        assert!(check_limits(&s, &SchemaLimits::default()).is_ok());
        match inline_refs(&s, &SchemaLimits::default()) {
            Err(LimitError::Unresolvable { reference, pointer }) => {
                assert_eq!(reference, "#/$defs/nope");
                assert_eq!(pointer, "/properties/x/$ref");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rebase_rewrites_refs_and_never_data() {
        let s = json!({"$defs": {"id": {"type": "string"}}, "properties": {
            "x": {"$ref": "#/$defs/id"}, "self": {"items": {"$ref": "#"}},
            "$ref": {"const": {"$ref": "#/data"}}}});
        let r = rebase_refs(&s, "/$defs/tool");
        assert_eq!(r["properties"]["x"]["$ref"], "#/$defs/tool/$defs/id");
        assert_eq!(r["properties"]["self"]["items"]["$ref"], "#/$defs/tool");
        assert_eq!(r["properties"]["$ref"]["const"]["$ref"], "#/data");
    }

    #[test]
    fn inline_replaces_refs_with_targets() {
        let s = json!({"$defs": {"id": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/id", "description": "d"}, "y": {"$ref": "#/$defs/id"}}});
        let r = inline_refs(&s, &SchemaLimits::default()).unwrap();
        assert_eq!(
            r,
            json!({"properties": {"x": {"type": "string", "description": "d"}, "y": {"type": "string"}}})
        );
        let s = json!({"$defs": {"id": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/id", "maxLength": 3}}});
        let r = inline_refs(&s, &SchemaLimits::default()).unwrap();
        assert_eq!(
            r,
            json!({"properties": {"x": {"allOf": [{"type": "string"}, {"maxLength": 3}]}}})
        );
    }
}
