//! Flight Recorder dumps as the bytes PyTorch writes: a pickle (protocol 2) of a dict with
//! `version`, `pg_config`, `pg_status`, `comm_lib_version` and `entries` (docs/flight-recorder.md).
//! [`write()`] turns a [`FlightRecorderDump`] into those bytes, so that PyTorch's own analyser
//! (`torchfrtrace`) reads the simulator's dumps; [`read`] turns a dump written by PyTorch 2.11
//! (format version 2.10) back into one, with an error naming the key at fault. [`import`]
//! makes a scenario of a job's dumps.
//!
//! Pure: bytes in, values out.

pub mod import;
pub mod pickle;

use pickle::PyValue as Value;
use sim::flight_recorder::{
    DumpEntry, DumpGroup, EntryState, FlightRecorderDump, Frame, DUMP_VERSION,
};
use std::fmt;

/// The dump format versions [`read`] understands, and the PyTorch that writes each.
pub const SUPPORTED_VERSIONS: [(&str, &str); 1] = [(DUMP_VERSION, "PyTorch 2.11")];

/// Why bytes are not a dump this reader understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpError {
    pub message: String,
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn error(message: impl Into<String>) -> DumpError {
    DumpError {
        message: message.into(),
    }
}

fn text(value: &str) -> Value {
    Value::Str(value.to_string())
}

fn int(value: u64) -> Value {
    Value::Int(i64::try_from(value).unwrap_or(i64::MAX))
}

/// A dict in sorted key order (deterministic bytes).
fn dict(mut items: Vec<(&str, Value)>) -> Value {
    items.sort_by(|a, b| a.0.cmp(b.0));
    Value::Dict(
        items
            .into_iter()
            .map(|(name, value)| (text(name), value))
            .collect(),
    )
}

fn sizes(list: &[Vec<u64>]) -> Value {
    Value::List(
        list.iter()
            .map(|shape| Value::List(shape.iter().map(|&d| int(d)).collect()))
            .collect(),
    )
}

fn strings(list: &[String]) -> Value {
    Value::List(list.iter().map(|s| text(s)).collect())
}

fn optional(value: Option<u64>) -> Value {
    value.map_or(Value::None, int)
}

/// A Python list's `repr` (`[0, 1, 2]`), as `pg_config` writes a group's ranks.
fn ranks_repr(ranks: &[u32]) -> String {
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    format!("[{}]", list.join(", "))
}

fn entry_value(entry: &DumpEntry) -> Value {
    let frames = entry
        .frames
        .iter()
        .map(|frame| {
            dict(vec![
                ("name", text(&frame.name)),
                ("filename", text(&frame.filename)),
                ("line", int(frame.line)),
            ])
        })
        .collect();
    let mut items = vec![
        ("frames", Value::List(frames)),
        ("record_id", int(entry.record_id)),
        ("pg_id", int(entry.pg_id)),
        (
            "process_group",
            Value::Tuple(vec![text(&entry.pg_name), text(&entry.pg_desc)]),
        ),
        ("thread_name", text(&entry.thread_name)),
        ("thread_id", text(&entry.thread_id)),
        ("collective_seq_id", int(entry.collective_seq_id)),
        ("p2p_seq_id", int(entry.p2p_seq_id)),
        ("op_id", int(entry.op_id)),
        ("profiling_name", text(&entry.profiling_name)),
        ("time_created_ns", int(entry.time_created_ns)),
        ("input_sizes", sizes(&entry.input_sizes)),
        ("input_dtypes", strings(&entry.input_dtypes)),
        ("output_sizes", sizes(&entry.output_sizes)),
        ("output_dtypes", strings(&entry.output_dtypes)),
        ("state", text(entry.state.name())),
        (
            "time_discovered_started_ns",
            optional(entry.time_discovered_started_ns),
        ),
        (
            "time_discovered_completed_ns",
            optional(entry.time_discovered_completed_ns),
        ),
        ("retired", Value::Bool(entry.retired)),
        ("timeout_ms", int(entry.timeout_ms)),
        ("is_p2p", Value::Bool(entry.is_p2p)),
    ];
    if let Some(duration_ms) = entry.duration_ms {
        items.push(("duration_ms", Value::Float(duration_ms)));
    }
    dict(items)
}

/// The dump as PyTorch pickles it (protocol 2; dict keys in sorted order, group keys in the
/// dump's order).
pub fn write(dump: &FlightRecorderDump) -> Vec<u8> {
    let config = Value::Dict(
        dump.groups
            .iter()
            .map(|group| {
                (
                    text(&group.name),
                    dict(vec![
                        ("name", text(&group.name)),
                        ("desc", text(&group.desc)),
                        ("ranks", text(&ranks_repr(&group.ranks))),
                    ]),
                )
            })
            .collect(),
    );
    let status = Value::Dict(
        dump.groups
            .iter()
            .filter(|group| group.recorded)
            .map(|group| {
                (
                    text(&group.name),
                    dict(vec![
                        ("last_enqueued_collective", Value::Int(group.last_enqueued)),
                        ("last_started_collective", Value::Int(group.last_started)),
                        (
                            "last_completed_collective",
                            Value::Int(group.last_completed),
                        ),
                    ]),
                )
            })
            .collect(),
    );
    let value = dict(vec![
        ("version", text(&dump.version)),
        ("pg_config", config),
        ("comm_lib_version", text(&dump.comm_lib_version)),
        ("pg_status", status),
        (
            "entries",
            Value::List(dump.entries.iter().map(entry_value).collect()),
        ),
    ]);
    pickle::write(&value)
}

fn kind(value: &Value) -> &'static str {
    value.type_name()
}

/// A dict's members by string key, with the path that reached it for errors.
struct Fields<'a> {
    path: String,
    items: &'a [(Value, Value)],
}

impl<'a> Fields<'a> {
    fn of(path: String, value: &'a Value) -> Result<Fields<'a>, DumpError> {
        match value {
            Value::Dict(items) => Ok(Fields { path, items }),
            other => Err(error(format!(
                "{path}: expected a dict, found {}",
                kind(other)
            ))),
        }
    }

    fn at(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    fn find(&self, name: &str) -> Option<&'a Value> {
        self.items
            .iter()
            .find(|(key, _)| matches!(key, Value::Str(k) if k == name))
            .map(|(_, value)| value)
    }

    fn get(&self, name: &str) -> Result<&'a Value, DumpError> {
        self.find(name)
            .ok_or_else(|| error(format!("{}: the key `{name}` is missing", self.describe())))
    }

    fn describe(&self) -> String {
        if self.path.is_empty() {
            "the dump".to_string()
        } else {
            self.path.clone()
        }
    }

    fn string(&self, name: &str) -> Result<String, DumpError> {
        match self.get(name)? {
            Value::Str(s) => Ok(s.clone()),
            other => Err(self.expected(name, "a str", other)),
        }
    }

    fn integer(&self, name: &str) -> Result<i64, DumpError> {
        let value = self.get(name)?;
        as_integer(value).ok_or_else(|| self.expected(name, "an int", value))
    }

    fn unsigned(&self, name: &str) -> Result<u64, DumpError> {
        let value = self.integer(name)?;
        u64::try_from(value).map_err(|_| {
            error(format!(
                "{}: expected an int >= 0, found {value}",
                self.at(name)
            ))
        })
    }

    fn optional_unsigned(&self, name: &str) -> Result<Option<u64>, DumpError> {
        match self.find(name) {
            None | Some(Value::None) => Ok(None),
            Some(_) => self.unsigned(name).map(Some),
        }
    }

    fn boolean(&self, name: &str) -> Result<bool, DumpError> {
        match self.get(name)? {
            Value::Bool(b) => Ok(*b),
            other => Err(self.expected(name, "a bool", other)),
        }
    }

    fn list(&self, name: &str) -> Result<&'a [Value], DumpError> {
        match self.get(name)? {
            Value::List(items) | Value::Tuple(items) => Ok(items),
            other => Err(self.expected(name, "a list", other)),
        }
    }

    fn expected(&self, name: &str, what: &str, found: &Value) -> DumpError {
        error(format!(
            "{}: expected {what}, found {}",
            self.at(name),
            kind(found)
        ))
    }

    fn sizes(&self, name: &str) -> Result<Vec<Vec<u64>>, DumpError> {
        self.list(name)?
            .iter()
            .enumerate()
            .map(|(index, shape)| match shape {
                Value::List(dims) | Value::Tuple(dims) => dims
                    .iter()
                    .map(|dim| as_integer(dim).and_then(|d| u64::try_from(d).ok()))
                    .collect::<Option<Vec<u64>>>()
                    .ok_or_else(|| {
                        error(format!(
                            "{}[{index}]: expected a list of sizes (ints >= 0)",
                            self.at(name)
                        ))
                    }),
                other => Err(error(format!(
                    "{}[{index}]: expected a list of sizes, found {}",
                    self.at(name),
                    kind(other)
                ))),
            })
            .collect()
    }

    fn strings(&self, name: &str) -> Result<Vec<String>, DumpError> {
        self.list(name)?
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::Str(s) => Ok(s.clone()),
                other => Err(error(format!(
                    "{}[{index}]: expected a str, found {}",
                    self.at(name),
                    kind(other)
                ))),
            })
            .collect()
    }
}

fn as_integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// A dict's string keys in order; an error for any other key.
fn string_keys<'a>(fields: &Fields<'a>) -> Result<Vec<(String, &'a Value)>, DumpError> {
    fields
        .items
        .iter()
        .map(|(name, value)| match name {
            Value::Str(s) => Ok((s.clone(), value)),
            _ => Err(error(format!(
                "{}: expected group names (str) as keys",
                fields.describe()
            ))),
        })
        .collect()
}

fn read_group_ranks(fields: &Fields) -> Result<Vec<u32>, DumpError> {
    let written = fields.string("ranks")?;
    let inner = written
        .trim()
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or_else(|| {
            error(format!(
                "{}: expected a list of ranks such as \"[0, 1]\", found {written:?}",
                fields.at("ranks")
            ))
        })?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<u32>().map_err(|_| {
                error(format!(
                    "{}: {part:?} is not a rank in {written:?}",
                    fields.at("ranks")
                ))
            })
        })
        .collect()
}

fn read_entry(fields: &Fields) -> Result<DumpEntry, DumpError> {
    let (pg_name, pg_desc) = match fields.get("process_group")? {
        Value::Tuple(pair) | Value::List(pair) => match pair.as_slice() {
            [Value::Str(name), Value::Str(desc)] => (name.clone(), desc.clone()),
            _ => {
                return Err(error(format!(
                    "{}: expected (name, desc), two strs",
                    fields.at("process_group")
                )))
            }
        },
        other => return Err(fields.expected("process_group", "a tuple", other)),
    };
    let state_name = fields.string("state")?;
    let state = EntryState::from_name(&state_name).ok_or_else(|| {
        error(format!(
            "{}: unknown state {state_name:?} (expected scheduled, started or completed)",
            fields.at("state")
        ))
    })?;
    let frames = fields
        .list("frames")?
        .iter()
        .enumerate()
        .map(|(index, frame)| {
            let frame = Fields::of(format!("{}[{index}]", fields.at("frames")), frame)?;
            Ok(Frame {
                name: frame.string("name")?,
                filename: frame.string("filename")?,
                line: frame.unsigned("line")?,
            })
        })
        .collect::<Result<Vec<Frame>, DumpError>>()?;
    let duration_ms = match fields.find("duration_ms") {
        None | Some(Value::None) => None,
        Some(Value::Float(ms)) => Some(*ms),
        Some(other) => return Err(fields.expected("duration_ms", "a float", other)),
    };
    Ok(DumpEntry {
        record_id: fields.unsigned("record_id")?,
        pg_id: fields.unsigned("pg_id")?,
        pg_name,
        pg_desc,
        collective_seq_id: fields.unsigned("collective_seq_id")?,
        p2p_seq_id: fields.unsigned("p2p_seq_id")?,
        op_id: fields.unsigned("op_id")?,
        profiling_name: fields.string("profiling_name")?,
        time_created_ns: fields.unsigned("time_created_ns")?,
        duration_ms,
        input_sizes: fields.sizes("input_sizes")?,
        input_dtypes: fields.strings("input_dtypes")?,
        output_sizes: fields.sizes("output_sizes")?,
        output_dtypes: fields.strings("output_dtypes")?,
        state,
        time_discovered_started_ns: fields.optional_unsigned("time_discovered_started_ns")?,
        time_discovered_completed_ns: fields.optional_unsigned("time_discovered_completed_ns")?,
        retired: fields.boolean("retired")?,
        timeout_ms: fields.unsigned("timeout_ms")?,
        is_p2p: fields.boolean("is_p2p")?,
        thread_name: fields.string("thread_name")?,
        thread_id: fields.string("thread_id")?,
        frames,
    })
}

/// Reads the dump of `rank`, the rank its file name gives: PyTorch writes no rank of its own
/// into the dump, but each group of its `pg_config` is one the rank belongs to (a rank outside
/// a group creates no process group for it), so a group that does not list `rank` says the
/// file is another rank's dump, renamed or copied under the wrong name: an error.
pub fn read(bytes: &[u8], rank: u32) -> Result<FlightRecorderDump, DumpError> {
    // Protocols 2 to 5 start with PROTO (0x80); protocol 1 with the dict's EMPTY_DICT (`}`).
    if !matches!(bytes.first(), Some(0x80 | b'}')) {
        return Err(error(
            "not a Flight Recorder dump: a dump is a binary pickle (it starts with the byte 0x80, or `}` at protocol 1)",
        ));
    }
    let value = pickle::read(bytes).map_err(|e| error(format!("not a readable pickle: {e}")))?;
    let top = Fields::of(String::new(), &value).map_err(|_| {
        error(format!(
            "not a Flight Recorder dump: the pickle holds {}, not a dict",
            kind(&value)
        ))
    })?;
    let version = match top.find("version") {
        Some(Value::Str(version)) => version.clone(),
        Some(other) => return Err(top.expected("version", "a str", other)),
        None => {
            return Err(error(
                "not a Flight Recorder dump: the pickled dict has no `version`",
            ))
        }
    };
    if !SUPPORTED_VERSIONS
        .iter()
        .any(|(known, _)| *known == version)
    {
        let known: Vec<String> = SUPPORTED_VERSIONS
            .iter()
            .map(|(v, torch)| format!("{v} ({torch})"))
            .collect();
        return Err(error(format!(
            "Flight Recorder dump version {version:?} is not supported; supported: {}",
            known.join(", ")
        )));
    }
    let config = Fields::of("pg_config".into(), top.get("pg_config")?)?;
    let status = Fields::of("pg_status".into(), top.get("pg_status")?)?;
    let mut groups = Vec::new();
    for (name, value) in string_keys(&config)? {
        let group = Fields::of(format!("pg_config[{name:?}]"), value)?;
        // A group the rank recorded no entry on has no status.
        let progress = match status.find(&name) {
            Some(value) => {
                let progress = Fields::of(format!("pg_status[{name:?}]"), value)?;
                (
                    progress.integer("last_enqueued_collective")?,
                    progress.integer("last_started_collective")?,
                    progress.integer("last_completed_collective")?,
                    true,
                )
            }
            None => (-1, -1, -1, false),
        };
        groups.push(DumpGroup {
            name: group.string("name")?,
            desc: group.string("desc")?,
            ranks: read_group_ranks(&group)?.into(),
            last_enqueued: progress.0,
            last_started: progress.1,
            last_completed: progress.2,
            recorded: progress.3,
        });
    }
    if let Some(group) = groups.iter().find(|g| !g.ranks.contains(&rank)) {
        return Err(error(format!(
            "the file name says rank {rank}, but the dump's process group {:?} ({}) lists ranks {}, \
             without it: this is another rank's dump (renamed or copied under the wrong name?)",
            group.name,
            group.desc,
            ranks_repr(&group.ranks)
        )));
    }
    let entries = top
        .list("entries")?
        .iter()
        .enumerate()
        .map(|(index, entry)| read_entry(&Fields::of(format!("entries[{index}]"), entry)?))
        .collect::<Result<Vec<DumpEntry>, DumpError>>()?;
    let comm_lib_version = match top.find("comm_lib_version") {
        Some(Value::Str(version)) => version.clone(),
        _ => String::new(),
    };
    Ok(FlightRecorderDump {
        rank,
        stands_for: sim::ranks::RankSet::default(),
        version,
        comm_lib_version,
        groups,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &[u8] = include_bytes!("../../../tests/data/torch/recorded/fr/timeout_rank0");

    #[test]
    fn reads_the_dump_pytorch_2_11_wrote_on_the_h200() {
        let dump = read(REAL, 0).unwrap();
        assert_eq!(dump.version, "2.10");
        assert_eq!(dump.comm_lib_version, "2.28.9");
        assert_eq!(dump.groups.len(), 1);
        let world = &dump.groups[0];
        assert_eq!(
            (world.name.as_str(), world.desc.as_str()),
            ("0", "default_pg")
        );
        assert_eq!(*world.ranks, [0]);
        assert_eq!(
            (
                world.last_enqueued,
                world.last_started,
                world.last_completed
            ),
            (47, -1, 46)
        );
        assert_eq!(dump.entries.len(), 47);
        let last = dump.entries.last().unwrap();
        assert_eq!(last.profiling_name, "nccl:all_reduce");
        assert_eq!(last.collective_seq_id, 47);
        assert_eq!(last.state, EntryState::Scheduled);
        assert_eq!(last.input_sizes, [[1_048_576]]);
        assert_eq!(last.input_dtypes, ["Float"]);
        assert_eq!(last.timeout_ms, 1000);
        assert_eq!(last.time_created_ns, 1_796_157_042_820_692_223);
        assert_eq!(last.frames[2].name, "flight_recorder");
        let first = &dump.entries[0];
        assert_eq!(first.state, EntryState::Completed);
        assert!(first.retired);
        assert_eq!(first.time_discovered_started_ns, None);
    }

    #[test]
    fn a_dump_read_as_a_rank_its_groups_do_not_list_is_refused() {
        let mut dump = read(REAL, 0).unwrap();
        dump.groups[0].ranks = vec![0, 1].into();
        dump.groups.push(DumpGroup {
            name: "1".into(),
            desc: "tp".into(),
            ranks: vec![0].into(),
            ..dump.groups[0].clone()
        });
        let bytes = write(&dump);
        assert_eq!(read(&bytes, 0).unwrap().groups.len(), 2);
        assert_eq!(
            read(&bytes, 1).unwrap_err().message,
            "the file name says rank 1, but the dump's process group \"1\" (tp) lists ranks [0], \
             without it: this is another rank's dump (renamed or copied under the wrong name?)"
        );
        assert!(read(REAL, 3).unwrap_err().message.contains(
            "the file name says rank 3, but the dump's process group \"0\" (default_pg) lists ranks [0]"
        ));
    }

    #[test]
    fn what_it_reads_it_writes_back_the_same() {
        let dump = read(REAL, 0).unwrap();
        let again = read(&write(&dump), 0).unwrap();
        assert_eq!(again, dump);
        // Protocol 2, as PyTorch writes.
        assert_eq!(&write(&dump)[..2], &[0x80, 0x02]);
    }

    #[test]
    fn a_group_without_an_entry_is_in_pg_config_alone() {
        // The recorder takes a group's status with its first entry (`pg_status`), and lists
        // every group whose communicator was created (`pg_config`).
        let mut dump = read(REAL, 0).unwrap();
        dump.groups.push(DumpGroup {
            name: "1".into(),
            desc: "tp".into(),
            last_enqueued: -1,
            last_completed: -1,
            recorded: false,
            ..dump.groups[0].clone()
        });
        let bytes = write(&dump);
        let value = pickle::read(&bytes).unwrap();
        let top = Fields::of(String::new(), &value).unwrap();
        let listed = |key: &str| -> Vec<String> {
            let fields = Fields::of(key.into(), top.get(key).unwrap()).unwrap();
            (string_keys(&fields).unwrap().into_iter())
                .map(|(name, _)| name)
                .collect()
        };
        assert_eq!(listed("pg_config"), ["0", "1"]);
        assert_eq!(listed("pg_status"), ["0"]);
        assert_eq!(read(&bytes, 0).unwrap(), dump);
    }

    #[test]
    fn errors_say_what_is_wrong_and_where() {
        let not_pickle = read(b"{\"version\": 1}", 0).unwrap_err();
        assert!(
            not_pickle.message.contains("starts with the byte 0x80"),
            "{not_pickle}"
        );
        let truncated = read(&REAL[..100], 0).unwrap_err();
        assert!(
            truncated.message.contains("not a readable pickle"),
            "{truncated}"
        );
        let mut dump = read(REAL, 0).unwrap();
        dump.version = "9.9".into();
        let unknown = read(&write(&dump), 0).unwrap_err();
        assert!(
            unknown
                .message
                .contains("version \"9.9\" is not supported; supported: 2.10 (PyTorch 2.11)"),
            "{unknown}"
        );
        // Protocol 1 (no PROTO opcode) is read: this one is a dict without `version`.
        let protocol_1 = read(b"}q\x00(X\x01\x00\x00\x00aI01\nu.", 0).unwrap_err();
        assert!(
            protocol_1.message.contains("has no `version`"),
            "{protocol_1}"
        );
        let list = pickle::write(&Value::List(vec![]));
        let message = read(&list, 0).unwrap_err().message;
        assert!(message.contains("holds a list, not a dict"), "{message}");
        // A wrong type deep inside names its path.
        let mut value = pickle::read(REAL).unwrap();
        if let Value::Dict(top) = &mut value {
            if let Some((_, Value::List(entries))) =
                top.iter_mut().find(|(k, _)| *k == text("entries"))
            {
                if let Value::Dict(entry) = &mut entries[3] {
                    for (k, v) in entry.iter_mut() {
                        if *k == text("input_sizes") {
                            *v = text("big");
                        }
                    }
                }
            }
        }
        let bytes = pickle::write(&value);
        let message = read(&bytes, 0).unwrap_err().message;
        assert_eq!(
            message,
            "entries[3].input_sizes: expected a list, found a str"
        );
    }
}
