//! The module graph has no circles: within each crate, a module (a top-level file or folder of
//! `src/`) that names another through `crate::…` must not be named back, directly or through
//! others. Comments and `#[cfg(test)]` code (a `tests.rs` declared `#[cfg(test)] mod tests;`
//! included) are left out; a `use super::…` stays inside its module. ARCHITECTURE.md states the direction the dependencies run in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`engine/host.rs` → `engine`); `None` for the crate
/// root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (!["lib", "main"].contains(&name.as_str())).then_some(name)
}

/// A `tests.rs` that its parent declares as `#[cfg(test)] mod tests;`: test code as a whole.
fn is_test_module_file(file: &Path) -> bool {
    if file.file_name().is_none_or(|name| name != "tests.rs") {
        return false;
    }
    let folder = file.parent().unwrap();
    let parent = [folder.join("mod.rs"), folder.with_extension("rs")];
    parent.iter().any(|path| {
        std::fs::read_to_string(path).is_ok_and(|text| text.contains("#[cfg(test)]\nmod tests;"))
    })
}

/// The modules each module names through `crate::`, outside comments and test code.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        if is_test_module_file(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let edges = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    edges.insert(name);
                }
            }
        }
    }
    graph
}

/// A circle through `start`, if there is one.
fn circle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for next in graph.get(last).into_iter().flatten() {
            if next == start {
                let mut circle = path.clone();
                circle.push(start.to_string());
                return Some(circle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

fn circles(src: &Path) -> Vec<String> {
    let graph = module_graph(src);
    graph
        .keys()
        .filter_map(|module| circle_from(&graph, module))
        .map(|circle| circle.join(" -> "))
        .collect()
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in ["sim/src", "hw/src", "analysis/src", "src"] {
        let found = circles(&root.join(src));
        assert!(found.is_empty(), "{src}: {found:?}");
    }
}

#[test]
fn a_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("c10dsim-circle-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "// crate::c is only a comment\n").unwrap();
    std::fs::write(dir.join("b/inner.rs"), "fn f() { crate::a::g() }\n").unwrap();
    std::fs::write(dir.join("c.rs"), "#[cfg(test)]\nuse crate::a::x;\n").unwrap();
    let found = circles(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, ["a -> b -> a", "b -> a -> b"]);
}

#[test]
fn the_architecture_diagram_names_every_subcommand() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_c10dsim"))
        .arg("--help")
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("Options:").next())
        .expect("--help lists commands")
        .lines()
        .filter_map(|line| line.strip_prefix("  ")?.split_whitespace().next())
        .filter(|&name| name != "help")
        .collect();
    assert!(commands.len() >= 16, "{commands:?}");
    let architecture =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let diagram = architecture
        .split("c10dsim binary (thin glue)")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the diagram's binary box");
    let named: Vec<&str> = diagram
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    for command in &commands {
        assert!(
            named.contains(command),
            "ARCHITECTURE.md's diagram lacks `{command}`"
        );
    }
    assert!(
        diagram.contains(&format!("its {} subcommands", commands.len())),
        "the diagram's count is not {}",
        commands.len()
    );
}
