//! The documentation stands alone: a clone with nothing beside it can follow every citation
//! (`cargo test --test docs`).
//!
//! - no tracked Markdown, Rust, TOML or Python file points into the folder that sits beside the
//!   repository on the developers' machines;
//! - every rule `R<n>` (1 ≤ n ≤ 31) cited anywhere has its entry in `docs/semantics.md`, with the
//!   heading `### R<n> — …` and the anchor `#r<n>`, and every rule R1…R31 is there, in order;
//! - relative links in the Markdown files point at files that exist, and their `#fragment`s at
//!   anchors that exist; so do the `file.md#fragment`s written outside a link, in any Markdown,
//!   Rust, TOML or Python file (`docs/semantics.md#r12` in a comment).
//! - every `--flag` of a `c10dsim …` command README.md and docs/*.md show is in that command's
//!   `--help`, and every `scenarios/`, `profiles/`, `docs/` or `tests/data/` file they name
//!   exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

const RULES: u32 = 31;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's files, relative to its root: the tracked ones and the new ones git does not
/// ignore (`git ls-files --cached --others --exclude-standard`), so that a file is checked before
/// it is committed; without git, a walk of the tree that skips build output and hidden folders.
/// Files listed but deleted in the work tree are left out.
fn repo_files() -> Vec<PathBuf> {
    let root = root();
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|output| output.status.success() && !output.stdout.is_empty());
    let mut files: Vec<PathBuf> = match listed {
        Some(output) => output
            .stdout
            .split(|&b| b == 0)
            .filter(|name| !name.is_empty())
            .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
            .collect(),
        None => {
            let mut found = Vec::new();
            walk(&root, Path::new(""), &mut found);
            found
        }
    };
    files.retain(|file| root.join(file).is_file());
    files.sort();
    files
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !name.starts_with('.') && name != "target" {
                walk(root, &path, found);
            }
        } else if kind.is_file() {
            found.push(path);
        }
    }
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.contains(&e))
}

fn read(path: &Path) -> String {
    let bytes =
        std::fs::read(root().join(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Source and documentation files: the ones whose citations a reader follows.
fn cited_files() -> Vec<PathBuf> {
    repo_files()
        .into_iter()
        .filter(|f| has_extension(f, &["md", "rs", "toml", "py"]))
        .collect()
}

#[test]
fn no_reference_outside_the_repository() {
    // Spelled in two pieces so that this file does not match itself.
    let outside = concat!("..", "/shared");
    let mut hits = Vec::new();
    for file in cited_files() {
        for (number, line) in read(&file).lines().enumerate() {
            if line.contains(outside) {
                hits.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "these lines point outside the repository (a clone does not have {outside}); cite \
         docs/semantics.md or another file of the repository instead:\n{}",
        hits.join("\n")
    );
}

/// The rule numbers cited in `text` as `R12`, `R10a` (a step of a rule), `R26–R29` (both ends
/// count), with the line of each.
fn rule_citations(text: &str) -> Vec<(u32, usize)> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let starts = chars[i] == 'R' && (i == 0 || !word(chars[i - 1]));
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            if starts && j > i + 1 {
                let ends = match chars.get(j) {
                    None => true,
                    Some(&c) if !word(c) => true,
                    // A step of a rule: R10a … R10f.
                    Some(&c) => {
                        ('a'..='f').contains(&c) && chars.get(j + 1).is_none_or(|&d| !word(d))
                    }
                };
                if ends {
                    let digits: String = chars[i + 1..j].iter().collect();
                    if let Ok(n) = digits.parse::<u32>() {
                        found.push((n, number + 1));
                    }
                }
            }
            i = j.max(i + 1);
        }
    }
    found
}

#[test]
fn every_cited_rule_is_explained() {
    let semantics = read(Path::new("docs/semantics.md"));
    let headings: Vec<u32> = semantics
        .lines()
        .filter_map(|line| line.strip_prefix("### R"))
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if rest[digits.len()..].starts_with(" — ") {
                digits.parse().ok()
            } else {
                None
            }
        })
        .collect();
    let expected: Vec<u32> = (1..=RULES).collect();
    assert_eq!(
        headings, expected,
        "docs/semantics.md must have one heading `### R<n> — …` per rule, R1…R{RULES} in order"
    );
    let anchors = anchors(&semantics);
    for n in 1..=RULES {
        assert!(
            anchors.contains(&format!("r{n}")),
            "docs/semantics.md has no anchor `r{n}` (`<a id=\"r{n}\"></a>` before its heading), \
             so links to docs/semantics.md#r{n} do not land"
        );
    }

    let mut missing = Vec::new();
    let mut cited = BTreeSet::new();
    for file in cited_files() {
        for (n, line) in rule_citations(&read(&file)) {
            if (1..=RULES).contains(&n) {
                cited.insert(n);
                if !headings.contains(&n) {
                    missing.push(format!("{}:{line}: R{n}", file.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "rules cited without an entry in docs/semantics.md:\n{}",
        missing.join("\n")
    );
    // The scan itself works: the code and docs cite most rules.
    assert!(
        cited.len() >= 20,
        "only {cited:?} found cited; is the scan broken?"
    );
}

#[test]
fn rule_citations_are_recognised() {
    let cited: Vec<u32> = rule_citations("R12, R10a; (R26–R29) R2D2 XR5 R_1 R31x `R3`")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(cited, [12, 10, 26, 29, 3]);
}

/// The text of rule `R<n>`'s entry in `semantics` (docs/semantics.md): from its heading to the
/// next heading of its level or above.
fn rule_entry(semantics: &str, n: u32) -> &str {
    let heading = format!("\n### R{n} — ");
    let start = semantics
        .find(&heading)
        .map_or(semantics.len(), |at| at + 1);
    let rest = &semantics[start..];
    let end = ["\n### ", "\n## "]
        .iter()
        .filter_map(|next| rest.find(next))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

/// Every `[env]` variable whose help (`c10dsim help env`, `Env::KNOWN`) cites rules is named in
/// one of those rules' entries: a reader sent to the rule finds the variable explained there.
/// Until 2026-12-07 `TORCH_NCCL_NONBLOCKING_TIMEOUT` cited R8, which never named it.
#[test]
fn every_env_variable_is_explained_by_a_rule_its_help_cites() {
    let semantics = read(Path::new("docs/semantics.md"));
    let mut unexplained = Vec::new();
    for (name, help) in sim::scenario::Env::KNOWN {
        let rules: Vec<u32> = rule_citations(help).into_iter().map(|(n, _)| n).collect();
        if !rules.is_empty()
            && !rules
                .iter()
                .any(|&n| rule_entry(&semantics, n).contains(name))
        {
            unexplained.push(format!("{name} (cites {rules:?})"));
        }
    }
    assert!(
        unexplained.is_empty(),
        "variables whose cited rules in docs/semantics.md never name them:\n{}",
        unexplained.join("\n")
    );
}

/// Lines of Markdown outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((number + 1, line));
        }
    }
    lines
}

/// `[text](target)` → `text`, as a heading's anchor is made from its rendered text.
fn strip_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let Some(close) = rest[at + 2..].find(')') else {
            break;
        };
        out.push_str(&rest[..at + 1]);
        rest = &rest[at + 2 + close + 1..];
    }
    out.push_str(rest);
    out.replace(['[', ']'], "")
}

/// The anchors of a Markdown file: explicit `id="…"` / `name="…"`, and GitHub's slugs of its
/// headings (lower case; letters, digits, `-` and `_` kept, spaces to `-`, the rest dropped;
/// repeats numbered `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (_, line) in prose_lines(text) {
        for attribute in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attribute) {
                rest = &rest[at + attribute.len()..];
                if let Some(end) = rest.find('"') {
                    anchors.insert(rest[..end].to_string());
                }
            }
        }
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            let slug: String = strip_links(trimmed[level..].trim())
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect();
            let count = seen.entry(slug.clone()).or_insert(0);
            anchors.insert(if *count == 0 {
                slug.clone()
            } else {
                format!("{slug}-{count}")
            });
            *count += 1;
        }
    }
    anchors
}

/// The link targets of a Markdown file, with their lines: inline `[text](target "title")` and
/// reference definitions `[label]: target`.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    for (number, line) in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(close) = rest.find(')') else { break };
            targets.push((number, rest[..close].to_string()));
            rest = &rest[close + 1..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            if let Some(end) = trimmed.find("]: ") {
                targets.push((number, trimmed[end + 3..].to_string()));
            }
        }
    }
    targets
        .into_iter()
        .map(|(number, target)| {
            let target = target.trim();
            let target = target.split_once(" \"").map_or(target, |(t, _)| t);
            let target = target.trim_start_matches('<').trim_end_matches('>');
            (number, target.to_string())
        })
        .collect()
}

/// `base` joined with the relative `target`, `..` resolved lexically.
fn resolve(base: &Path, target: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for component in base.join(target).components() {
        match component {
            Component::ParentDir => {
                if !path.pop() {
                    return None; // above the repository's root
                }
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    Some(path)
}

#[test]
fn relative_links_resolve() {
    let root = root();
    let markdown: Vec<PathBuf> = repo_files()
        .into_iter()
        .filter(|f| has_extension(f, &["md"]))
        .collect();
    assert!(
        markdown.iter().any(|f| f == Path::new("README.md"))
            && markdown.iter().any(|f| f == Path::new("docs/semantics.md")),
        "README.md and docs/semantics.md are among the checked files: {markdown:?}"
    );
    let mut broken = Vec::new();
    for file in &markdown {
        let text = read(file);
        let base = file.parent().unwrap_or(Path::new(""));
        for (line, target) in link_targets(&text) {
            let external = target.contains("://") || target.starts_with("mailto:");
            if target.is_empty() || external {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let where_ = format!("{}:{line}: ({target})", file.display());
            let destination = if path.is_empty() {
                Some(file.clone())
            } else {
                resolve(base, path)
            };
            let Some(destination) = destination.filter(|d| root.join(d).exists()) else {
                broken.push(format!("{where_}: no such file in the repository"));
                continue;
            };
            if let Some(fragment) = fragment {
                let is_markdown = has_extension(&destination, &["md"]);
                if is_markdown && !anchors(&read(&destination)).contains(fragment) {
                    broken.push(format!(
                        "{where_}: {} has no anchor #{fragment}",
                        destination.display()
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken relative links:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_shipped_picture_is_one_svg_document() {
    // A picture of several panels once closed its document after the first one (browsers and
    // XML readers stop there); each SVG must have one root element, closed at its very end.
    let pictures: Vec<PathBuf> = repo_files()
        .into_iter()
        .filter(|f| has_extension(f, &["svg"]))
        .collect();
    assert!(!pictures.is_empty(), "no SVG found: the walk is broken");
    for picture in pictures {
        let text = read(&picture);
        let opened = text.matches("<svg").count();
        let closed = text.matches("</svg>").count();
        assert!(
            opened == 1 && closed == 1 && text.trim_end().ends_with("</svg>"),
            "{}: {opened} <svg> and {closed} </svg>, or text after the last",
            picture.display()
        );
    }
}

/// The user documentation: README.md and docs/*.md.
fn user_docs() -> Vec<PathBuf> {
    repo_files()
        .into_iter()
        .filter(|f| {
            has_extension(f, &["md"])
                && (f == Path::new("README.md") || f.parent() == Some(Path::new("docs")))
        })
        .collect()
}

/// The commands a page shows: each `c10dsim …` inside backticks, and each shell line of a
/// code block that runs `c10dsim` (without its `# comment`), with its line number.
fn shown_commands(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let spans: Vec<&str> = if in_block {
            let code = line.split(" # ").next().unwrap_or(line);
            vec![code.split("// ").last().unwrap_or(code)]
        } else {
            line.split('`').skip(1).step_by(2).collect()
        };
        for span in spans {
            for (at, _) in span.match_indices("c10dsim ") {
                let before = span[..at].chars().last();
                if before.is_none_or(|c| c == ' ' || c == '/' || c == '(') {
                    found.push((number + 1, span[at..].replace("\\|", "|")));
                }
            }
        }
    }
    found
}

/// Every `--flag` a command shown in the docs passes to a c10dsim command is one that
/// command's `--help` lists (a renamed or removed option leaves no example behind).
#[test]
fn every_flag_the_docs_show_is_in_its_command_s_help() {
    let mut helps: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut help = |command: &str| -> Option<String> {
        helps
            .entry(command.to_string())
            .or_insert_with(|| {
                let mut args: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
                args.push("--help");
                let output = Command::new(env!("CARGO_BIN_EXE_c10dsim"))
                    .args(&args)
                    .output()
                    .expect("c10dsim runs");
                output
                    .status
                    .success()
                    .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
            })
            .clone()
    };
    let mut unknown = Vec::new();
    let mut checked = 0;
    for file in user_docs() {
        for (line, command) in shown_commands(&read(&file)) {
            // One command: up to a pipe, a `;`, `&&` or a redirection.
            let command = command
                .split(['|', ';', '>', '<', '&'])
                .next()
                .unwrap_or_default();
            // A word ending in a comma ends the command (`bench --ranks 8, run --summary`).
            let mut words: Vec<&str> = command.split_whitespace().skip(1).collect();
            if let Some(end) = words.iter().position(|w| w.ends_with(',')) {
                words.truncate(end);
            }
            let flag = |w: &str| w.starts_with("--") && w.len() > 2;
            let name_words = match words.first() {
                Some(&"import") => 2,
                Some(w) if w.starts_with('-') => 0,
                Some(_) => 1,
                None => continue,
            };
            if !words.iter().any(|w| flag(w)) || words.len() < name_words {
                continue;
            }
            let name = words[..name_words].join(" ");
            let Some(text) = help(&name) else {
                unknown.push(format!(
                    "{}:{line}: `c10dsim {name}` is not a command",
                    file.display()
                ));
                continue;
            };
            for word in words.iter().filter(|w| flag(w)) {
                let option: String = word
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                let listed = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
                if !listed.clone().any(|w| w == option) {
                    unknown.push(format!(
                        "{}:{line}: {option} is not an option of `c10dsim {name}`",
                        file.display()
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} flags found in the docs' commands"
    );
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}

/// Every scenario, profile, test data or docs file a page names in backticks or in a command
/// (`scenarios/straggler.toml`, `tests/data/hw/x2/exp_b_stream_scope.2ranks.json`) exists.
#[test]
fn every_repository_file_the_docs_name_exists() {
    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in user_docs() {
        let text = read(&file);
        for (number, line) in text.lines().enumerate() {
            for word in line.split(|c: char| c.is_whitespace() || "`()[]'\",=;".contains(c)) {
                let word = word.trim_end_matches(['.', ':']);
                let named = ["scenarios/", "profiles/", "docs/", "tests/data/"]
                    .iter()
                    .any(|folder| word.starts_with(folder));
                let extension = [".toml", ".json", ".csv", ".svg", ".md", ".sbatch", ".yaml"]
                    .iter()
                    .any(|e| word.ends_with(e));
                if !named || !extension || word.contains(['*', '<', '{', '…']) {
                    continue;
                }
                checked += 1;
                if !root.join(word).is_file() {
                    missing.push(format!("{}:{}: {word}", file.display(), number + 1));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} file names found in the docs");
    assert!(
        missing.is_empty(),
        "these files named in the docs do not exist:\n{}",
        missing.join("\n")
    );
}

/// The `file.md#fragment` references a text writes outside a Markdown link (in prose, in
/// backticks, in code comments: `docs/fidelity.md#memory-runs`), with their lines.
fn plain_anchor_references(text: &str) -> Vec<(usize, String, String)> {
    let mut references = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut searched = 0;
        while let Some(at) = line[searched..].find(".md#").map(|at| searched + at) {
            searched = at + ".md#".len();
            let path_start = line[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-./".contains(c)))
                .map_or(0, |before| before + 1);
            let fragment: String = line[searched..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            let in_link = line[..path_start].ends_with("](");
            if path_start < at && !fragment.is_empty() && !in_link {
                let path = &line[path_start..at + ".md".len()];
                references.push((number + 1, path.to_string(), fragment));
            }
        }
    }
    references
}

#[test]
fn plain_anchor_references_are_found_outside_links() {
    let text = "see docs/scale.md#folding and `fidelity.md#memory-runs`;\n\
                [a](docs/x.md#linked) is a link, README.md# has none\n";
    assert_eq!(
        plain_anchor_references(text),
        [
            (1, "docs/scale.md".to_string(), "folding".to_string()),
            (1, "fidelity.md".to_string(), "memory-runs".to_string()),
        ]
    );
}

/// Links are checked by `relative_links_resolve`; this checks the anchors named in plain text,
/// in every Markdown, Rust, TOML and Python file: the file is found beside the one that names
/// it, at the repository's root or in docs/, and has the anchor.
#[test]
fn every_anchor_named_outside_a_link_exists() {
    let root = root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in cited_files() {
        if file.starts_with("tests/data") || file == Path::new("tests/docs.rs") {
            continue;
        }
        let base = file.parent().unwrap_or(Path::new(""));
        for (line, path, fragment) in plain_anchor_references(&read(&file)) {
            let destination = [
                resolve(base, &path),
                Some(PathBuf::from(&path)),
                Some(Path::new("docs").join(&path)),
            ]
            .into_iter()
            .flatten()
            .find(|candidate| root.join(candidate).is_file());
            let where_ = format!("{}:{line}: {path}#{fragment}", file.display());
            checked += 1;
            match destination {
                None => broken.push(format!("{where_}: no such file")),
                Some(destination) if !anchors(&read(&destination)).contains(&fragment) => broken
                    .push(format!(
                        "{where_}: {} has no such anchor",
                        destination.display()
                    )),
                Some(_) => {}
            }
        }
    }
    assert!(checked > 20, "only {checked} anchors named in plain text");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
