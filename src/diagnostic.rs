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
    // Unedited, every line is the file's own (an empty file's line 1 included, which the
    // edited text does not hold either).
    let origin = if original == edited {
        LineOrigin::Original(error.line)
    } else {
        line_origin(original, edited, overrides, error.line)
    };
    match origin {
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
                let last_key = item.keys().ok().and_then(|mut keys| keys.pop());
                let last = last_key.map_or(0, |key| {
                    sim::scenario::dotted_path(&[key]).chars().count() as u32
                });
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
            let shown = if overrides.is_empty() {
                format!("{path} [as edited]")
            } else {
                let invocation = sim::scenario::Invocation {
                    overrides: overrides.to_vec(),
                    ..sim::scenario::Invocation::default()
                };
                sim::scenario::recorded_invocation(path, &invocation)
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

/// [`locate`], but an error on a line a machine profile wrote (a value the scenario's checks
/// refuse, such as `[host] collective_us = 1e15`) is placed at that key in the profile that
/// set it, the last of `profiles` (`(path, text)`, in the order they were applied) that does.
pub fn locate_with_profiles(
    error: ScenarioError,
    path: &str,
    original: &str,
    edited: &str,
    overrides: &[Override],
    profiles: &[(String, String)],
) -> Located {
    let written_by_an_edit = matches!(
        line_origin(original, edited, overrides, error.line),
        LineOrigin::Edited
    );
    if error.line > 0 && written_by_an_edit {
        if let Some(located) = in_profiles(&error, path, edited, profiles) {
            return located;
        }
    }
    locate(error, path, original, edited, overrides)
}

/// The place of the key on `error`'s line of `edited` (under its table) in the last profile
/// that sets it.
fn in_profiles(
    error: &ScenarioError,
    path: &str,
    edited: &str,
    profiles: &[(String, String)],
) -> Option<Located> {
    let lines: Vec<&str> = edited.lines().collect();
    let index = error.line as usize - 1;
    let (key, _) = lines.get(index)?.split_once('=')?;
    let key = key.trim().trim_matches('"');
    let table = lines[..index]
        .iter()
        .rev()
        .find_map(|line| sim::scenario::table_header(line))
        .unwrap_or("");
    let value_column = |line: &str| {
        line.find('=')
            .map(|at| at + 1 + (line[at + 1..].len() - line[at + 1..].trim_start().len()))
    };
    profiles.iter().rev().find_map(|(profile, text)| {
        let mut current = "";
        for (number, line) in text.lines().enumerate() {
            if let Some(header) = sim::scenario::table_header(line) {
                current = header;
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            if current != table || name.trim().trim_matches('"') != key {
                continue;
            }
            let edited_line = lines[index];
            let on_value = value_column(edited_line)
                .is_some_and(|at| error.column as usize > edited_line[..at].chars().count());
            let shown_value = value.split('#').next().unwrap_or("").trim();
            let (column, width) = match (on_value, value_column(line)) {
                (true, Some(at)) => (line[..at].chars().count() + 1, shown_value.chars().count()),
                _ => (
                    line.len() - line.trim_start().len() + 1,
                    name.trim().chars().count(),
                ),
            };
            return Some(Located {
                error: ScenarioError {
                    path: profile.clone(),
                    line: number as u32 + 1,
                    column: column as u32,
                    width: width.max(1) as u32,
                    message: format!("{} (machine profile applied to {path})", error.message),
                },
                source: text.clone(),
            });
        }
        None
    })
}

/// The longest source line an error shows under its heading.
const MAX_SHOWN_LINE_BYTES: usize = 1000;

/// `file:line:column: error: message`, then the source line with the place underlined.
pub fn render(located: &Located) -> String {
    let error = &located.error;
    let heading = error.to_string();
    let Some(range) = byte_range(&located.source, error) else {
        return heading;
    };
    // A line too long to read (a generated file's megabyte of one line) is not echoed: the
    // heading's line and column place the error.
    let line_start = located.source[..range.start]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let line_end = located.source[range.start..]
        .find('\n')
        .map_or(located.source.len(), |at| range.start + at);
    if line_end - line_start > MAX_SHOWN_LINE_BYTES {
        return heading;
    }
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
    fn a_line_too_long_to_read_gives_the_heading_alone() {
        let source = format!("{}\nrankz = 4\n", "#".repeat(2 * MAX_SHOWN_LINE_BYTES));
        let drawn = render(&Located {
            error: error(2, 1, 5),
            source: source.clone(),
        });
        assert!(drawn.contains("rankz = 4"), "{drawn}");
        let long = format!("rankz = \"{}\"\n", "x".repeat(2 * MAX_SHOWN_LINE_BYTES));
        let drawn = render(&Located {
            error: error(1, 1, 5),
            source: long,
        });
        assert_eq!(
            drawn,
            "s.toml:1:1: error: unknown field `rankz`; did you mean `ranks`?"
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
    fn an_error_on_a_line_a_profile_wrote_points_at_the_profile() {
        let original = "[cluster]\nranks = 2\n[[op]]\ndevice_sync = true\n";
        let profile_text = "[profile]\nname = \"p\"\n\n[cluster]\nsms = 0  # too few\n";
        let Ok(profile) = analysis::calibrate::parse_profile("p.toml", profile_text) else {
            panic!("the profile parses");
        };
        let edited = analysis::calibrate::apply_profile(
            original,
            &profile,
            analysis::calibrate::ProfileMode::Replace,
        )
        .unwrap();
        let parsed = sim::scenario::parse("s.toml", &edited).unwrap_err();
        let profiles = [("p.toml".to_string(), profile_text.to_string())];
        let located = locate_with_profiles(parsed, "s.toml", original, &edited, &[], &profiles);
        assert_eq!(located.error.path, "p.toml");
        assert_eq!(
            (
                located.error.line,
                located.error.column,
                located.error.width
            ),
            (5, 7, 1)
        );
        assert!(
            located
                .error
                .message
                .contains("(machine profile applied to s.toml)"),
            "{}",
            located.error.message
        );
        // Without the profile's text the edited scenario is all there is to show.
        let parsed = sim::scenario::parse("s.toml", &edited).unwrap_err();
        let located = locate_with_profiles(parsed, "s.toml", original, &edited, &[], &[]);
        assert_eq!(located.error.path, "s.toml [as edited]");
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
