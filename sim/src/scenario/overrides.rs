//! `--set key=value`: edits a scenario's text at a dotted path before it is parsed, keeping the
//! rest of the file (and so the line and column of every untouched value) as it was.
//!
//! About 890 lines, a third of them unit tests: the dotted-path reader, the text edit, the
//! invocation as a Timeline records it (`--seed`, `--machine`, the `--set`s) and its reading
//! back share one path grammar, kept in one file so that the writer and the readers cannot
//! drift apart.

use std::fmt;

/// One override: a dotted path into the scenario's tables and a value in TOML syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub path: String,
    pub value: String,
}

impl Override {
    /// Parses `key=value` as given on the command line. The key is a dotted path read as TOML
    /// reads a dotted key ([`path_keys`]); it is kept written as [`dotted_path`] writes it, so
    /// that one key has one spelling (`tensors."x"` is `tensors.x`).
    pub fn parse(text: &str) -> Result<Override, OverrideError> {
        let expects_key_value = || OverrideError {
            message: format!(
                "--set expects key=value (e.g. env.TORCH_NCCL_BLOCKING_WAIT=1), found {text:?}"
            ),
        };
        let (keys, rest) = read_keys(text).map_err(|error| OverrideError {
            message: format!(
                "--set {text}:1:{}: error: {:?} is not a dotted key such as tensors.buf or \
                 tensors.\"a.b\": {}",
                text[..error.at].chars().count() + 1,
                text.split_once('=').map_or(text, |(path, _)| path).trim(),
                error.reason
            ),
        })?;
        let value = rest.strip_prefix('=').ok_or_else(expects_key_value)?;
        Ok(Override {
            path: dotted_path(&keys),
            value: value.trim().to_string(),
        })
    }

    /// The keys of [`Override::path`].
    pub fn keys(&self) -> Result<Vec<String>, OverrideError> {
        path_keys(&self.path).map_err(|reason| OverrideError {
            message: format!(
                "--set {self}: {:?} is not a dotted key: {reason}",
                self.path
            ),
        })
    }
}

/// The scenario key that names a machine profile (docs/diff.md): read before the file's
/// points are made, so never a sweep axis, and `--machine`'s `--set` form.
pub const MACHINE_KEY: &str = "machine";

/// The keys of a dotted path (`--set`'s key, a `[sweep]` axis), read as TOML reads a dotted
/// key: `tensors.buf` is two keys, and a quoted key may hold dots (`tensors."a.b"`, or
/// `tensors.'a.b'`, names the tensor `a.b`). A bare key holds A-Za-z0-9_- only; spaces around
/// a key are left out.
pub fn path_keys(path: &str) -> Result<Vec<String>, String> {
    match read_keys(path).map_err(|error| error.reason)? {
        (keys, "") => Ok(keys),
        (_, rest) => Err(format!("{rest:?} follows the last key")),
    }
}

/// Whether `c` may be in a bare TOML key.
fn is_bare_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A path's keys written back as a dotted path: bare where a key can be — a TOML bare key,
/// `A-Za-z0-9_-` alone — quoted otherwise (`tensors."a.b"`, `tensors."a b"`). [`path_keys`]
/// reads it back to the same keys.
pub fn dotted_path(keys: &[String]) -> String {
    let written: Vec<String> = keys
        .iter()
        .map(|key| {
            let bare = !key.is_empty() && key.chars().all(is_bare_key_char);
            if bare {
                return key.clone();
            }
            // A TOML basic string, on one line whatever the key holds.
            let mut quoted = String::from('"');
            for c in key.chars() {
                match c {
                    '"' | '\\' => quoted.extend(['\\', c]),
                    c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
                    c => quoted.push(c),
                }
            }
            quoted.push('"');
            quoted
        })
        .collect();
    written.join(".")
}

/// Why the keys at the start of a text are not a dotted key, and the byte offset of the
/// character at fault.
struct KeyError {
    at: usize,
    reason: String,
}

/// Reads dotted keys from the start of `text`, up to its end or a `=` outside quotes: the keys
/// and the rest of the text (empty, or from that `=` on).
fn read_keys(text: &str) -> Result<(Vec<String>, &str), KeyError> {
    let at = |rest: &str| text.len() - rest.len();
    let mut keys = Vec::new();
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        let fault = |rest: &str, reason: String| KeyError {
            at: at(rest),
            reason,
        };
        let (key, after) = match trimmed.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let close = closing_quote(trimmed, quote).ok_or_else(|| {
                    fault(
                        trimmed,
                        format!("the quote that opens {trimmed:?} is never closed"),
                    )
                })?;
                let quoted = &trimmed[..=close];
                let key = quoted
                    .parse::<toml_edit::Value>()
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_string))
                    .ok_or_else(|| fault(trimmed, format!("{quoted} is not a TOML string")))?;
                (key, &trimmed[close + 1..])
            }
            _ => {
                let end = trimmed
                    .find(|c: char| !is_bare_key_char(c))
                    .unwrap_or(trimmed.len());
                let (key, after) = trimmed.split_at(end);
                let next = after.trim_start().chars().next();
                match after.chars().next() {
                    Some(c) if !matches!(next, Some('.' | '=')) => {
                        return Err(fault(
                            after,
                            format!(
                                "{c:?} cannot be in a bare key (A-Za-z0-9_-); quote a key that \
                                 holds other characters (\"a b\")"
                            ),
                        ))
                    }
                    _ if key.is_empty() => {
                        return Err(fault(trimmed, "a key is empty".to_string()))
                    }
                    _ => (key.to_string(), after),
                }
            }
        };
        keys.push(key);
        let after_spaces = after.trim_start();
        match after_spaces.strip_prefix('.') {
            Some(next) => rest = next,
            None if after_spaces.is_empty() || after_spaces.starts_with('=') => {
                return Ok((keys, after_spaces))
            }
            None => {
                return Err(fault(
                    after_spaces,
                    format!(
                        "{after_spaces:?} follows the quoted key {:?}",
                        keys[keys.len() - 1]
                    ),
                ))
            }
        }
    }
}

/// The byte offset of the quote that closes the string `text` opens with `quote` (a `"`
/// string's `\"` does not close it; a `'` string has no escapes).
fn closing_quote(text: &str, quote: char) -> Option<usize> {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quote == '"' => escaped = true,
            _ if c == quote => return Some(at),
            _ => {}
        }
    }
    None
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.path, self.value)
    }
}

/// What a run was given besides its file, as it was typed: `--seed N` (which sets `seed`, as
/// `--set seed=N` would), `--machine PROFILE` (the profile whose keys win, shown as given) and
/// the `--set`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    pub seed: Option<u64>,
    pub machine: Option<String>,
    pub overrides: Vec<Override>,
}

impl Invocation {
    /// `--seed`, `--machine` and the `--set`s. A `--set seed=` beside `--seed`, or a
    /// `--set machine=` beside `--machine`, is refused, as a key set twice is: one would win
    /// silently (or, for the machine, the two profiles would mix).
    pub fn new(
        seed: Option<u64>,
        machine: Option<String>,
        overrides: &[Override],
    ) -> Result<Invocation, OverrideError> {
        let set = |key: &str| overrides.iter().find(|o| o.path == key);
        if let (Some(seed), Some(set)) = (seed, set("seed")) {
            return Err(OverrideError {
                message: format!(
                    "--seed {seed} and --set {set} both set the seed: the last would win silently; give one"
                ),
            });
        }
        if let (Some(machine), Some(set)) = (&machine, set(MACHINE_KEY)) {
            return Err(OverrideError {
                message: format!(
                    "--machine {machine} and --set {set} both name the machine profile: the run would mix their values; give one"
                ),
            });
        }
        Ok(Invocation {
            seed,
            machine,
            overrides: overrides.to_vec(),
        })
    }

    /// The overrides the invocation applies: the `--set`s, then `seed` for `--seed`.
    pub fn applied(&self) -> Vec<Override> {
        self.overrides
            .iter()
            .cloned()
            .chain(self.seed.map(seed_override))
            .collect()
    }
}

/// `--seed N` as the override it stands for, `seed=N`.
fn seed_override(seed: u64) -> Override {
    Override {
        path: "seed".to_string(),
        value: seed.to_string(),
    }
}

/// How a scenario read with overrides names itself (`FILE [--seed N --machine P --set K=V …]`, a
/// Timeline's `scenario.path`), the arguments as they were given, so that a measured run can be
/// simulated again as it ran; the file alone without any. [`read_recorded_invocation`] reads it
/// back.
pub fn recorded_invocation(file: &str, invocation: &Invocation) -> String {
    let seed = invocation.seed.map(|seed| format!("--seed {seed}"));
    let machine = (invocation.machine.as_ref()).map(|machine| format!("--machine {machine}"));
    let sets = invocation.overrides.iter().map(|o| format!("--set {o}"));
    let arguments: Vec<String> = seed.into_iter().chain(machine).chain(sets).collect();
    if arguments.is_empty() {
        return file.to_string();
    }
    format!("{file} [{}]", arguments.join(" "))
}

/// The file and the overrides that simulate a [`recorded_invocation`] again (`--seed N` read as
/// `seed=N`, after the `--set`s, as the run applied it). A run on `--machine` is refused: its
/// profile is no override. Only the `]` that closes the list is taken off: a last value may end
/// with its own (`--set groups.world.ranks=[0, 1]`).
pub fn read_recorded_invocation(recorded: &str) -> Result<(&str, Vec<Override>), OverrideError> {
    let opening = [" [--seed ", " [--machine ", " [--set "]
        .into_iter()
        .filter_map(|opening| recorded.find(opening))
        .min();
    let Some(open) = opening else {
        return Ok((recorded, Vec::new()));
    };
    let (file, arguments) = (&recorded[..open], &recorded[open + " [".len()..]);
    let arguments = arguments.strip_suffix(']').unwrap_or(arguments);
    let (seed, sets) = match arguments.strip_prefix("--seed ") {
        Some(rest) => {
            let (seed, sets) = rest.split_once(' ').unwrap_or((rest, ""));
            let seed = seed.parse::<u64>().map_err(|_| OverrideError {
                message: format!("--seed {seed:?} is not a whole number"),
            })?;
            (Some(seed), sets)
        }
        None => (None, arguments),
    };
    if let Some(machine) = sets.strip_prefix("--machine ") {
        let machine = machine.split(" --set ").next().unwrap_or(machine);
        return Err(OverrideError {
            message: format!(
                "the run was simulated on --machine {machine}, which is not a --set: simulate it again with that flag"
            ),
        });
    }
    let mut overrides = match sets.strip_prefix("--set ") {
        Some(sets) => sets
            .split(" --set ")
            .map(Override::parse)
            .collect::<Result<Vec<_>, _>>()?,
        None if sets.is_empty() => Vec::new(),
        None => {
            return Err(OverrideError {
                message: format!("{sets:?} is not a --set"),
            })
        }
    };
    overrides.extend(seed.map(seed_override));
    Ok((file, overrides))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideError {
    pub message: String,
}

impl fmt::Display for OverrideError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OverrideError {}

/// The keys whose value is always a string, though it may look like a number (`torch = "2.12"`:
/// typed as a float it would be refused, and `2.10` would lose its 0).
pub const STRING_KEYS: [&str; 3] = ["torch", "name", "about"];

/// Reads a command-line value: TOML syntax when it parses as TOML (`1`, `true`, `"x"`,
/// `[1, 2]`), a plain string otherwise (`25MiB`). Where the file already holds a string at that
/// key, a value that is not a string is taken as its text (`torch=2.12`).
fn value_for(path: &str, existing: Option<&toml_edit::Item>, text: &str) -> toml_edit::Value {
    let existing_is_string = existing
        .and_then(toml_edit::Item::as_value)
        .is_some_and(toml_edit::Value::is_str)
        || STRING_KEYS.contains(&path);
    match text.parse::<toml_edit::Value>() {
        Ok(value) if !existing_is_string || value.is_str() => value,
        _ => toml_edit::Value::from(text.trim_matches('"')),
    }
}

/// Applies overrides to a scenario's text, in order. Paths name tables and keys
/// (`env.TORCH_NCCL_BLOCKING_WAIT`, `tensors.buf`, `cluster.ranks`, `torch`); a missing table
/// or key is created. Arrays of tables (`op`, `measure`) cannot be addressed.
pub fn apply_overrides(text: &str, overrides: &[Override]) -> Result<String, OverrideError> {
    if overrides.is_empty() {
        return Ok(text.to_string());
    }
    let mut document: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| OverrideError {
                message: format!(
                    "cannot apply --set to a file that is not valid TOML: {}",
                    e.message()
                ),
            })?;
    for item in overrides {
        set_one(document.as_table_mut(), item)?;
    }
    Ok(document.to_string())
}

/// Whether `text` is written as an integer but is past what TOML holds (a 64-bit signed
/// integer): TOML would read it as a string, and the error would speak of a string.
fn integer_out_of_range(text: &str) -> bool {
    let digits = text.trim().trim_start_matches(['+', '-']);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
        && digits.chars().any(|c| c.is_ascii_digit())
        && text.trim().replace('_', "").parse::<i64>().is_err()
}

fn set_one(root: &mut toml_edit::Table, item: &Override) -> Result<(), OverrideError> {
    if integer_out_of_range(&item.value) {
        return Err(OverrideError {
            message: format!(
                "--set {item}: {} is past the largest integer a scenario holds ({})",
                item.value,
                i64::MAX
            ),
        });
    }
    let keys = item.keys()?;
    let (last, tables) = keys.split_last().expect("paths have a key");
    let not_a_table = |key: &str| {
        OverrideError {
        message: format!(
            "--set {item}: {key:?} is not a table in this scenario, so {:?} cannot be set inside it",
            item.path
        ),
    }
    };
    refuse_undeclared(root, item, &keys)?;
    let mut table = root;
    for (depth, key) in tables.iter().enumerate() {
        let entry = table
            .entry(key)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        if let Some(inline) = entry.as_inline_table_mut() {
            // `side = { priority = "normal" }`: the rest of the path must end inside it.
            if depth + 1 != tables.len() {
                return Err(not_a_table(&tables[depth + 1]));
            }
            let existing = inline.get(last).map(|v| toml_edit::Item::Value(v.clone()));
            inline.insert(last, value_for(&item.path, existing.as_ref(), &item.value));
            return Ok(());
        }
        table = entry.as_table_mut().ok_or_else(|| not_a_table(key))?;
    }
    if matches!(
        table.get(last),
        Some(toml_edit::Item::ArrayOfTables(_) | toml_edit::Item::Table(_))
    ) {
        return Err(OverrideError {
            message: format!("--set {item}: {:?} is a table, not a value", item.path),
        });
    }
    let value = value_for(&item.path, table.get(last), &item.value);
    table.insert(last, toml_edit::Item::Value(value));
    Ok(())
}

/// Tables whose keys are names the scenario declares (a tensor, a stream, a group), with the
/// names every scenario has: a `--set` changes one of those, and any other name is a typo
/// rather than a new declaration nothing would use (`tensors.bufs` for `buf`). The world group
/// is configured under its name (`groups.world.timeout_s`) whether or not the file declares it.
const DECLARATIONS: [(&str, &str, &[&str]); 3] = [
    ("tensors", "tensor", &[]),
    ("streams", "stream", &[]),
    ("groups", "group", &["world"]),
];

fn refuse_undeclared(
    root: &toml_edit::Table,
    item: &Override,
    keys: &[String],
) -> Result<(), OverrideError> {
    let [table_name, name, ..] = keys else {
        return Ok(());
    };
    let Some(&(_, what, implicit)) = DECLARATIONS
        .iter()
        .find(|(table, ..)| *table == table_name.as_str())
    else {
        return Ok(());
    };
    let declared: Vec<&str> = (root.get(table_name))
        .and_then(toml_edit::Item::as_table_like)
        .map_or_else(Vec::new, |table| table.iter().map(|(key, _)| key).collect());
    if declared.contains(&name.as_str()) || implicit.contains(&name.as_str()) {
        return Ok(());
    }
    // `tensors.a.b` for a tensor named "a.b": the name's dots split it; quoted, it is one key.
    let rest = &keys[1..];
    let dotted = declared.iter().find(|declared| {
        let parts: Vec<&str> = declared.split('.').collect();
        parts.len() > 1 && rest.len() >= parts.len() && parts.iter().zip(rest).all(|(a, b)| a == b)
    });
    if let Some(dotted) = dotted {
        return Err(OverrideError {
            message: format!(
                "--set {item}: the scenario declares no {what} {name:?}, but one named {dotted:?}: a name with a dot is quoted, as in TOML ({table_name}.\"{dotted}\")"
            ),
        });
    }
    Err(OverrideError {
        message: format!(
            "--set {item}: the scenario declares no {what} {name:?}{}; --set changes a declared {what} (declare a new one in the file)",
            super::suggest::did_you_mean(name, declared.into_iter().chain(implicit.iter().copied()))
        ),
    })
}

/// Where a line of a text edited by [`apply_overrides`] (or any edit that keeps untouched lines
/// as they were, as toml_edit does) came from: so an error in the edited text can point at the
/// file's own line, or at the `--set` argument that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOrigin {
    /// Unchanged from the original text: its 1-based line there.
    Original(u32),
    /// Written by `overrides[index]` (its last key starts the line).
    Override(usize),
    /// Written by an edit that is not one of the overrides given (a machine profile).
    Edited,
}

/// The origin of 1-based `line` of `edited`: lines are matched to `original` by a line diff
/// (`original_lines`), and a line the edit wrote is put down to the last override whose last
/// key it sets.
pub fn line_origin(original: &str, edited: &str, overrides: &[Override], line: u32) -> LineOrigin {
    let wanted = (line as usize).saturating_sub(1);
    let Some(text) = edited.lines().nth(wanted) else {
        return LineOrigin::Edited;
    };
    if let Some(line) = original_lines(original, edited)[wanted] {
        return LineOrigin::Original(line);
    }
    if let Some(table) = table_header(text) {
        // `[bogus]`, written for `--set bogus.key=1`: the last override inside that table.
        let inside = format!("{table}.");
        return overrides
            .iter()
            .rposition(|o| o.path.starts_with(&inside))
            .map_or(LineOrigin::Edited, LineOrigin::Override);
    }
    let Ok((keys, _)) = read_keys(text) else {
        return LineOrigin::Edited;
    };
    let last_key = |path: &str| path_keys(path).ok().and_then(|mut keys| keys.pop());
    overrides
        .iter()
        .rposition(|o| last_key(&o.path).as_ref() == keys.last())
        .map_or(LineOrigin::Edited, LineOrigin::Override)
}

/// The dotted name of a table header line (`[a.b]` → `a.b`), if the line is one.
pub fn table_header(line: &str) -> Option<&str> {
    let inner = line.trim().strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.trim_matches(['[', ']']).trim())
}

/// For each line of `edited`, its 1-based line in `original` where the edit kept it (a Myers
/// line diff: the unchanged lines in order), `None` for a line the edit wrote.
fn original_lines(original: &str, edited: &str) -> Vec<Option<u32>> {
    let old: Vec<&str> = original.lines().collect();
    let new: Vec<&str> = edited.lines().collect();
    let mut origin = vec![None; new.len()];
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, &old, &new) {
        if let similar::DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for offset in 0..len {
                origin[new_index + offset] = Some((old_index + offset + 1) as u32);
            }
        }
    }
    origin
}

/// After a scenario was parsed from `edited` (`original` with `--set`s or a machine profile
/// applied): every op's line becomes its line in `original`, the file the user reads, so that a
/// report names the same lines with or without the edits.
pub fn renumber_op_lines(scenario: &mut super::Scenario, original: &str, edited: &str) {
    if original == edited {
        return;
    }
    let origin = original_lines(original, edited);
    for op in &mut scenario.ops {
        let index = (op.line as usize).wrapping_sub(1);
        if let Some(&Some(line)) = origin.get(index) {
            op.line = line;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, pairs: &[&str]) -> Result<String, OverrideError> {
        let overrides: Vec<Override> = pairs.iter().map(|p| Override::parse(p).unwrap()).collect();
        apply_overrides(text, &overrides)
    }

    #[test]
    fn a_quoted_key_names_a_tensor_whose_name_holds_a_dot() {
        let text = "[tensors]\n\"a.b\" = \"1MiB\"\nc = \"1MiB\"\n";
        for key in ["tensors.\"a.b\"", "tensors.'a.b'", " tensors . \"a.b\" "] {
            let edited = set(text, &[&format!("{key}=2MiB")]).unwrap();
            assert!(edited.contains("\"a.b\" = \"2MiB\""), "{key}: {edited}");
        }
        // One key, one spelling: a quoted key that needs no quotes is the bare one.
        let quoted = Override::parse("tensors.\"c\"=2MiB").unwrap();
        assert_eq!(quoted.path, "tensors.c");
        assert_eq!(
            Override::parse("tensors.'a.b'=2MiB").unwrap().path,
            "tensors.\"a.b\""
        );
        // A `=` inside quotes is part of the key.
        let equals = Override::parse("tensors.\"a=b\"=2MiB").unwrap();
        assert_eq!(
            (equals.keys().unwrap()[1].as_str(), equals.value.as_str()),
            ("a=b", "2MiB")
        );
        for (bad, reason) in [
            ("tensors.\"a.b=2MiB", "never closed"),
            ("tensors.\"a.b\"x=2MiB", "follows the quoted key"),
            ("tensors..x=2MiB", "a key is empty"),
        ] {
            let error = Override::parse(bad).unwrap_err().message;
            assert!(error.contains(reason), "{bad}: {error}");
        }
        // The edited line is traced to the `--set` that wrote it by its last key.
        let overrides = [Override::parse("tensors.\"a.b\"=2KB2").unwrap()];
        let edited = apply_overrides(text, &overrides).unwrap();
        assert_eq!(
            line_origin(text, &edited, &overrides, 2),
            LineOrigin::Override(0)
        );
    }

    #[test]
    fn a_path_that_is_not_a_toml_dotted_key_is_refused_at_its_character() {
        // A bare key holds A-Za-z0-9_- only, as in TOML; the error names the argument's own
        // line and column.
        for (argument, column, reason) in [
            ("perturb[0].ranks=[9]", 8, "'[' cannot be in a bare key"),
            ("cluster.x y=1", 10, "' ' cannot be in a bare key"),
            ("a,b=1", 2, "',' cannot be in a bare key"),
            ("tensors..x=2MiB", 9, "a key is empty"),
            ("tensors.\"a.b=2MiB", 9, "never closed"),
        ] {
            let error = Override::parse(argument).unwrap_err().message;
            let place = format!("--set {argument}:1:{column}: error: ");
            assert!(error.starts_with(&place), "{argument}: {error}");
            assert!(error.contains("is not a dotted key"), "{argument}: {error}");
            assert!(error.contains(reason), "{argument}: {error}");
        }
        // Quoted, such a key is one key; written back, it keeps its quotes.
        let quoted = Override::parse("'perturb[0]'.ranks=[9]").unwrap();
        assert_eq!(quoted.path, "\"perturb[0]\".ranks");
        assert_eq!(Override::parse("a-b_C9 . d=1").unwrap().path, "a-b_C9.d");
        // The table a quoted key's `--set` writes is traced to it.
        let overrides = [quoted];
        let edited = apply_overrides("repeat = 1\n", &overrides).unwrap();
        let header = edited.lines().position(|l| l.starts_with('[')).unwrap() as u32 + 1;
        assert_eq!(
            line_origin("repeat = 1\n", &edited, &overrides, header),
            LineOrigin::Override(0),
            "{edited}"
        );
    }

    #[test]
    fn dotted_paths_read_back_to_their_keys() {
        for keys in [
            vec!["tensors", "buf"],
            vec!["tensors", "a.b"],
            vec!["op", "it's \"x\"", "async_op"],
            vec!["env", " padded "],
            vec!["a=b", "c#d"],
            vec!["tab\there", "back\\slash"],
            vec!["tensors", "a,b"],
            vec!["tensors", "a b"],
            vec!["tensors", "é"],
        ] {
            let keys: Vec<String> = keys.into_iter().map(str::to_string).collect();
            assert_eq!(path_keys(&dotted_path(&keys)).unwrap(), keys);
        }
    }

    #[test]
    fn an_integer_past_i64_is_refused_as_such() {
        let text = "repeat = 2\n";
        let error = set(text, &["repeat=9223372036854775808"]).unwrap_err();
        assert_eq!(
            error.message,
            "--set repeat=9223372036854775808: 9223372036854775808 is past the largest integer \
             a scenario holds (9223372036854775807)"
        );
        assert!(set(text, &["repeat=9_223_372_036_854_775_807"]).is_ok());
        assert!(set(text, &["repeat=-9223372036854775808"]).is_ok());
        assert!(set(text, &["name=2026-12-06"]).is_ok());
    }

    #[test]
    fn a_scenario_without_a_name_is_named_by_its_file_not_by_its_edits() {
        let text = "[cluster]\nranks = 1\n[[op]]\nmark = \"a\"\n";
        let name = |path: &str| crate::scenario::parse(path, text).unwrap().name;
        assert_eq!(name("dir/q.toml"), "q");
        // The dot and the slash of the edits are not the file's ("q.toml [--set network" before).
        assert_eq!(name("dir/q.toml [--set network.alpha_us=200]"), "q");
        assert_eq!(name("q.toml [--set op.g.gemm=[1,2,3] --set x=a/b.c]"), "q");
        assert_eq!(name("q.toml [point 3: tensors.x=1MiB]"), "q");
    }

    #[test]
    fn a_recorded_invocation_reads_back_with_a_last_value_ending_in_a_bracket() {
        let overrides: Vec<Override> = ["cluster.ranks=2", "groups.world.ranks=[0, 1]"]
            .iter()
            .map(|text| Override::parse(text).unwrap())
            .collect();
        let invocation = Invocation::new(None, None, &overrides).unwrap();
        let recorded = recorded_invocation("s.toml", &invocation);
        assert_eq!(
            recorded,
            "s.toml [--set cluster.ranks=2 --set groups.world.ranks=[0, 1]]"
        );
        assert_eq!(
            read_recorded_invocation(&recorded).unwrap(),
            ("s.toml", overrides.clone())
        );
        // `--seed` is recorded as typed, and read back as the `seed=N` it applied.
        let seeded = Invocation::new(Some(5), None, &overrides).unwrap();
        let recorded = recorded_invocation("s.toml", &seeded);
        assert_eq!(
            recorded,
            "s.toml [--seed 5 --set cluster.ranks=2 --set groups.world.ranks=[0, 1]]"
        );
        assert_eq!(
            read_recorded_invocation(&recorded).unwrap(),
            ("s.toml", seeded.applied())
        );
        let alone = Invocation::new(Some(7), None, &[]).unwrap();
        assert_eq!(recorded_invocation("s.toml", &alone), "s.toml [--seed 7]");
        assert_eq!(
            read_recorded_invocation("s.toml [--seed 7]").unwrap(),
            ("s.toml", alone.applied())
        );
        let clash = Invocation::new(Some(5), None, &[Override::parse("seed=6").unwrap()]);
        assert_eq!(
            clash.unwrap_err().message,
            "--seed 5 and --set seed=6 both set the seed: the last would win silently; give one"
        );
        // `--machine` is shown as given; a profile is no override, so it does not read back.
        let machine = Some("p/h200-x4.toml".to_string());
        let on_machine = Invocation::new(Some(5), machine.clone(), &overrides[..1]).unwrap();
        let recorded = recorded_invocation("s.toml", &on_machine);
        assert_eq!(
            recorded,
            "s.toml [--seed 5 --machine p/h200-x4.toml --set cluster.ranks=2]"
        );
        let error = read_recorded_invocation(&recorded).unwrap_err().message;
        assert!(error.contains("--machine p/h200-x4.toml"), "{error}");
        let clash = Invocation::new(None, machine, &[Override::parse("machine=h200").unwrap()]);
        assert_eq!(
            clash.unwrap_err().message,
            "--machine p/h200-x4.toml and --set machine=h200 both name the machine profile: the run would mix their values; give one"
        );
        assert_eq!(
            read_recorded_invocation("s.toml").unwrap(),
            ("s.toml", Vec::new())
        );
    }

    #[test]
    fn sets_existing_and_new_keys() {
        let text =
            "torch = \"2.5\"\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 0\n[tensors]\nbuf = \"1MiB\"\n";
        let out = set(
            text,
            &[
                "env.TORCH_NCCL_BLOCKING_WAIT=1",
                "torch=2.12",
                "tensors.buf=64MiB",
                "cluster.ranks=2",
            ],
        )
        .unwrap();
        assert!(out.contains("TORCH_NCCL_BLOCKING_WAIT = 1"), "{out}");
        assert!(out.contains("torch = \"2.12\""), "{out}");
        assert!(out.contains("buf = \"64MiB\""), "{out}");
        assert!(out.contains("[cluster]\nranks = 2"), "{out}");
    }

    #[test]
    fn inline_tables_are_edited_in_place() {
        let out = set(
            "[streams]\nside = { priority = \"normal\" }\n",
            &["streams.side.priority=high"],
        )
        .unwrap();
        assert!(out.contains("priority = \"high\""), "{out}");
    }

    #[test]
    fn bad_overrides_are_explained() {
        assert!(Override::parse("novalue")
            .unwrap_err()
            .message
            .contains("key=value"));
        assert!(Override::parse("a..b=1")
            .unwrap_err()
            .message
            .contains("dotted key"));
        let err = set("torch = \"2.5\"\n", &["torch.x=1"]).unwrap_err();
        assert!(err.message.contains("is not a table"), "{}", err.message);
        let err = set("[[op]]\nwait = \"w\"\n", &["op=1"]).unwrap_err();
        assert!(err.message.contains("is a table"), "{}", err.message);
    }

    #[test]
    fn a_set_names_a_declared_tensor_stream_or_group() {
        let text =
            "[tensors]\nbuf = \"1MiB\"\n[streams]\nside = {}\n[groups.pair]\nranks = [0, 1]\n";
        let err = set(text, &["tensors.bufs=2MiB"]).unwrap_err();
        assert_eq!(
            err.message,
            "--set tensors.bufs=2MiB: the scenario declares no tensor \"bufs\"; did you mean \"buf\"?; --set changes a declared tensor (declare a new one in the file)"
        );
        let dotted = set("[tensors]\n\"a.b\" = \"1MiB\"\n", &["tensors.a.b=2MiB"]).unwrap_err();
        assert_eq!(
            dotted.message,
            "--set tensors.a.b=2MiB: the scenario declares no tensor \"a\", but one named \"a.b\": a name with a dot is quoted, as in TOML (tensors.\"a.b\")"
        );
        let err = set(text, &["streams.sid.priority=high"]).unwrap_err();
        assert!(
            err.message
                .contains("no stream \"sid\"; did you mean \"side\"?"),
            "{}",
            err.message
        );
        let err = set(text, &["groups.pairs.ranks=[0]"]).unwrap_err();
        assert!(
            err.message.contains("no group \"pairs\""),
            "{}",
            err.message
        );
        // The world group is there whether or not the file declares it.
        assert!(set(text, &["groups.world.timeout_s=60"]).is_ok());
        let err = set("[cluster]\nranks = 2\n", &["tensors.x=1MiB"]).unwrap_err();
        assert!(err.message.contains("no tensor \"x\";"), "{}", err.message);
        // Declared names are changed as before.
        let out = set(
            text,
            &[
                "tensors.buf=2MiB",
                "streams.side.priority=high",
                "groups.pair.ranks=[1]",
            ],
        )
        .unwrap();
        assert!(out.contains("buf = \"2MiB\""), "{out}");
        assert!(out.contains("priority = \"high\""), "{out}");
        assert!(out.contains("ranks = [1]"), "{out}");
    }

    #[test]
    fn edited_lines_are_traced_to_the_file_or_the_set_argument() {
        let text = "# head\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 0\n[tensors]\nbuf = \"1MiB\"\n[[op]]\nwait = \"w\"\n";
        let pairs = [
            "host.launch_us=4",
            "env.TORCH_NCCL_BLOCKING_WAIT=1",
            "cluster.ranks=2",
        ];
        let overrides: Vec<Override> = pairs.iter().map(|p| Override::parse(p).unwrap()).collect();
        let edited = apply_overrides(text, &overrides).unwrap();
        let line_of =
            |needle: &str| edited.lines().position(|l| l.starts_with(needle)).unwrap() as u32 + 1;
        let origin = |needle: &str| line_origin(text, &edited, &overrides, line_of(needle));
        assert_eq!(origin("# head"), LineOrigin::Original(1));
        assert_eq!(origin("TORCH_NCCL"), LineOrigin::Override(1), "{edited}");
        assert_eq!(origin("buf"), LineOrigin::Original(5));
        assert_eq!(origin("launch_us"), LineOrigin::Override(0));
        assert_eq!(origin("wait"), LineOrigin::Original(7));
        assert_eq!(origin("ranks"), LineOrigin::Override(2));
        assert_eq!(origin("[cluster]"), LineOrigin::Override(2));
        assert_eq!(origin("[host]"), LineOrigin::Override(0));
        assert_eq!(
            line_origin(text, &edited, &overrides, 999),
            LineOrigin::Edited
        );
    }

    #[test]
    fn ops_keep_the_files_lines_when_a_set_inserts_lines_above_them() {
        let text = "[cluster]\nranks = 2\n[env]\nTORCH_NCCL_BLOCKING_WAIT = 0\n[tensors]\nbuf = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"buf\"\n[[op]]\ngemm = [64, 64, 64]\n";
        let lines = |pairs: &[&str]| {
            let overrides: Vec<Override> =
                pairs.iter().map(|p| Override::parse(p).unwrap()).collect();
            let edited = apply_overrides(text, &overrides).unwrap();
            let mut scenario = super::super::parse("s.toml", &edited).unwrap();
            let parsed: Vec<u32> = scenario.ops.iter().map(|op| op.line).collect();
            renumber_op_lines(&mut scenario, text, &edited);
            let renumbered: Vec<u32> = scenario.ops.iter().map(|op| op.line).collect();
            (parsed, renumbered)
        };
        assert_eq!(lines(&[]), (vec![7, 10], vec![7, 10]));
        // Two keys inserted into [env] and [tensors], and a new table: the parsed lines move,
        // the renumbered ones are the file's.
        let (parsed, renumbered) = lines(&[
            "env.TORCH_NCCL_ASYNC_ERROR_HANDLING=3",
            "tensors.buf=2MiB",
            "host.launch_us=4",
        ]);
        assert_ne!(parsed, [7, 10]);
        assert_eq!(renumbered, [7, 10]);
    }
}
