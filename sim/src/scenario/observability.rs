//! ProcessGroupNCCL's observability variables (the Flight Recorder's dump and buffer, the NaN
//! check, the CUDA event cache) and the legacy names without the `TORCH_` prefix: each is read
//! with its effect on what the model does, or refused with the reason, never ignored.

use super::*;

/// The un-prefixed names PyTorch 2.12 still reads, each as an alias of a `TORCH_NCCL_` name
/// (the name lists declared in `ProcessGroupNCCL.hpp`; reading one logs a deprecation
/// warning).
const LEGACY_ALIASES: [(&str, &str); 4] = [
    ("NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"),
    (
        "NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    ),
    ("NCCL_DESYNC_DEBUG", "TORCH_NCCL_DESYNC_DEBUG"),
    ("NCCL_ENABLE_TIMING", "TORCH_NCCL_ENABLE_TIMING"),
];

/// `TORCH_NCCL_` variables PyTorch reads under that name only: written without the prefix,
/// neither PyTorch nor NCCL reads them.
const WITHOUT_ALIAS: [&str; 13] = [
    "TORCH_NCCL_HIGH_PRIORITY",
    "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
    "TORCH_NCCL_ENABLE_MONITORING",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC",
    "TORCH_NCCL_COORD_CHECK_MILSEC",
    "TORCH_NCCL_PROPAGATE_ERROR",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_NCCL_NAN_CHECK",
    "TORCH_NCCL_CUDA_EVENT_CACHE",
];

/// The Flight Recorder's buffer: PyTorch ≥ 2.11 reads `TORCH_FR_BUFFER_SIZE` first, then the
/// older `TORCH_NCCL_TRACE_BUFFER_SIZE`.
const BUFFER_NAMES: [&str; 2] = ["TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"];

/// The dump files' path prefix: PyTorch ≥ 2.11 reads `TORCH_FR_DUMP_TEMP_FILE` first, then the
/// older `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`.
const DUMP_FILE_NAMES: [&str; 2] = ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"];

impl Resolver<'_> {
    /// The name `key` stands for: a legacy alias becomes its `TORCH_NCCL_` name. An error for
    /// an un-prefixed name PyTorch does not read, and for an alias set beside its new name
    /// (PyTorch would read the new one and drop the other without a word).
    pub(super) fn canonical_env_key(
        &self,
        key: &Spanned<String>,
        all: &BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    ) -> Result<Spanned<String>> {
        let name = key.get_ref().as_str();
        if let Some(&(_, new_name)) = LEGACY_ALIASES.iter().find(|(old, _)| *old == name) {
            if all.keys().any(|other| other.get_ref() == new_name) {
                return Err(self.error(
                    key.span(),
                    format!("{name} is the legacy name of {new_name}, which is set too; PyTorch reads {new_name} and ignores {name}: remove one"),
                ));
            }
            return Ok(Spanned::new(key.span(), new_name.to_string()));
        }
        let prefixed = format!("TORCH_{name}");
        if WITHOUT_ALIAS.contains(&prefixed.as_str()) {
            return Err(self.error(
                key.span(),
                format!("{name} is read by neither PyTorch nor NCCL: PyTorch 2.12 reads this variable only as {prefixed} (its legacy un-prefixed names are NCCL_BLOCKING_WAIT, NCCL_ASYNC_ERROR_HANDLING, NCCL_DESYNC_DEBUG and NCCL_ENABLE_TIMING)"),
            ));
        }
        for [new_name, old_name] in [BUFFER_NAMES, DUMP_FILE_NAMES] {
            if old_name == name && all.keys().any(|other| other.get_ref() == new_name) {
                return Err(self.error(
                    key.span(),
                    format!("{name} and {new_name} are both set; PyTorch >= 2.11 reads {new_name} and ignores {name}: remove one"),
                ));
            }
        }
        Ok(key.clone())
    }

    /// Reads the observability variables into `env`; false if `key` is none of them.
    pub(super) fn observability_env(
        &self,
        env: &mut Env,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Result<bool> {
        let name = key.get_ref().as_str();
        let written = match name {
            "TORCH_NCCL_DUMP_ON_TIMEOUT" => {
                env.dump_on_timeout = self.env_flag(key, value)?;
                u8::from(env.dump_on_timeout).to_string()
            }
            "TORCH_FR_BUFFER_SIZE" | "TORCH_NCCL_TRACE_BUFFER_SIZE" => {
                let entries = match value.get_ref() {
                    toml::Value::Integer(number) => Some(*number),
                    toml::Value::String(text) => text.trim().parse::<i64>().ok(),
                    _ => None,
                }
                .filter(|entries| (0..=100_000_000).contains(entries))
                .ok_or_else(|| {
                    self.error(
                        value.span(),
                        format!(
                            "{name} expects a number of Flight Recorder entries between 0 (off) and 100000000, found {}",
                            value.get_ref()
                        ),
                    )
                })?;
                env.trace_buffer_entries = entries as u64;
                entries.to_string()
            }
            "TORCH_FR_DUMP_TEMP_FILE" | "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" => {
                let prefix = match value.get_ref() {
                    toml::Value::String(text) if !text.trim().is_empty() => text.clone(),
                    _ => {
                        return Err(self.error(
                            value.span(),
                            format!(
                                "{name} expects the dump files' path before the rank, such as \"/tmp/nccl_trace_rank_\", found {}",
                                value.get_ref()
                            ),
                        ))
                    }
                };
                env.dump_file_prefix = Some(prefix.clone());
                prefix
            }
            "TORCH_NCCL_NAN_CHECK" => {
                if self.env_flag(key, value)? {
                    return Err(self.error(
                        value.span(),
                        "TORCH_NCCL_NAN_CHECK = 1 launches a NaN-check kernel over each collective's input on the NCCL stream before the collective; that kernel's duration is not modelled (not measured), so the run would show the collectives early: leave it 0",
                    ));
                }
                "0".to_string()
            }
            "TORCH_NCCL_CUDA_EVENT_CACHE" => {
                if !self.env_flag(key, value)? {
                    return Err(self.error(
                        value.span(),
                        "TORCH_NCCL_CUDA_EVENT_CACHE = 0 creates and destroys a CUDA event per Work instead of reusing cached ones; that host cost (and the watchdog hang risk the cache avoids) is not modelled, and the host costs were measured with the cache on (its default): leave it 1",
                    ));
                }
                "1".to_string()
            }
            _ => return Ok(false),
        };
        env.raw.insert(name.to_string(), written);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::{parse, Scenario};

    const PROGRAM: &str = "[cluster]\nranks = 2\n[[op]]\nbarrier = true\n";

    fn with_env(lines: &str) -> Result<Scenario, (u32, u32, String)> {
        parse("obs.toml", &format!("[env]\n{lines}\n{PROGRAM}"))
            .map_err(|e| (e.line, e.column, e.message))
    }

    fn refused(lines: &str) -> (u32, u32, String) {
        with_env(lines).expect_err(lines)
    }

    #[test]
    fn dump_on_timeout_and_the_buffer_are_read_with_their_defaults() {
        let plain = with_env("").unwrap();
        assert!(plain.env.dump_on_timeout);
        assert_eq!(plain.env.trace_buffer_entries, 2000);
        let off = with_env("TORCH_NCCL_DUMP_ON_TIMEOUT = 0\nTORCH_FR_BUFFER_SIZE = 5000").unwrap();
        assert!(!off.env.dump_on_timeout);
        assert_eq!(off.env.trace_buffer_entries, 5000);
        assert_eq!(off.env.raw["TORCH_FR_BUFFER_SIZE"], "5000");
        let old = with_env("TORCH_NCCL_TRACE_BUFFER_SIZE = \"100000\"").unwrap();
        assert_eq!(old.env.trace_buffer_entries, 100_000);
        // 0 turns the recorder off (modelled since 2026-12-04, docs/watchdog.md).
        let none = with_env("TORCH_NCCL_TRACE_BUFFER_SIZE = 0").unwrap();
        assert_eq!(none.env.trace_buffer_entries, 0);
    }

    #[test]
    fn the_dump_file_prefix_has_two_names_and_is_a_path() {
        assert_eq!(with_env("").unwrap().env.dump_file_prefix, None);
        let new = with_env("TORCH_FR_DUMP_TEMP_FILE = \"out/fr_rank\"").unwrap();
        assert_eq!(new.env.dump_file_prefix.as_deref(), Some("out/fr_rank"));
        let old = with_env("TORCH_NCCL_DEBUG_INFO_TEMP_FILE = \"/tmp/t\"").unwrap();
        assert_eq!(old.env.dump_file_prefix.as_deref(), Some("/tmp/t"));
        let (line, column, message) = refused("TORCH_FR_DUMP_TEMP_FILE = 3");
        assert_eq!((line, column), (2, 27));
        assert!(message.contains("path before the rank"), "{message}");
        let (_, _, message) =
            refused("TORCH_FR_DUMP_TEMP_FILE = \"a\"\nTORCH_NCCL_DEBUG_INFO_TEMP_FILE = \"b\"");
        assert!(message.contains("both set"), "{message}");
        let (_, _, message) = refused("NCCL_DEBUG_INFO_TEMP_FILE = \"b\"");
        assert!(
            message.contains("only as TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
            "{message}"
        );
    }

    #[test]
    fn what_is_not_modelled_is_refused_with_the_reason_at_the_value() {
        let (line, column, message) = refused("TORCH_NCCL_NAN_CHECK = 1");
        assert_eq!((line, column), (2, 24));
        assert!(message.contains("NaN-check kernel"), "{message}");
        let (_, _, message) = refused("TORCH_NCCL_CUDA_EVENT_CACHE = 0");
        assert!(message.contains("not modelled"), "{message}");
        let (_, _, message) = refused("TORCH_FR_BUFFER_SIZE = -1");
        assert!(
            message.contains("between 0 (off) and 100000000"),
            "{message}"
        );
        // Their defaults are what the model does.
        let defaults = with_env("TORCH_NCCL_NAN_CHECK = 0\nTORCH_NCCL_CUDA_EVENT_CACHE = 1");
        assert_eq!(defaults.unwrap().env.raw.len(), 2);
    }

    #[test]
    fn the_four_legacy_names_are_aliases_and_the_others_are_refused() {
        let old = with_env(
            "NCCL_BLOCKING_WAIT = 1\nNCCL_ASYNC_ERROR_HANDLING = 1\nNCCL_DESYNC_DEBUG = true\nNCCL_ENABLE_TIMING = \"1\"",
        )
        .unwrap();
        assert!(old.env.blocking_wait && old.env.desync_debug && old.env.enable_timing);
        assert_eq!(old.env.async_error_handling.number(), 1);
        let (line, column, message) = refused("NCCL_DUMP_ON_TIMEOUT = 0");
        assert_eq!((line, column), (2, 1));
        assert!(
            message.contains("only as TORCH_NCCL_DUMP_ON_TIMEOUT"),
            "{message}"
        );
        let (_, _, message) = refused("NCCL_HIGH_PRIORITY = 1");
        assert!(message.contains("TORCH_NCCL_HIGH_PRIORITY"), "{message}");
        let (line, _, message) = refused("TORCH_NCCL_BLOCKING_WAIT = 0\nNCCL_BLOCKING_WAIT = 1");
        // Read in name order: the legacy name, on line 3, meets the new one.
        assert_eq!(line, 3);
        assert!(message.contains("remove one"), "{message}");
        let (_, _, message) =
            refused("TORCH_FR_BUFFER_SIZE = 10\nTORCH_NCCL_TRACE_BUFFER_SIZE = 20");
        assert!(message.contains("reads TORCH_FR_BUFFER_SIZE"), "{message}");
    }
}
