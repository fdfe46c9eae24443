//! The workspace's shape, checked: crates depend only on crates of a lower layer (data flows
//! one way: contract → grammar and validator → decoding → gates → harness → server →
//! facade → binaries), and no two modules of a crate import each other, directly or
//! through others. Read from the sources and manifests, so it needs neither the model nor
//! any tool beyond the standard library.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Each crate's layer. A crate may depend (outside its tests) only on crates of a lower
/// layer. The `Backend` seam (`proviso-backend`) sits below both the server, which serves
/// it, and the judge and the backends, which fill it; the decoder needs only the shared
/// words of `proviso-core`, not the contract.
const LAYERS: &[(&str, u8)] = &[
    ("proviso-macros", 0),
    ("proviso-core", 1),
    ("proviso-json", 1),
    ("proviso-model", 1),
    // The sentence encoder knows nothing of contracts: text in, vectors out.
    ("proviso-embed", 1),
    ("proviso-contract", 2),
    ("proviso-tools", 3),
    ("proviso-decode", 3),
    ("proviso-backend", 3),
    ("proviso-llama", 4),
    ("proviso-harness", 4),
    // The server and the judge share a layer: the server serves a backend without knowing
    // gates, the judge fills the backend's types without knowing HTTP.
    ("proviso-server", 4),
    ("proviso-judge", 4),
    ("proviso-local", 5),
    ("proviso-gateway", 5),
    ("proviso-demo", 5),
    ("proviso-mcp", 6),
    ("proviso", 7),
    ("proviso-eval", 8),
    ("proviso-cli", 9),
];

/// The workspace crates a manifest's `[dependencies]` section names.
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut in_section = false;
    let mut deps = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[dependencies]";
            continue;
        }
        if in_section && line.starts_with("proviso") {
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            deps.push(name);
        }
    }
    deps
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut seen = BTreeSet::new();
    let mut upward = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(&own) = layer.get(name.as_str()) else {
            panic!("crate {name} has no layer in LAYERS: place it");
        };
        seen.insert(name.clone());
        for dep in normal_dependencies(&manifest) {
            let theirs = layer[dep.as_str()];
            if theirs >= own {
                upward.push(format!("{name} (layer {own}) -> {dep} (layer {theirs})"));
            }
        }
    }
    assert_eq!(
        seen.len(),
        LAYERS.len(),
        "LAYERS names a crate that is gone"
    );
    assert!(
        upward.is_empty(),
        "dependencies that do not point down: {upward:#?}"
    );
}

/// The module (first path component under `src`) a source file belongs to, or `None` for
/// the crate root and for test files.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_string_lossy();
    let module = first.trim_end_matches(".rs").to_owned();
    let is_test = file.file_stem().is_some_and(|s| s == "tests");
    (!matches!(module.as_str(), "lib" | "main") && !is_test).then_some(module)
}

/// The sibling modules `text` names through `crate::`, outside comments and test modules.
fn imported_modules(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut names = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::C}`, possibly over several lines: read to the brace.
                // `group` is a slice of `code`: its offset is where the group starts.
                let start = group.as_ptr() as usize - code.as_ptr() as usize;
                let end = code[start..].find('}').map_or(code.len(), |e| start + e);
                for item in code[start..end].split(',') {
                    let head: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(head);
                }
            } else {
                let head: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(head);
            }
        }
    }
    names
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A cycle through `start` in `graph`, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut visited = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_owned());
                return Some(cycle);
            }
            if visited.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let mut cycles = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        source_files(&src, &mut files);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Some(module) = module_of(&src, file) else {
                continue;
            };
            let text = std::fs::read_to_string(file).unwrap();
            let imports = imported_modules(&text);
            graph
                .entry(module.clone())
                .or_default()
                .extend(imports.into_iter().filter(|m| *m != module));
        }
        let modules: BTreeSet<String> = graph.keys().cloned().collect();
        for edges in graph.values_mut() {
            edges.retain(|m| modules.contains(m));
        }
        for module in &modules {
            if let Some(cycle) = cycle_through(&graph, module) {
                cycles.push(format!("{}: {}", src.display(), cycle.join(" -> ")));
            }
        }
    }
    assert!(cycles.is_empty(), "module import cycles: {cycles:#?}");
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The readers above, on known text, so that a silent reader cannot pass the checks.
    let text = "//! see crate::docs\nuse crate::a::X;\nuse crate::{b, c::D,\n    e};\nfn f() { crate::g::h(); }\n#[cfg(test)]\nuse crate::t;";
    let found: Vec<String> = imported_modules(text).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "e", "g"]);
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nproviso-json.workspace = true\nserde = \"1\"\n[dev-dependencies]\nproviso-cli.workspace = true\n";
    assert_eq!(normal_dependencies(manifest), ["proviso-json"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into_iter()
    .collect();
    assert_eq!(cycle_through(&graph, "a").unwrap(), ["a", "b", "a"]);
    assert!(cycle_through(&graph, "c").is_none());
}
