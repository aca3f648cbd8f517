//! `--set key=value`: edits a scenario's text at a dotted path before it is parsed, keeping the
//! rest of the file (and so the line and column of every untouched value) as it was.

use std::fmt;

/// One override: a dotted path into the scenario's tables and a value in TOML syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub path: String,
    pub value: String,
}

impl Override {
    /// Parses `key=value` as given on the command line.
    pub fn parse(text: &str) -> Result<Override, OverrideError> {
        let (path, value) = text.split_once('=').ok_or_else(|| OverrideError {
            message: format!(
                "--set expects key=value (e.g. env.TORCH_NCCL_BLOCKING_WAIT=1), found {text:?}"
            ),
        })?;
        let path = path.trim();
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(OverrideError {
                message: format!("--set: {path:?} is not a dotted key such as tensors.buf"),
            });
        }
        Ok(Override {
            path: path.to_string(),
            value: value.trim().to_string(),
        })
    }
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.path, self.value)
    }
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

/// Reads a command-line value: TOML syntax when it parses as TOML (`1`, `true`, `"x"`,
/// `[1, 2]`), a plain string otherwise (`25MiB`). Where the file already holds a string at that
/// key, a value that is not a string is taken as its text (`torch=2.12`).
fn value_for(existing: Option<&toml_edit::Item>, text: &str) -> toml_edit::Value {
    let existing_is_string = existing
        .and_then(toml_edit::Item::as_value)
        .is_some_and(toml_edit::Value::is_str);
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

fn set_one(root: &mut toml_edit::Table, item: &Override) -> Result<(), OverrideError> {
    let keys: Vec<&str> = item.path.split('.').collect();
    let (last, tables) = keys.split_last().expect("paths have a key");
    let not_a_table = |key: &str| {
        OverrideError {
        message: format!(
            "--set {item}: {key:?} is not a table in this scenario, so {:?} cannot be set inside it",
            item.path
        ),
    }
    };
    let mut table = root;
    for (depth, key) in tables.iter().enumerate() {
        let entry = table
            .entry(key)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        if let Some(inline) = entry.as_inline_table_mut() {
            // `side = { priority = "normal" }`: the rest of the path must end inside it.
            if depth + 1 != tables.len() {
                return Err(not_a_table(tables[depth + 1]));
            }
            let existing = inline.get(last).map(|v| toml_edit::Item::Value(v.clone()));
            inline.insert(*last, value_for(existing.as_ref(), &item.value));
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
    let value = value_for(table.get(last), &item.value);
    table.insert(last, toml_edit::Item::Value(value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, pairs: &[&str]) -> Result<String, OverrideError> {
        let overrides: Vec<Override> = pairs.iter().map(|p| Override::parse(p).unwrap()).collect();
        apply_overrides(text, &overrides)
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
}
