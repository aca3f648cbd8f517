//! Scenario errors for people: the `file:line:column: error: …` line that editors and scripts
//! read, then the source line with a caret under the place (drawn by codespan-reporting).
//!
//! After `--set`, the scenario is parsed from an edited text; [`locate`] takes an error in it
//! back to the file's own line, or to the `--set` argument that wrote the line.

use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};
use sim::scenario::{line_origin, LineOrigin, Override, ScenarioError};

/// An error and the text its line and column refer to.
pub struct Located {
    pub error: ScenarioError,
    pub source: String,
}

/// Moves an error in `edited` (the file after `--set` and a machine profile) to where a user can
/// find it: the file's own line when the edit kept it, else the `--set` argument (shown as the
/// "file" `--set KEY=VALUE`, line 1), else the edited text, named as such.
pub fn locate(
    error: ScenarioError,
    path: &str,
    original: &str,
    edited: &str,
    overrides: &[Override],
) -> Located {
    if error.line == 0 {
        return Located {
            error,
            source: String::new(),
        };
    }
    match line_origin(original, edited, overrides, error.line) {
        LineOrigin::Original(line) => Located {
            error: ScenarioError {
                path: path.to_string(),
                line,
                ..error
            },
            source: original.to_string(),
        },
        LineOrigin::Override(index) => {
            let item = &overrides[index];
            let argument = item.to_string();
            let edited_line = edited.lines().nth(error.line as usize - 1).unwrap_or("");
            let equals_column = edited_line.chars().take_while(|&c| c != '=').count() as u32 + 1;
            let path_chars = item.path.chars().count() as u32;
            let (column, width) = if let Some(table) = sim::scenario::table_header(edited_line) {
                // A table the override created: the caret under its name in the argument.
                (1, table.chars().count() as u32)
            } else if error.column > equals_column {
                (path_chars + 2, item.value.chars().count() as u32)
            } else {
                let last = item.path.rsplit('.').next().unwrap_or("").chars().count() as u32;
                (path_chars - last + 1, last)
            };
            Located {
                error: ScenarioError {
                    path: format!("--set {argument}"),
                    line: 1,
                    column,
                    width: width.max(1),
                    message: format!("{} (scenario {path})", error.message),
                },
                source: argument,
            }
        }
        LineOrigin::Edited => {
            let list: Vec<String> = overrides.iter().map(ToString::to_string).collect();
            let shown = if list.is_empty() {
                format!("{path} [as edited]")
            } else {
                format!("{path} [--set {}]", list.join(" --set "))
            };
            Located {
                error: ScenarioError {
                    path: shown,
                    ..error
                },
                source: edited.to_string(),
            }
        }
    }
}

/// `file:line:column: error: message`, then the source line with the place underlined.
pub fn render(located: &Located) -> String {
    let error = &located.error;
    let heading = error.to_string();
    let Some(range) = byte_range(&located.source, error) else {
        return heading;
    };
    let file = SimpleFile::new(error.path.as_str(), located.source.as_str());
    let diagnostic = Diagnostic::error()
        .with_message(error.message.as_str())
        .with_labels(vec![Label::primary((), range)]);
    match term::emit_into_string(&Config::default(), &file, &diagnostic) {
        // Its first line is "error: message", which the heading already says with the place.
        Ok(drawn) => match drawn.split_once('\n') {
            Some((_, snippet)) => format!("{heading}\n{}", snippet.trim_end()),
            None => heading,
        },
        Err(_) => heading,
    }
}

/// The bytes of `source` that `error`'s line, column and width cover; none when they are not in
/// it.
fn byte_range(source: &str, error: &ScenarioError) -> Option<std::ops::Range<usize>> {
    let line_start: usize = source
        .split_inclusive('\n')
        .take(error.line.checked_sub(1)? as usize)
        .map(str::len)
        .sum();
    let line = source.get(line_start..)?.lines().next()?;
    let mut offsets = line
        .char_indices()
        .map(|(offset, _)| offset)
        .chain([line.len()]);
    let start = offsets.nth(error.column.checked_sub(1)? as usize)?;
    let end = line
        .char_indices()
        .map(|(offset, _)| offset)
        .chain([line.len()])
        .nth((error.column - 1 + error.width.max(1)) as usize)
        .unwrap_or(line.len());
    Some(line_start + start..line_start + end.max(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: u32, column: u32, width: u32) -> ScenarioError {
        ScenarioError {
            path: "s.toml".into(),
            line,
            column,
            width,
            message: "unknown field `rankz`; did you mean `ranks`?".into(),
        }
    }

    #[test]
    fn the_heading_keeps_file_line_column_and_the_caret_underlines_the_span() {
        let source = "[cluster]\nrankz = 4\n".to_string();
        let drawn = render(&Located {
            error: error(2, 1, 5),
            source,
        });
        let lines: Vec<&str> = drawn.lines().collect();
        assert!(
            lines[0].starts_with("s.toml:2:1: error: unknown field `rankz`"),
            "{drawn}"
        );
        assert!(drawn.contains("┌─ s.toml:2:1"), "{drawn}");
        assert!(drawn.contains("2 │ rankz = 4"), "{drawn}");
        assert!(
            drawn.contains("│ ^^^^^\n") || drawn.ends_with("│ ^^^^^"),
            "{drawn}"
        );
    }

    #[test]
    fn a_place_outside_the_text_gives_the_heading_alone() {
        let drawn = render(&Located {
            error: error(9, 1, 1),
            source: "a = 1\n".into(),
        });
        assert_eq!(
            drawn,
            "s.toml:9:1: error: unknown field `rankz`; did you mean `ranks`?"
        );
    }

    #[test]
    fn an_error_in_a_set_value_points_at_the_argument() {
        let original = "[env]\nTORCH_NCCL_BLOCKING_WAIT = 0\n[[op]]\ndevice_sync = true\n";
        let overrides = [Override::parse("env.TORCH_NCCL_BLOCKING_WAIT=7").unwrap()];
        let edited = sim::scenario::apply_overrides(original, &overrides).unwrap();
        let parsed = sim::scenario::parse("s.toml", &edited).unwrap_err();
        let located = locate(parsed, "s.toml", original, &edited, &overrides);
        assert_eq!(located.error.path, "--set env.TORCH_NCCL_BLOCKING_WAIT=7");
        assert_eq!((located.error.line, located.error.column), (1, 30));
        let drawn = render(&located);
        assert!(
            drawn.starts_with("--set env.TORCH_NCCL_BLOCKING_WAIT=7:1:30: error:"),
            "{drawn}"
        );
        assert!(drawn.contains("(scenario s.toml)"), "{drawn}");
        assert!(
            drawn.contains("1 │ env.TORCH_NCCL_BLOCKING_WAIT=7"),
            "{drawn}"
        );
    }

    #[test]
    fn an_error_on_an_untouched_line_keeps_the_files_line() {
        let original = "[tensors]\nbuf = \"1MiB\"\n[[op]]\nall_reduce = \"bfu\"\n";
        let overrides = [Override::parse("cluster.ranks=2").unwrap()];
        let edited = sim::scenario::apply_overrides(original, &overrides).unwrap();
        let parsed = sim::scenario::parse("s.toml", &edited).unwrap_err();
        let located = locate(parsed, "s.toml", original, &edited, &overrides);
        assert_eq!(
            (
                located.error.path.as_str(),
                located.error.line,
                located.error.column
            ),
            ("s.toml", 4, 14)
        );
        assert!(
            located.error.message.contains("did you mean \"buf\""),
            "{}",
            located.error.message
        );
        assert!(render(&located).contains("4 │ all_reduce = \"bfu\""));
    }
}
