//! The declared minimum Rust version is checked, not asserted: `rust-version` in
//! `[workspace.package]` is inherited by every crate of the workspace, is the version the README
//! states, and is at least every locked dependency's own `rust-version` (and the version its
//! edition needs), as `cargo metadata` reports them. The machines have one toolchain, so an
//! older compiler cannot be tried; this is the check that can be made.

use std::process::Command;

/// A `1.88` or `1.88.0` version as (major, minor, patch).
fn version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.split('.').map(|part| {
        part.parse::<u32>()
            .unwrap_or_else(|_| panic!("{text:?} is not a Rust version"))
    });
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    (major, minor, patch)
}

/// The compiler an edition needs at least.
fn edition_needs(edition: &str) -> &'static str {
    match edition {
        "2015" => "1.0",
        "2018" => "1.31",
        "2021" => "1.56",
        "2024" => "1.85",
        other => panic!("an edition this test does not know: {other}"),
    }
}

#[test]
fn the_declared_rust_version_covers_every_locked_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let declared = env!("CARGO_PKG_RUST_VERSION");
    assert!(
        !declared.is_empty(),
        "the root crate declares no rust-version"
    );
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    let mut too_new = Vec::new();
    let mut checked = 0;
    let mut highest = ((0, 0, 0), String::new());
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let id = package["id"].as_str().unwrap();
        let rust_version = package["rust_version"].as_str();
        if members.contains(&id) {
            assert_eq!(
                rust_version,
                Some(declared),
                "{name} must inherit rust-version from [workspace.package]"
            );
            continue;
        }
        let edition = edition_needs(package["edition"].as_str().unwrap());
        for (needs, why) in [(rust_version, "rust-version"), (Some(edition), "edition")] {
            if let Some(needs) = needs {
                checked += 1;
                if version(needs) > highest.0 {
                    highest = (version(needs), format!("{name} ({why} {needs})"));
                }
                if version(needs) > version(declared) {
                    too_new.push(format!(
                        "{name} {} needs Rust {needs} ({why})",
                        package["version"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} requirements seen");
    assert!(
        too_new.is_empty(),
        "the workspace declares rust-version {declared}, but: {}",
        too_new.join("; ")
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let stated = format!("Rust ({declared} or newer");
    assert!(readme.contains(&stated), "README.md must say {stated:?}");
}
