//! The names a scenario defines — tensors, streams, groups, op labels, Works, measures and
//! overlaps — hold no control character: they become CSV columns, trace tracks and one-line
//! table rows, which a newline or a tab would break (docs/sweep-format.md: every record is one
//! line). File:line:column errors like every other scenario check.

use super::raw::RawScenario;
use super::*;

impl Resolver<'_> {
    pub(super) fn check_names(&self, raw: &RawScenario) -> Result<()> {
        let mut defined: Vec<(&Spanned<String>, &str)> = Vec::new();
        defined.extend(
            raw.tensors
                .iter()
                .flat_map(|m| m.keys())
                .map(|n| (n, "tensor")),
        );
        defined.extend(
            raw.streams
                .iter()
                .flat_map(|m| m.keys())
                .map(|n| (n, "stream")),
        );
        defined.extend(
            raw.groups
                .iter()
                .flat_map(|m| m.keys())
                .map(|n| (n, "group")),
        );
        for op in raw.op.iter().flatten() {
            let op = op.get_ref();
            defined.extend(op.label.iter().map(|name| (name, "label")));
            defined.extend(op.work.iter().map(|name| (name, "work")));
        }
        for measure in raw.measure.iter().flatten() {
            defined.push((&measure.get_ref().name, "measure"));
        }
        for overlap in raw.overlap.iter().flatten() {
            defined.extend(overlap.get_ref().name.iter().map(|name| (name, "overlap")));
        }
        for (name, what) in defined {
            if let Some(why) = unfit_name(what, name.get_ref()) {
                return Err(self.error(name.span(), why));
            }
        }
        Ok(())
    }
}

/// Why `name`, a `what` name, cannot be one: it holds a control character (a newline, a tab),
/// where it will be a CSV column, a trace track or a table row, one line each. Shared by the
/// sweep's zipped axes.
pub fn unfit_name(what: &str, name: &str) -> Option<String> {
    let control = name.chars().find(|c| c.is_control())?;
    Some(format!(
        "{what} name {name:?} holds a control character ({control:?}): names become CSV \
         columns, trace tracks and table rows, one line each"
    ))
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse;

    #[test]
    fn a_name_with_a_newline_or_a_tab_is_refused_where_it_is_defined() {
        for (text, what, line) in [
            ("[tensors]\n\"a\\nb\" = \"1MiB\"\n[[op]]\nall_reduce = \"a\\nb\"\n", "tensor", 2),
            ("[tensors]\nx = \"1MiB\"\n[[op]]\nlabel = \"ar\\tx\"\nall_reduce = \"x\"\n", "label", 4),
            (
                "[tensors]\nx = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\\r\"\n[[op]]\nwait = \"w\\r\"\n",
                "work",
                6,
            ),
            ("[streams]\n\"s\\n\" = {}\n[[op]]\ngpu_sleep_us = 5\n", "stream", 2),
        ] {
            let error = parse("names.toml", text).unwrap_err();
            assert_eq!(error.line, line, "{text}: {error}");
            assert!(
                error
                    .message
                    .starts_with(&format!("{what} name ")),
                "{error}"
            );
            assert!(error.message.contains("holds a control character"), "{error}");
        }
        // Unicode that is not a control character is a name like any other.
        let fine = "[tensors]\n\"grad·é\" = \"1MiB\"\n[[op]]\nlabel = \"all_reduce «x»\"\nall_reduce = \"grad·é\"\n";
        assert!(parse("names.toml", fine).is_ok());
    }
}
