//! Tool schemas with their own `$defs`, as Pydantic and the OpenAI client write them (nested
//! models, `Optional`, `Literal`, lists of models, a discriminated union), embedded in every
//! call format's grammar and in every export. Each schema's `#/$defs/...` references must
//! keep resolving once the schema sits inside a call wrapper: checked here by validating
//! calls against the composed grammar documents with the same validator the gates use.

#![allow(clippy::unwrap_used)]

use proviso_contract::{CompiledSchema, SchemaOptions};
use proviso_tools::export::{export_tools, Dialect};
use proviso_tools::{CallFormat, Grammar, GrammarOptions, Registry, ToolChoice};
use serde_json::{json, Value};

/// `openai.pydantic_function_tool(Person)` for a `Person` with a nested `Address`, an
/// `Optional` nickname, a `Literal` kind, a list of addresses and a discriminated `pet`.
fn person_tool() -> Value {
    json!({"type": "function", "function": {"name": "register_person", "strict": true, "parameters": {
        "$defs": {
            "Address": {"properties": {"street": {"title": "Street", "type": "string"}, "city": {"title": "City", "type": "string"},
                "zip_code": {"anyOf": [{"type": "string", "pattern": "^[0-9]{5}$"}, {"type": "null"}], "title": "Zip Code"}},
                "required": ["street", "city", "zip_code"], "title": "Address", "type": "object", "additionalProperties": false},
            "Cat": {"properties": {"pet_type": {"const": "cat", "title": "Pet Type", "type": "string"}, "lives": {"title": "Lives", "type": "integer"}},
                "required": ["pet_type", "lives"], "title": "Cat", "type": "object", "additionalProperties": false},
            "Dog": {"properties": {"pet_type": {"const": "dog", "title": "Pet Type", "type": "string"}, "good": {"title": "Good", "type": "boolean"}},
                "required": ["pet_type", "good"], "title": "Dog", "type": "object", "additionalProperties": false}},
        "properties": {"name": {"title": "Name", "type": "string"}, "kind": {"enum": ["patient", "doctor"], "title": "Kind", "type": "string"},
            "home": {"$ref": "#/$defs/Address"}, "previous": {"items": {"$ref": "#/$defs/Address"}, "title": "Previous", "type": "array"},
            "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Nickname"},
            "pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}, "propertyName": "pet_type"},
                "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "title": "Pet"}},
        "required": ["name", "kind", "home", "previous", "nickname", "pet"], "title": "Person", "type": "object", "additionalProperties": false}}})
}

/// A recursive model (a tree of categories), which no inlining can flatten.
fn tree_tool() -> Value {
    json!({"type": "function", "function": {"name": "file_category", "parameters": {
        "$defs": {"Node": {"type": "object", "properties": {"label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["label", "children"], "additionalProperties": false}},
        "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"], "additionalProperties": false}}})
}

fn arguments() -> Value {
    json!({"name": "Ada", "kind": "doctor", "home": {"street": "1 Main St", "city": "Springfield", "zip_code": "12345"},
        "previous": [{"street": "2 Side St", "city": "Shelbyville", "zip_code": null}], "nickname": null,
        "pet": {"pet_type": "cat", "lives": 9}})
}

/// Arguments that break a constraint that lives only inside `$defs` (the zip code pattern of
/// the nested `Address`, the `Dog` branch of the union).
fn bad_arguments() -> Vec<Value> {
    let mut zip = arguments();
    zip["home"]["zip_code"] = json!("ABCDE");
    let mut pet = arguments();
    pet["pet"] = json!({"pet_type": "dog", "lives": 3});
    let mut extra = arguments();
    extra["previous"][0]["country"] = json!("US");
    vec![zip, pet, extra]
}

fn registry() -> Registry {
    Registry::from_openai(&json!([person_tool(), tree_tool()])).unwrap()
}

fn compiled(schema: &Value) -> CompiledSchema {
    CompiledSchema::compile(schema, &SchemaOptions::default()).unwrap()
}

/// The call of `tool` with `arguments`, as each JSON format's grammar document describes it.
fn call(format: CallFormat, tool: &str, arguments: &Value) -> Value {
    match format {
        CallFormat::Envelope => {
            json!({"reasoning": "", "intent": "tool_request", "tool": tool, "arguments": arguments})
        }
        CallFormat::Llama3 => json!({"name": tool, "parameters": arguments}),
        _ => json!({"name": tool, "arguments": arguments}),
    }
}

#[test]
fn the_registry_accepts_pydantic_schemas() {
    let registry = registry();
    assert_eq!(registry.names(), vec!["register_person", "file_category"]);
}

#[test]
fn json_grammars_resolve_each_tools_own_defs() {
    let registry = registry();
    for format in [CallFormat::Envelope, CallFormat::Llama3] {
        for choice in [
            ToolChoice::Required,
            ToolChoice::Named("register_person".into()),
        ] {
            let options = GrammarOptions::default().choice(choice);
            let grammar = format.grammar(&registry, &options).unwrap();
            let Grammar::JsonSchema(schema) = &grammar.grammar else {
                panic!("{format}: expected a JSON Schema grammar")
            };
            let validator = compiled(schema);
            assert!(
                validator.is_valid(&call(format, "register_person", &arguments())),
                "{format}"
            );
            for bad in bad_arguments() {
                assert!(
                    !validator.is_valid(&call(format, "register_person", &bad)),
                    "{format}: {bad}"
                );
            }
        }
        let options = GrammarOptions::default().choice(ToolChoice::Required);
        let Grammar::JsonSchema(schema) = format.grammar(&registry, &options).unwrap().grammar
        else {
            panic!()
        };
        let tree = json!({"root": {"label": "a", "children": [{"label": "b", "children": []}]}});
        let validator = compiled(&schema);
        assert!(validator.is_valid(&call(format, "file_category", &tree)));
        let broken = json!({"root": {"label": "a", "children": [{"label": 3, "children": []}]}});
        assert!(!validator.is_valid(&call(format, "file_category", &broken)));
    }
}

#[test]
fn the_envelope_answer_schema_keeps_its_defs_too() {
    let registry = registry();
    let answer = json!({"$defs": {"Cite": {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"], "additionalProperties": false}},
        "type": "object", "properties": {"cites": {"type": "array", "items": {"$ref": "#/$defs/Cite"}}}, "required": ["cites"], "additionalProperties": false});
    let options = GrammarOptions::default()
        .choice(ToolChoice::Auto)
        .answer(Some(answer));
    let Grammar::JsonSchema(schema) = CallFormat::Envelope
        .grammar(&registry, &options)
        .unwrap()
        .grammar
    else {
        panic!()
    };
    let validator = compiled(&schema);
    let good =
        json!({"reasoning": "", "intent": "final_answer", "answer": {"cites": [{"source": "a"}]}});
    assert!(validator.is_valid(&good));
    let bad =
        json!({"reasoning": "", "intent": "final_answer", "answer": {"cites": [{"src": "a"}]}});
    assert!(!validator.is_valid(&bad));
}

#[test]
fn hermes_embeds_each_schema_with_its_defs() {
    let registry = registry();
    let options = GrammarOptions::default().choice(ToolChoice::Required);
    let Grammar::Lark(lark) = CallFormat::Hermes
        .grammar(&registry, &options)
        .unwrap()
        .grammar
    else {
        panic!()
    };
    // The one `%json` document of the call rule holds the moved tool schemas.
    let start = lark.find("%json ").unwrap() + "%json ".len();
    let end = lark[start..].find("\"\\n</tool_call>\"").unwrap() + start;
    let schema: Value = serde_json::from_str(lark[start..end].trim()).unwrap();
    let mut schema = schema;
    schema.as_object_mut().unwrap().remove("x-guidance");
    let validator = compiled(&schema);
    assert!(validator.is_valid(&call(CallFormat::Hermes, "register_person", &arguments())));
    for bad in bad_arguments() {
        assert!(!validator.is_valid(&call(CallFormat::Hermes, "register_person", &bad)));
    }
}

#[test]
fn pythonic_inlines_what_it_can_and_refuses_recursion_by_name() {
    let options = GrammarOptions::default().choice(ToolChoice::Required);
    // Nested models inline into the pythonic grammar.
    let flat = json!([{"type": "function", "function": {"name": "move", "parameters": {
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
        "type": "object", "properties": {"to": {"$ref": "#/$defs/Address"}, "stops": {"type": "array", "items": {"$ref": "#/$defs/Address"}}},
        "required": ["to"], "additionalProperties": false}}}]);
    let flat = Registry::from_openai(&flat).unwrap();
    let grammar = CallFormat::Pythonic.grammar(&flat, &options).unwrap();
    assert!(matches!(grammar.grammar, Grammar::Lark(_)));
    let err = CallFormat::Pythonic
        .grammar(
            &Registry::from_openai(&json!([tree_tool()])).unwrap(),
            &options,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("$ref"), "{err}");
}

#[test]
fn exports_carry_the_defs() {
    let registry = registry();
    let options = GrammarOptions::default().choice(ToolChoice::Required);
    // JSON Schema export of the llama3 grammar: a self-contained document.
    let exported = export_tools(
        &registry,
        CallFormat::Llama3,
        &options,
        Dialect::JsonSchema,
        false,
        &|_| Err(proviso_tools::export::GbnfError::new("unused")),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(&exported).unwrap();
    let validator = compiled(&schema);
    assert!(validator.is_valid(&call(CallFormat::Llama3, "register_person", &arguments())));
    assert!(!validator.is_valid(&call(
        CallFormat::Llama3,
        "register_person",
        &bad_arguments()[0]
    )));
    // GBNF for hermes: the document handed to llama.cpp's converter resolves its references.
    let seen = std::cell::RefCell::new(None);
    let to_gbnf = |schema: &Value| {
        *seen.borrow_mut() = Some(schema.clone());
        Ok("root ::= \"{}\"\n".to_owned())
    };
    let flat = Registry::from_openai(&json!([tree_tool()])).unwrap();
    export_tools(
        &flat,
        CallFormat::Hermes,
        &options,
        Dialect::Gbnf,
        false,
        &to_gbnf,
    )
    .unwrap();
    let handed = seen.borrow().clone().unwrap();
    let validator = compiled(&handed);
    let tree = json!({"root": {"label": "a", "children": [{"label": "b", "children": []}]}});
    assert!(validator.is_valid(&call(CallFormat::Hermes, "file_category", &tree)));
    // Lark export of the hermes grammar keeps the `$defs` in its `%json` document.
    let lark = export_tools(
        &registry,
        CallFormat::Hermes,
        &options,
        Dialect::Lark,
        false,
        &|_| Err(proviso_tools::export::GbnfError::new("unused")),
    )
    .unwrap();
    assert!(
        lark.contains("\"$defs\"")
            && lark.contains("#/$defs/proviso_0_register_person/$defs/Address"),
        "{lark}"
    );
}
