//! The module graph has no circles: within each crate, a module (a top-level file or folder of
//! `src/`) that names another through `crate::…` must not be named back, directly or through
//! others. Comments and `#[cfg(test)]` code (a `tests.rs` declared `#[cfg(test)] mod tests;`
//! included) are left out; a `use super::…` stays inside its module. ARCHITECTURE.md states the direction the dependencies run in.
//!
//! ARCHITECTURE.md stays true to the tree: its diagram names every subcommand, its code map
//! names every source file and no path that does not exist, and every name of code it gives in
//! backticks (`Blocked::Watchdog`, `wait_raised`) is still in the sources.
//!
//! A source file's size note (`About N lines`) stays within a tenth of its length.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The files under `dir` (a missing folder holds none) whose extension is one of `extensions`.
fn source_files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, extensions, out);
        } else if path
            .extension()
            .is_some_and(|e| extensions.iter().any(|wanted| e == *wanted))
        {
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
    source_files(src, &["rs"], &mut files);
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

/// The source files a reader looks up in the code map: the crates' Rust files (sources, tests,
/// examples), the end-to-end tests and the Python package with its script, relative to the
/// repository's root. Measured data (`tests/data`), the Python tests (`python/tests/`, one row)
/// and the fuzzing workspace (`fuzz/`, one row) are left out.
fn mapped_sources(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in [
        "sim/src",
        "sim/tests",
        "hw/src",
        "hw/tests",
        "hw/examples",
        "hw/scripts",
        "analysis/src",
        "analysis/tests",
        "src",
        "tests",
        "python/c10dsim",
    ] {
        source_files(&root.join(dir), &["rs", "py"], &mut files);
    }
    files
        .iter()
        .map(|file| file.strip_prefix(root).unwrap())
        .filter(|file| !file.starts_with("tests/data"))
        .map(|file| file.to_string_lossy().into_owned())
        .collect()
}

/// The rows of ARCHITECTURE.md's code map: the names in backticks of the first cell, and of the
/// whole row.
fn code_map_rows(architecture: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let section = architecture
        .split("\n## Code map")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a `## Code map` section");
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|row| {
            (
                quoted(row.split('|').nth(1).unwrap_or_default()),
                quoted(row),
            )
        })
        .collect()
}

/// A row's name for a path: its first cell's paths themselves, and the names of the row read
/// from where each of them stands (`calibrate/fit.rs` in the row of `analysis/src/calibrate.rs`,
/// `watchdog.rs` in that of `sim/src/engine/failure/`); a folder's `mod.rs` or `__init__.py` is
/// the folder's own row.
fn paths_named(first: &[String], row: &[String]) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for entry in first {
        named.insert(entry.clone());
        let base = if entry.ends_with('/') {
            named.insert(format!("{entry}mod.rs"));
            named.insert(format!("{entry}__init__.py"));
            entry.clone()
        } else {
            entry
                .rsplit_once('/')
                .map(|(dir, _)| format!("{dir}/"))
                .unwrap_or_default()
        };
        for name in row {
            named.insert(format!("{base}{name}"));
        }
    }
    named
}

#[test]
fn the_code_map_names_every_source_file_and_no_missing_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rows = code_map_rows(&architecture);
    let named: BTreeSet<String> = rows
        .iter()
        .flat_map(|(first, row)| paths_named(first, row))
        .collect();
    let unnamed: Vec<String> = mapped_sources(root)
        .into_iter()
        .filter(|file| !named.contains(file))
        .collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's code map does not name these files (add each to a row, or name it in \
         the row of its folder or of the file it belongs to): {unnamed:?}"
    );
    let missing: Vec<&String> = rows
        .iter()
        .flat_map(|(first, _)| first)
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map lists paths that do not exist: {missing:?}"
    );
}

#[test]
fn a_row_names_the_files_of_its_folder_and_beside_its_file() {
    let architecture = "# A\n\n## Code map\n\n| path | what |\n|---|---|\n\
        | `a/calibrate.rs` | the fit in `calibrate/fit.rs` |\n\
        | `a/failure/` | `watchdog.rs`, the watchdog |\n\n## Next\n\n| `b/c.rs` | not in the map |\n";
    let named: BTreeSet<String> = code_map_rows(architecture)
        .iter()
        .flat_map(|(first, row)| paths_named(first, row))
        .collect();
    for path in [
        "a/calibrate.rs",
        "a/calibrate/fit.rs",
        "a/failure/mod.rs",
        "a/failure/watchdog.rs",
    ] {
        assert!(named.contains(path), "{path}: {named:?}");
    }
    assert!(!named.contains("b/c.rs"));
    assert!(!named.contains("a/failure/heartbeat.rs"));
}

/// The names ARCHITECTURE.md gives in backticks that read as code: an identifier, or a path of
/// them (`Blocked::Watchdog`, `pg::work_text`), a call's parentheses dropped.
fn code_names(architecture: &str) -> BTreeSet<String> {
    let is_identifier = |part: &str| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    architecture
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| name.split_once('(').map_or(name, |(head, _)| head))
        .filter(|name| name.split("::").all(is_identifier))
        .map(str::to_string)
        .collect()
}

/// Every word of the crates' Rust sources and the Python package (this file's own examples left
/// out).
fn source_words(root: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in ["sim", "hw", "analysis", "src", "tests", "python"] {
        source_files(&root.join(dir), &["rs", "py"], &mut files);
    }
    files
        .iter()
        .filter(|file| !file.starts_with(root.join("tests/data")))
        .filter(|file| !file.ends_with("tests/architecture.rs"))
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|word| !word.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_code_name_the_architecture_gives_is_in_the_sources() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let words = source_words(root);
    let renamed: Vec<String> = code_names(&architecture)
        .into_iter()
        .filter(|name| !name.split("::").all(|part| words.contains(part)))
        .collect();
    assert!(
        renamed.is_empty(),
        "ARCHITECTURE.md names code that no source holds (renamed or removed?): {renamed:?}"
    );
}

#[test]
fn code_names_are_identifiers_and_paths() {
    let names = code_names("`Blocked::Watchdog`, `wait_raised`, `sim/src/pg/`, `a b`, `f(x)`");
    let expected: BTreeSet<String> = ["Blocked::Watchdog", "wait_raised", "f"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(names, expected);
}

/// The `.rs` files a crate's overview (the `//!` lines of its root) names, as written.
fn files_named_in_overview(root_file: &str) -> Vec<String> {
    root_file
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .flat_map(|line| line.split(|c: char| !(c.is_ascii_alphanumeric() || "_/.".contains(c))))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.ends_with(".rs") && word.len() > ".rs".len())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_file_a_crate_overview_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for (crate_root, src) in [
        ("sim/src/lib.rs", "sim/src"),
        ("hw/src/lib.rs", "hw/src"),
        ("analysis/src/lib.rs", "analysis/src"),
        ("src/main.rs", "src"),
    ] {
        let text = std::fs::read_to_string(root.join(crate_root)).unwrap();
        for file in files_named_in_overview(&text) {
            if !root.join(src).join(&file).is_file() {
                missing.push(format!("{crate_root}: {file}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "crate overviews name files their crate does not have: {missing:?}"
    );
}

#[test]
fn an_overview_names_the_files_in_its_doc_lines() {
    let text = "//! the executor (`exec.rs`), books in memory.rs.\nuse x; // not.rs\n//! a .rs\n";
    assert_eq!(files_named_in_overview(text), ["exec.rs", "memory.rs"]);
}

/// The length a file's opening lines give it (`About 1,320 lines`, `Over 1,000 lines (about
/// 1,200)`, `Just over 800 lines`): the first `about` number, else the first `over` one.
fn size_note(text: &str) -> Option<usize> {
    let head = text.lines().take(40).collect::<Vec<_>>().join("\n");
    let numbers_after = |word: &'static str| {
        let head = &head;
        head.match_indices(word).filter_map(move |(at, _)| {
            let rest = &head[at + word.len()..];
            let digits: String = (rest.chars())
                .take_while(|c| c.is_ascii_digit() || *c == ',')
                .collect();
            let digits = digits.trim_end_matches(',');
            let after = &rest[digits.len()..];
            let number: String = digits.chars().filter(char::is_ascii_digit).collect();
            let noted = after.starts_with(" lines") || after.starts_with([')', ';', ',']);
            (noted && !number.is_empty()).then(|| number.parse().unwrap())
        })
    };
    (numbers_after("bout ").next()).or_else(|| numbers_after("ver ").next())
}

/// A source file over 800 lines says so in its opening lines, with its length and why it is one
/// piece; the length it gives stays within a tenth of the file's (several were 11-21% short).
#[test]
fn size_notes_are_within_a_tenth_of_the_length() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "sim", "hw", "analysis", "tests", "python", "fuzz"] {
        source_files(&root.join(dir), &["rs", "py"], &mut files);
    }
    let (mut notes, mut off) = (0, Vec::new());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().count();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        let Some(noted) = size_note(&text) else {
            if lines > 800 {
                off.push(format!("{shown}: has {lines} lines and no size note"));
            }
            continue;
        };
        notes += 1;
        if noted >= 800 && lines.abs_diff(noted) * 10 > noted {
            off.push(format!("{shown}: says about {noted} lines, has {lines}"));
        }
    }
    assert!(
        notes >= 30,
        "only {notes} size notes found: the reading of them broke"
    );
    assert!(
        off.is_empty(),
        "size notes missing or off by over a tenth:\n{}",
        off.join("\n")
    );
}
