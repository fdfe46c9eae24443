//! The gateway builds without llama.cpp: nothing in its dependency graph links it, so a
//! remote-only deployment needs neither cmake nor libclang.

#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn the_gateway_does_not_depend_on_llama_cpp() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "proviso-gateway",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("proviso-judge"), "{tree}");
    for linked in [
        "llama-cpp-2",
        "llama-cpp-sys-2",
        "proviso-llama",
        "bindgen",
        "cmake",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(&format!("{linked} "))),
            "the gateway depends on {linked}:\n{tree}"
        );
    }
}
