//! serde's type errors in the words of a TOML file, with the form the docs give the key.
//!
//! serde names Rust types (`expected struct RawKernel`, `expected f64`, `invalid type: map`),
//! while the user wrote tables, arrays and numbers. [`explain_type_error`] rewords the message,
//! and where the value is that of an op, straggler or fault key whose form
//! docs/scenario-format.md shows (`gemm = [m, n, k]`), it appends that form.

use std::ops::Range;

/// The tables (as their headers name them) whose keys have a form worth showing, each key with
/// the form docs/scenario-format.md gives it (a test checks that the docs still show each).
const FORMS: &[(&str, &str, &str)] = &[
    ("op", "gemm", "gemm = [m, n, k]"),
    ("op", "kernel", "kernel = { us = 50, sms = 16 }"),
    (
        "op",
        "then",
        "then = { us = 15, sms = 132, stream = \"pool\" }",
    ),
    (
        "op",
        "batch_isend_irecv",
        "batch_isend_irecv = [{ send = \"a\", shift = 1 }, { recv = \"b\", shift = -1 }]",
    ),
    ("op", "ranks", "ranks = [..]"),
    ("op", "reads", "reads = [..]"),
    ("op", "writes", "writes = [..]"),
    ("perturb", "ranks", "ranks = [3]"),
    ("fault", "ranks", "ranks = [3]"),
];

/// serde's words for a Rust type, and the TOML words for what a file holds there.
const WORDS: &[(&str, &str)] = &[
    ("invalid type: map", "invalid type: table"),
    ("invalid type: sequence", "invalid type: array"),
    ("expected a sequence", "expected an array"),
    ("expected a map", "expected a table"),
    ("expected f64", "expected a number"),
    ("expected i64", "expected an integer"),
    ("expected u64", "expected an integer"),
    ("expected u32", "expected an integer"),
];

/// `message`, a parse error of `text` at `span`, in TOML's words (see the module's doc), with the
/// key's form appended when [`FORMS`] has it. Any other message comes back unchanged.
pub fn explain_type_error(message: &str, text: &str, span: Range<usize>) -> String {
    if !message.starts_with("invalid type: ") {
        return message.to_string();
    }
    let mut explained = match message.find("expected struct ") {
        Some(at) => format!("{}expected a table", &message[..at]),
        None => message.to_string(),
    };
    for (serde_words, toml_words) in WORDS {
        explained = explained.replace(serde_words, toml_words);
    }
    let form = key_before(text, span.start).and_then(|(table, key)| {
        FORMS
            .iter()
            .find(|(form_table, form_key, _)| *form_table == table && *form_key == key)
    });
    match form {
        Some((_, key, form)) => format!("{explained}; `{key}` is written `{form}`"),
        None => explained,
    }
}

/// The table header in force at byte `offset` of `text` (`op` for `[[op]]`) and the key written
/// just before `offset` on its line (`gemm` for `gemm = {`), when both are there.
fn key_before(text: &str, offset: usize) -> Option<(&str, &str)> {
    let before = text.get(..offset)?;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let key = before[line_start..].trim_end().strip_suffix('=')?.trim();
    let is_bare_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !is_bare_key {
        return None;
    }
    let table = before[..line_start]
        .lines()
        .rev()
        .find_map(super::table_header)?;
    Some((table, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explain_at(text: &str, value: &str, message: &str) -> String {
        let start = text.find(value).expect("the value is in the text");
        explain_type_error(message, text, start..start + value.len())
    }

    #[test]
    fn rewords_serde_types_and_shows_the_keys_form() {
        let text = "name = \"a\"\n[[op]]\ngemm = { m = 1 }\n";
        assert_eq!(
            explain_at(text, "{ m = 1 }", "invalid type: map, expected a sequence"),
            "invalid type: table, expected an array; `gemm` is written `gemm = [m, n, k]`"
        );
        let text = "[[op]]\nkernel = 5\n";
        assert_eq!(
            explain_at(
                text,
                "5",
                "invalid type: integer `5`, expected struct RawKernel"
            ),
            "invalid type: integer `5`, expected a table; \
             `kernel` is written `kernel = { us = 50, sms = 16 }`"
        );
    }

    #[test]
    fn the_same_key_in_another_table_gets_no_form() {
        let text = "[cluster]\nranks = \"2\"\n[[op]]\nwait = \"w\"\n";
        assert_eq!(
            explain_at(text, "\"2\"", "invalid type: string \"2\", expected i64"),
            "invalid type: string \"2\", expected an integer"
        );
        let text = "[[perturb]]\nranks = 3\n";
        assert_eq!(
            explain_at(text, "3", "invalid type: integer `3`, expected a sequence"),
            "invalid type: integer `3`, expected an array; `ranks` is written `ranks = [3]`"
        );
    }

    #[test]
    fn a_value_inside_an_inline_table_and_other_messages_are_left_alone() {
        let text = "[[op]]\nkernel = { us = \"5\" }\n";
        assert_eq!(
            explain_at(text, "\"5\"", "invalid type: string \"5\", expected f64"),
            "invalid type: string \"5\", expected a number"
        );
        assert_eq!(
            explain_type_error("missing field `us`", text, 0..0),
            "missing field `us`"
        );
    }

    #[test]
    fn every_form_is_the_one_the_docs_show() {
        let docs = include_str!("../../../docs/scenario-format.md");
        for (table, key, form) in FORMS {
            assert!(
                docs.contains(form),
                "docs/scenario-format.md no longer shows `{form}` ([[{table}]] {key})"
            );
        }
    }
}
