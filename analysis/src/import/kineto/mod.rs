//! torch.profiler (Kineto) Chrome traces → a scenario (docs/import.md).
//!
//! One trace per rank, recorded with CUDA activities: every GPU activity (`kernel`,
//! `gpu_memcpy`, `gpu_memset`) becomes a `kernel` op of its measured duration on its stream (SMs
//! from the grid where the trace gives one); every `record_param_comms` a collective of its size,
//! dtype and group (the CUDA calls inside it are ProcessGroupNCCL's own and are left to the
//! simulator); `cudaEventRecord`/`cudaStreamWaitEvent`, the synchronisations and `.item()`-like
//! copies the matching ops; the host's time between the calls `host_sleep_us`, with every
//! `[host]` cost 0, so that the measured gaps are the host's whole time. A `mark` starts each
//! `ProfilerStep#N` (one comment per step) and a host-clock `[[measure]]` spans it.
//!
//! Kineto's runtime events do not name the stream or the event a call uses, so two things are
//! inferred, as docs/import.md says: a recorded event is on the stream of the GPU work the host
//! issued last, a wait is by the stream of the GPU work it issues next and on the latest event
//! recorded on another stream (or, while asynchronous collectives are outstanding, their Work,
//! oldest first).
//!
//! About 1,090 lines, over 1,000: some 320 of the entry points, the rest the unit tests of the whole importer
//! (trace.rs, program.rs and network.rs are tested here, through the entry points, on small
//! traces written in the tests).

mod network;
mod program;
mod trace;

use trace::error;
pub use trace::{GpuKind, GpuOp, Step, Trace};

use super::ImportError;
use program::{
    comment_text, gpu_preset, launch_latencies_ns, one_rank_collective_ns, us, Declarations,
    RankProgram,
};
use sim::ranks::RankSet;
use sim::units::format_size;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One trace file: its name (for messages and comments) and its text.
#[derive(Debug, Clone, Copy)]
pub struct TraceFile<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// Edits of the imported program (what-ifs).
#[derive(Debug, Clone, Default)]
pub struct KinetoOptions {
    /// Re-bucket DDP's gradients: within a step, consecutive asynchronous all_reduces of one
    /// group and dtype join one collective the way DDP's reducer fills a bucket (a tensor joins
    /// while the bucket holds less than this many bytes); the joined collective is issued where
    /// the last of its members was, and the others' host time (their `record_param_comms`) is
    /// dropped.
    pub bucket_bytes: Option<u64>,
}

/// Imports traces (one per rank of the job, or one file of every rank) into a scenario's text.
pub fn import(files: &[TraceFile], options: &KinetoOptions) -> Result<String, ImportError> {
    if files.is_empty() {
        return Err(error("kineto", None, "no trace given"));
    }
    let mut traces = Vec::new();
    for file in files {
        traces.extend(Trace::parse_file(file)?);
    }
    import_traces(&traces, options).map_err(|message| {
        let names: Vec<&str> = files.iter().map(|file| file.name).collect();
        error(&files_named(&names), None, message)
    })
}

/// One note per collective the importer does not model and left out of `traces`' scenario, by
/// name: how many calls of it the traces have, all ranks together.
pub fn left_out_notes(traces: &[Trace]) -> Vec<String> {
    let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
    for (collective, count) in traces.iter().flat_map(|trace| &trace.left_out) {
        *calls.entry(collective).or_default() += count;
    }
    (calls.into_iter())
        .map(|(collective, count)| {
            let calls = if count == 1 { "call" } else { "calls" };
            format!("left out {count} `{collective}` {calls} the importer does not model (docs/import.md)")
        })
        .collect()
}

/// SMs added for NCCL's channels (at most 64, `NCCL_MAX_CTAS`), beyond the copy engine's one.
const SHARING_HEADROOM_SMS: u32 = 64;

/// The world size of `traces` where they are one job's, one trace per rank (`import_traces`
/// and `--replay-against` need that), else why not.
fn job_world_size(traces: &[Trace]) -> Result<u32, String> {
    let Some(first) = traces.first() else {
        return Err("no traces".to_string());
    };
    let world = first.world_size;
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for trace in traces {
        if trace.world_size != world {
            return Err(format!(
                "{} is of world size {}, {} of world size {world}: the traces are not of one job",
                trace.file, trace.world_size, traces[0].file
            ));
        }
        if let Some(other) = seen.insert(trace.rank, &trace.file) {
            return Err(format!(
                "two traces of rank {}: {other} and {}{}",
                trace.rank,
                trace.file,
                trace.unranked_hint()
            ));
        }
    }
    if seen.len() as u32 != world {
        // The ranks between those seen, as ranges: a world of 65,536 with one trace is one
        // short line, not a list of every rank.
        let mut missing = RankSet::default();
        let mut next = 0u32;
        for &rank in seen.keys().filter(|&&rank| rank < world) {
            if rank > next {
                missing.union_with(&RankSet::range(next, rank - 1));
            }
            next = rank + 1;
        }
        if next < world {
            missing.union_with(&RankSet::range(next, world - 1));
        }
        return Err(format!(
            "world size {world} but no trace of {}: give one trace per rank",
            missing.named()
        ));
    }
    Ok(world)
}

/// Whether `against` can stand for the imported job `imported` in a replay's comparison: a
/// whole job of the same world size, else why not.
pub fn replayable_against(imported: &[Trace], against: &[Trace]) -> Result<(), String> {
    let imported_world = job_world_size(imported)?;
    let world = job_world_size(against)?;
    if world == imported_world {
        Ok(())
    } else {
        Err(format!(
            "traces of world size {world}, the imported ones of world size {imported_world}"
        ))
    }
}

/// The traces with the ranks of each group that `record_param_comms` names without listing
/// them (one of unevenly spaced ranks): the ranks whose traces record a collective of its
/// `Process Group Name`, which must be its `Group size` ranks from its `Global rank start`.
fn list_unlisted_groups(traces: &[Trace]) -> Result<Cow<'_, [Trace]>, String> {
    let mut members: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for trace in traces {
        for comm in trace.comms.iter().filter(|comm| comm.unlisted.is_some()) {
            if let Some(group) = comm.group.as_deref() {
                members.entry(group).or_default().insert(trace.rank);
            }
        }
    }
    if !traces
        .iter()
        .flat_map(|t| &t.comms)
        .any(|c| c.unlisted.is_some())
    {
        return Ok(Cow::Borrowed(traces));
    }
    let mut listed = traces.to_vec();
    for trace in &mut listed {
        for comm in &mut trace.comms {
            let Some(group) = comm.unlisted else {
                continue;
            };
            let name = comm.group.as_deref().unwrap_or("(unnamed)");
            let ranks: Vec<u32> = (members.get(name).into_iter().flatten().copied()).collect();
            if ranks.len() as u64 != group.size || ranks.first() != Some(&group.start) {
                return Err(format!(
                    "{}: a {} on the process group {name:?} of {} ranks from rank {}, which record_param_comms does not list (PyTorch lists none for a group of unevenly spaced ranks), and the traces of ranks {ranks:?} record that group: c10dsim cannot tell its ranks",
                    trace.file, comm.key, group.size, group.start
                ));
            }
            comm.ranks = Some(ranks);
        }
    }
    Ok(Cow::Owned(listed))
}

/// Imports traces already read (see [`Trace::parse_file`]).
pub fn import_traces(traces: &[Trace], options: &KinetoOptions) -> Result<String, String> {
    let world = job_world_size(traces)?;
    let traces = &*list_unlisted_groups(traces)?;
    let several = traces.len() > 1;
    let mut ordered: Vec<&Trace> = traces.iter().collect();
    ordered.sort_by_key(|t| t.rank);
    let mut declarations = Declarations::new(&ordered);
    let mut programs = String::new();
    for trace in &ordered {
        let mut program = RankProgram::new(trace, several);
        program.plan(options);
        programs.push_str(&program.render(&mut declarations));
    }
    let mut text = String::new();
    let first = ordered[0];
    let mut names: Vec<&str> = ordered.iter().map(|t| t.path.as_str()).collect();
    names.dedup();
    let _ = writeln!(
        text,
        "# Imported by `c10dsim import kineto` from {} (docs/import.md).",
        files_named(&names)
    );
    let _ = writeln!(
        text,
        "# torch.profiler trace on {}, NCCL {}, world size {world}; {} step(s) per rank.",
        comment_text(first.gpu_name.as_deref().unwrap_or("an unnamed GPU")),
        comment_text(first.nccl_version.as_deref().unwrap_or("unknown")),
        first.steps.len()
    );
    let stream_map: Vec<String> = first
        .streams
        .iter()
        .map(|(id, name)| format!("{id} → {name}"))
        .collect();
    let _ = writeln!(
        text,
        "# Trace streams: {}; the others are ProcessGroupNCCL's internal streams.",
        stream_map.join(", ")
    );
    text.push_str(
        "# Every GPU activity is a kernel of its measured duration; the host's time between the\n\
         # calls is host_sleep_us and every [host] cost is 0. Events and waits are inferred: a\n\
         # record is on the stream of the GPU work issued last, a wait by the stream of the work\n\
         # issued next, on the latest event of another stream or an outstanding Work.\n",
    );
    let network = network::traced_network(&ordered);
    text.push_str(&network.note);
    if let Some(cap) = options.bucket_bytes {
        let _ = writeln!(
            text,
            "# What-if: asynchronous all_reduces re-bucketed as DDP fills buckets of {}.",
            format_size(cap)
        );
    }
    // the file's folder and stem (`ddp_b25/rank0.json` or `.json.gz` → `kineto_ddp_b25_rank0`)
    let parts: Vec<&str> = first
        .path
        .trim_end_matches(".gz")
        .trim_end_matches(".json")
        .rsplit(['/', '\\'])
        .take(2)
        .collect();
    let stem: String = parts
        .iter()
        .rev()
        .copied()
        .collect::<Vec<_>>()
        .join("_")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let _ = writeln!(text, "name = \"kineto_{stem}\"");
    text.push_str("about = \"a torch.profiler trace imported by c10dsim import kineto\"\n");
    text.push_str("torch = \"2.12\"\n\n[cluster]\n");
    let _ = writeln!(text, "ranks = {world}");
    if let Some(preset) = first.gpu_name.as_deref().and_then(gpu_preset) {
        let _ = writeln!(text, "gpu = \"{preset}\"");
    }
    // More SMs than the GPU has: the trace's kernels ask for at most the GPU's own, so the copy
    // engine (the copies' one SM) and up to 64 NCCL channels always find theirs. The measured
    // durations already hold what sharing the SMs cost; the replay must not charge it twice.
    let gpu_sms = first.sms.unwrap_or(132);
    let _ = writeln!(
        text,
        "# the trace's {gpu_sms} SMs, one for the copy engine (memcpys, memsets) and 64 for NCCL's\n\
         # channels: kernels keep their measured durations, side by side as in the trace\nsms = {}",
        gpu_sms + 1 + SHARING_HEADROOM_SMS
    );
    let floor = one_rank_collective_ns(traces);
    if floor.is_some() || !network.values.is_empty() {
        let _ = write!(text, "\n[network]\n{}", network.values);
    }
    if let Some(floor) = floor {
        let _ = writeln!(
            text,
            "# a one-rank collective's GPU time in the trace (median)\nkernel_floor_us = {}",
            us(floor)
        );
    }
    text.push_str("\n[host]\n");
    let (kernel_latency, nccl_latency) = launch_latencies_ns(traces);
    if let Some(latency) = kernel_latency {
        let _ = writeln!(
            text,
            "# start of a GPU activity after its launch call on an idle stream (10th percentile)\nlaunch_latency_us = {}",
            us(latency)
        );
    }
    if let Some(latency) = nccl_latency.or(kernel_latency) {
        let whose = if nccl_latency.is_some() {
            "# the same for a collective's NCCL kernel, from the launch call inside the collective"
        } else {
            "# the same for a collective's NCCL kernel (the trace has none on an idle stream)"
        };
        let _ = writeln!(text, "{whose}\nnccl_launch_latency_us = {}", us(latency));
    }
    for key in [
        "launch_us",
        "collective_us",
        "collective_tail_us",
        "wait_us",
        "event_us",
        "sync_us",
        "item_us",
        "mark_us",
        "query_us",
    ] {
        let _ = writeln!(text, "{key} = 0");
    }
    // The job's SeqNums where the trace has them and the profiler started after the group's
    // first collective: the replay's Works, watchdog and Flight Recorder number as the job did.
    let first_seq_num = |group: &str| match declarations.first_seq_nums.get(group) {
        Some(&first) if first > 1 => {
            format!("first_seq_num = {first}   # the Seq of the group's first traced collective\n")
        }
        _ => String::new(),
    };
    let _ = write!(
        text,
        "\n[groups.world]\neager_init = true\n{}",
        first_seq_num("world")
    );
    for (name, ranks) in &declarations.groups {
        let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
        let _ = write!(
            text,
            "[groups.{name}]\nranks = [{}]\neager_init = true\n{}",
            list.join(", "),
            first_seq_num(name)
        );
    }
    let user_streams: Vec<&String> = declarations
        .streams
        .iter()
        .filter(|s| s.as_str() != "default")
        .collect();
    if !user_streams.is_empty() {
        text.push_str("\n[streams]\n");
        for stream in user_streams {
            let _ = writeln!(text, "{stream} = {{}}");
        }
    }
    if !declarations.tensors.is_empty() || declarations.item {
        text.push_str("\n[tensors]\n");
        for (name, (bytes, dtype)) in &declarations.tensors {
            let _ = writeln!(
                text,
                "{name} = {{ size = \"{}\", dtype = \"{dtype}\" }}",
                format_size(*bytes)
            );
        }
        if declarations.item {
            text.push_str("item_value = 4\n");
        }
    }
    for (name, from, to) in &declarations.measures {
        let _ = writeln!(
            text,
            "\n[[measure]]\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"{to}\"\nclock = \"host\""
        );
    }
    text.push_str(&programs);
    Ok(text)
}

/// The traces' files for the scenario's header, and where a job-level error of the import
/// ([`import_traces`]) is: whole names, as many as fit in about 200 characters, then how many
/// more (a name is never cut in the middle).
pub fn files_named(names: &[&str]) -> String {
    let mut shown = String::new();
    for (index, name) in names.iter().enumerate() {
        let name = comment_text(name);
        if index > 0 && shown.len() + 2 + name.len() > 200 {
            return format!("{shown} and {} more", names.len() - index);
        }
        if index > 0 {
            shown.push_str(", ");
        }
        shown.push_str(&name);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_whole_files_then_how_many_more() {
        let names: Vec<String> = (0..8)
            .map(|rank| format!("/data/job/traces/worker{rank}/rank{rank}.pt.trace.json"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let header = files_named(&names);
        assert!(header.ends_with(".pt.trace.json and 4 more"), "{header}");
        assert!(header.starts_with("/data/job/traces/worker0/rank0.pt.trace.json, "));
        assert_eq!(files_named(&names[..2]), names[..2].join(", "));
    }

    /// A small trace: a GEMM on stream 7, an all_reduce whose GPU activity is an NCCL kernel on
    /// stream 13, the Work waited, a device synchronisation; one ProfilerStep.
    pub(crate) fn small_trace(rank: u32, world: u32) -> String {
        format!(
            r#"{{"distributedInfo": {{"rank": {rank}, "world_size": {world}, "nccl_version": "2.28.9"}},
"deviceProperties": [{{"name": "NVIDIA H200", "numSms": 132}}],
"traceEvents": [
{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100.0, "dur": 500.0}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110.0, "dur": 5.0, "args": {{"correlation": 1}}}},
{{"ph": "X", "cat": "kernel", "name": "void at::native::gemm_kernel<8>(int)", "pid": 0, "tid": 7, "ts": 118.0, "dur": 200.0, "args": {{"stream": 7, "device": 0, "correlation": 1, "grid": [2, 66, 1]}}}},
{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {{"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 1, "ts": 131.0, "dur": 1.0, "args": {{"correlation": 2}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 133.0, "dur": 1.0, "args": {{"correlation": 8}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 1, "tid": 1, "ts": 140.0, "dur": 6.0, "args": {{"correlation": 3}}}},
{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 13, "ts": 320.0, "dur": 40.0, "args": {{"stream": 13, "device": 0, "correlation": 3, "grid": [16, 1, 1]}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 200.0, "dur": 1.0, "args": {{"correlation": 4}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 210.0, "dur": 3.0, "args": {{"correlation": 5}}}},
{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 361.0, "dur": 2.0, "args": {{"stream": 7, "device": 0, "correlation": 5}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 214.0, "dur": 150.0, "args": {{"correlation": 6}}}},
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 400.0, "dur": 10.0, "args": {{"correlation": 7}}}}
]}}"#
        )
    }

    /// `distributedInfo`'s `rank` and `world_size` are whole numbers; another value is refused
    /// with what it is (it was read as rank 0 of a world of 1: a rank "1" of two traces was
    /// "two traces of rank 0", alone a one-rank job).
    #[test]
    fn a_distributed_info_rank_that_is_not_a_whole_number_is_refused() {
        for (field, value) in [("rank", "-1"), ("rank", "\"1\""), ("world_size", "2.5")] {
            let text = small_trace(1, 2).replace(
                &format!("\"{field}\": {}", if field == "rank" { 1 } else { 2 }),
                &format!("\"{field}\": {value}"),
            );
            let file = TraceFile {
                name: "rank1.json",
                text: &text,
            };
            let refused = Trace::parse(&file).map(|_| ()).unwrap_err().to_string();
            assert_eq!(
                refused,
                format!(
                    "rank1.json: error: distributedInfo: {field} {value} is not a whole number"
                ),
            );
        }
    }

    /// A trace without `distributedInfo` reads as rank 0 of a one-rank job: where that is what
    /// the error is about, the error says so (it said "outside the world of 1", or "two traces of
    /// rank 0", of a job's traces whose metadata a tool had dropped).
    #[test]
    fn an_error_that_comes_of_a_missing_distributed_info_says_so() {
        const HINT: &str =
            "(the trace has no distributedInfo: it reads as rank 0 of a one-rank job)";
        let without_info = |rank: u32| {
            small_trace(rank, 2).replace(
                &format!("\"distributedInfo\": {{\"rank\": {rank}, \"world_size\": 2, \"nccl_version\": \"2.28.9\"}},"),
                "",
            )
        };
        let (zero, one) = (without_info(0), without_info(1));
        assert!(!zero.contains("distributedInfo"), "{zero}");
        let alone = import_one(&zero).unwrap_err().to_string();
        assert!(
            alone.ends_with(&format!(
                "all_reduce on a group with rank 1, outside the world of 1 {HINT}"
            )),
            "{alone}"
        );
        let ranked_world_of_one = small_trace(0, 1);
        let ranked = import_one(&ranked_world_of_one).unwrap_err().to_string();
        assert!(ranked.ends_with("outside the world of 1"), "{ranked}");
        let subgroup = zero.replace("\"[0, 1]\"", "\"[1, 2]\"");
        let outside = import_one(&subgroup).unwrap_err().to_string();
        assert!(
            outside.ends_with(&format!("on a group without it {HINT}")),
            "{outside}"
        );
        let pair = import(
            &[
                TraceFile {
                    name: "a.json",
                    text: &zero.replace("\"[0, 1]\"", "\"[0]\""),
                },
                TraceFile {
                    name: "b.json",
                    text: &one.replace("\"[0, 1]\"", "\"[0]\""),
                },
            ],
            &KinetoOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            pair.ends_with(&format!("two traces of rank 0: a.json and b.json {HINT}")),
            "{pair}"
        );
    }

    /// A group of over 30 ranks as the profiler lists it: cut after 30 (older PyTorch), or
    /// after 29 with the last (PyTorch 2.11, c10dsim), its ranks the listed stride's `Group size` steps;
    /// a cut list of no one stride, a list without ranks, or a rank beyond u32 is refused at
    /// its event (they were read as the world).
    #[test]
    fn a_cut_rank_list_is_a_strided_group_or_refused_at_its_event() {
        let ranks_of = |listed: &str, size: u64| -> Result<Option<Vec<u32>>, String> {
            let text = small_trace(0, 64).replace(
                "\"Process Group Ranks\": \"[0, 1]\"",
                &format!("\"Process Group Ranks\": \"{listed}\", \"Group size\": {size}"),
            );
            let file = TraceFile {
                name: "rank0.json",
                text: &text,
            };
            (Trace::parse(&file).map(|trace| trace.comms[0].ranks.clone()))
                .map_err(|error| error.to_string())
        };
        let evens: Vec<u32> = (0..64).step_by(2).collect();
        let listed = |ranks: &[u32]| -> Vec<String> { ranks.iter().map(u32::to_string).collect() };
        let old = format!("[{}, ...]", listed(&evens[..30]).join(", "));
        let new = format!("[{}, ..., 62]", listed(&evens[..29]).join(", "));
        assert_eq!(ranks_of(&old, 32), Ok(Some(evens.clone())));
        assert_eq!(ranks_of(&new, 32), Ok(Some(evens.clone())));
        let not_strided = format!("[{}, ..., 63]", listed(&evens[..29]).join(", "));
        let refused = ranks_of(&not_strided, 32).unwrap_err();
        assert!(
            refused.starts_with("rank0.json:traceEvents[3]: ")
                && refused.contains("lists only some of the group's ranks")
                && refused.contains("its 32 ranks are not in steps of the listed ones' stride"),
            "{refused}"
        );
        for (list, why) in [
            ("garbage", "is not a list of ranks"),
            ("[0, 99999999999]", "\"99999999999\" is not a rank"),
        ] {
            let refused = ranks_of(list, 2).unwrap_err();
            assert!(
                refused.starts_with("rank0.json:traceEvents[3]: ") && refused.contains(why),
                "{refused}"
            );
        }
    }

    /// A group PyTorch 2.11 lists no ranks of (`"[]"`, no stride): a lone rank is its
    /// `Global rank start`; an uneven group's ranks are those whose traces record its
    /// `Process Group Name`, refused where they are not `Group size` ranks from the start.
    #[test]
    fn a_group_listed_without_ranks_is_its_start_or_the_ranks_that_record_it() {
        let unlisted = |rank: u32, start: u32, size: u64| -> Trace {
            let args = format!(
                "\"Process Group Ranks\": \"[]\", \"Global rank start\": {start}, \"Group size\": {size}, \"Process Group Name\": \"2\""
            );
            let text = small_trace(rank, 2).replace("\"Process Group Ranks\": \"[0, 1]\"", &args);
            let file = TraceFile {
                name: "rank.json",
                text: &text,
            };
            Trace::parse(&file).unwrap()
        };
        assert_eq!(unlisted(1, 1, 1).comms[0].ranks, Some(vec![1]));
        let traces = [unlisted(0, 0, 2), unlisted(1, 0, 2)];
        assert_eq!(traces[0].comms[0].ranks, None);
        let listed = list_unlisted_groups(&traces).unwrap();
        assert!(listed.iter().all(|t| t.comms[0].ranks == Some(vec![0, 1])));
        let traces = [unlisted(0, 0, 3), unlisted(1, 0, 3)];
        let refused = import_traces(&traces, &KinetoOptions::default()).unwrap_err();
        assert!(
            refused.contains("process group \"2\" of 3 ranks from rank 0")
                && refused.contains("the traces of ranks [0, 1] record that group"),
            "{refused}"
        );
    }

    /// `Global rank start` and `Global rank stride` (PyTorch writes the stride only for a group
    /// of evenly spaced ranks) with `Group size` make the group, whatever its rank list shows;
    /// a rank list they disagree with is refused at its event.
    #[test]
    fn a_global_rank_start_and_stride_make_the_group_and_must_agree_with_its_list() {
        let ranks_of = |args: &str| -> Result<Option<Vec<u32>>, String> {
            let text = small_trace(1, 128).replace("\"Process Group Ranks\": \"[0, 1]\"", args);
            let file = TraceFile {
                name: "rank1.json",
                text: &text,
            };
            (Trace::parse(&file).map(|trace| trace.comms[0].ranks.clone()))
                .map_err(|error| error.to_string())
        };
        let odds: Vec<u32> = (1..128).step_by(4).collect();
        let strided = "\"Global rank start\": 1, \"Global rank stride\": 4, \"Group size\": 32";
        assert_eq!(ranks_of(strided), Ok(Some(odds.clone())));
        // A cut list of one listed rank: its stride is not to be read from the list.
        let cut = format!("{strided}, \"Process Group Ranks\": \"[1, ...]\"");
        assert_eq!(ranks_of(&cut), Ok(Some(odds.clone())));
        let listed: Vec<String> = odds.iter().map(u32::to_string).collect();
        let whole = format!(
            "{strided}, \"Process Group Ranks\": \"[{}]\"",
            listed.join(", ")
        );
        assert_eq!(ranks_of(&whole), Ok(Some(odds.clone())));
        for list in [
            "[1, 5, 9, ..., 127]",
            "[1, 5, 9, ..., 121]",
            "[0, 4, 8]",
            "[1, 5]",
        ] {
            let args = format!("{strided}, \"Process Group Ranks\": \"{list}\"");
            let refused = ranks_of(&args).unwrap_err();
            assert!(
                refused.starts_with("rank1.json:traceEvents[3]: ")
                    && refused.contains("\"Global rank start\" 1 and \"Global rank stride\" 4")
                    && refused.contains(list),
                "{list}: {refused}"
            );
        }
        for (args, why) in [
            (
                "\"Global rank start\": 1, \"Global rank stride\": 0, \"Group size\": 2",
                "\"Global rank stride\" 0 is not a positive whole number",
            ),
            (
                "\"Global rank start\": -1, \"Global rank stride\": 1, \"Group size\": 2",
                "\"Global rank start\" -1 is not a rank",
            ),
            (
                "\"Global rank start\": 4294967295, \"Global rank stride\": 1, \"Group size\": 2",
                "beyond",
            ),
            (
                "\"Global rank start\": 1, \"Global rank stride\": 4",
                "has no \"Group size\"",
            ),
        ] {
            let refused = ranks_of(args).unwrap_err();
            assert!(
                refused.starts_with("rank1.json:traceEvents[3]: ") && refused.contains(why),
                "{args}: {refused}"
            );
        }
    }

    /// A kernel's `stream` beyond i64 and a negative `In msg nelems` are refused for what they
    /// are (they were "names no \"stream\"" and "has no \"In msg nelems\"").
    #[test]
    fn a_stream_beyond_i64_and_a_negative_element_count_are_refused_for_what_they_are() {
        for (from, to, why) in [
            (
                "\"stream\": 7, \"device\": 0, \"correlation\": 1,",
                "\"stream\": 18446744073709551615, \"device\": 0, \"correlation\": 1,",
                "GPU activity \"void at::native::gemm_kernel<8>(int)\": \"stream\" 18446744073709551615 is not a stream id",
            ),
            (
                "\"In msg nelems\": 262144",
                "\"In msg nelems\": -5",
                "record_param_comms (allreduce): \"In msg nelems\" -5 is not a count of elements",
            ),
        ] {
            let text = small_trace(0, 2).replace(from, to);
            let file = TraceFile {
                name: "rank0.json",
                text: &text,
            };
            let refused = Trace::parse(&file).unwrap_err().to_string();
            assert!(
                refused.starts_with("rank0.json:traceEvents[") && refused.contains(why),
                "{refused}"
            );
        }
    }

    /// The collectives the importer does not model are counted per name over every trace, for
    /// a note each (they were left out silently); a Work's `wait` and a group's `init` are no
    /// collectives and are not counted.
    #[test]
    fn collectives_left_out_are_counted_per_name_over_the_traces() {
        let record = |name: &str| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 370.0, "dur": 5.0, "args": {{"Collective name": "{name}", "dtype": "Float", "In msg nelems": 4, "Out msg nelems": 4, "Process Group Ranks": "[0, 1]"}}}},"#
            )
        };
        let events: String = ["gather", "send", "gather", "wait", "init"]
            .map(record)
            .concat();
        let text = one_rank_trace_with(events.trim_end_matches(','));
        let file = TraceFile {
            name: "rank0.json",
            text: &text,
        };
        let trace = Trace::parse(&file).unwrap();
        let traces = [trace.clone(), trace];
        assert_eq!(
            left_out_notes(&traces),
            [
                "left out 4 `gather` calls the importer does not model (docs/import.md)",
                "left out 2 `send` calls the importer does not model (docs/import.md)",
            ]
        );
        // A trace whose collectives are all left out, without `nccl:*` annotations to stand
        // for them (they were not noted).
        let text = small_trace(0, 2).replace("\"allreduce\"", "\"allreduce_v2_fancy\"");
        let file = TraceFile {
            name: "rank0.json",
            text: &text,
        };
        assert_eq!(
            left_out_notes(&[Trace::parse(&file).unwrap()]),
            ["left out 1 `allreduce_v2_fancy` call the importer does not model (docs/import.md)"]
        );
    }

    /// `small_trace` at one rank, with `events` (trace events, comma-separated) on the host
    /// thread before its final `cudaDeviceSynchronize`.
    fn one_rank_trace_with(events: &str) -> String {
        const DEVICE_SYNC: &str =
            r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize""#;
        small_trace(0, 1).replace("[0, 1]", "[0]").replacen(
            DEVICE_SYNC,
            &format!("{events},\n{DEVICE_SYNC}"),
            1,
        )
    }

    fn import_one(text: &str) -> Result<String, ImportError> {
        import(
            &[TraceFile {
                name: "rank0.json",
                text,
            }],
            &KinetoOptions::default(),
        )
    }

    /// The scenario of two ranks' traces, `rank0.json` and `rank1.json`.
    fn import_two(traces: &[String; 2]) -> String {
        let files = [
            TraceFile {
                name: "rank0.json",
                text: &traces[0],
            },
            TraceFile {
                name: "rank1.json",
                text: &traces[1],
            },
        ];
        import(&files, &KinetoOptions::default()).unwrap()
    }

    #[test]
    fn a_small_trace_becomes_a_scenario_that_parses() {
        let text = import_two(&[small_trace(0, 2), small_trace(1, 2)]);
        assert!(text.contains("kernel = { us = 200, sms = 132 }"), "{text}");
        assert!(
            text.contains("all_reduce = \"f32_1MiB\"\nasync_op = true"),
            "{text}"
        );
        assert!(text.contains("wait = \"r0_w1\""), "{text}");
        assert!(text.contains("item = \"item_value\""), "{text}");
        assert!(text.contains("device_sync = true"), "{text}");
        assert!(text.contains("# ProfilerStep#3 (rank 1)"), "{text}");
        // the host's own time: from the step's start to the launch, 10 µs
        assert!(
            text.contains("[[op]]\nranks = [0]\nhost_sleep_us = 10\n"),
            "{text}"
        );
        let scenario =
            sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
        assert_eq!(text, import_two(&[small_trace(0, 2), small_trace(1, 2)]));
    }

    #[test]
    fn the_host_s_time_goes_on_from_a_barrier_s_end() {
        // After a stream synchronisation that ends at 364 µs, `dist.barrier()` from 370 to
        // 395 µs: its own host time up to its `cudaStreamSynchronize` at 380, where it blocks
        // until its stream drained; the next call at 400: 5 µs of the host's own, as after any
        // synchronisation.
        let barrier = r#"{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 370.0, "dur": 25.0, "args": {"Collective name": "barrier", "dtype": "Byte", "In msg nelems": 0, "Out msg nelems": 0, "Process Group Ranks": "[0]"}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 380.0, "dur": 14.0, "args": {"correlation": 9}}"#;
        let trace = one_rank_trace_with(barrier);
        let text = import_one(&trace).unwrap();
        assert!(
            text.contains("host_sleep_us = 16\n[[op]]\nlabel = \"barrier_4\"\nbarrier = true\n[[op]]\nhost_sleep_us = 5\n"),
            "{text}"
        );
    }

    #[test]
    fn an_asynchronous_barrier_keeps_its_work_and_its_wait() {
        // `w = dist.barrier(async_op=True)` from 370 to 380 µs: its all_reduce on the internal
        // stream (a `cudaStreamWaitEvent` inside the call, no `cudaStreamSynchronize`), then
        // `w.wait()` at 390 µs, the current stream waiting on the Work's end (as PyTorch 2.11
        // recorded it, tests/data/torch/probes/barrier/).
        let barrier = r#"{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 370.0, "dur": 10.0, "args": {"Collective name": "barrier", "dtype": "Byte", "In msg nelems": 0, "Out msg nelems": 0, "Process Group Ranks": "[0]"}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 372.0, "dur": 1.0, "args": {"correlation": 9}},
{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 390.0, "dur": 5.0, "args": {"Collective name": "wait", "dtype": "Byte", "In msg nelems": 0, "Out msg nelems": 0, "Process Group Ranks": "[]"}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 391.0, "dur": 1.0, "args": {"correlation": 10}}"#;
        let trace = one_rank_trace_with(barrier);
        let text = import_one(&trace).unwrap();
        assert!(
            text.contains("barrier = true\nasync_op = true\nwork = \"w2\"\n[[op]]\nhost_sleep_us = 11\n[[op]]\nwait = \"w2\"\n"),
            "{text}"
        );
        let scenario =
            sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let timeline = sim::engine::simulate(&scenario);
        assert!(timeline.findings.is_empty(), "{:?}", timeline.findings);
    }

    #[test]
    fn a_trace_without_record_param_comms_keeps_its_barrier_from_the_nccl_annotation() {
        // The Work's own annotations only, as ProcessGroupNCCL names them: an all_reduce,
        // then a barrier's all_reduce.
        let trace = small_trace(0, 1)
            .replace(
                r#""name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}"#,
                r#""name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Input Dims": [[262144]], "Input type": ["float"]}"#,
            )
            .replace("\"cat\": \"cpu_op\"", "\"cat\": \"user_annotation\"")
            .replacen(
                r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize""#,
                r#"{"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce_barrier", "pid": 1, "tid": 1, "ts": 370.0, "dur": 25.0, "args": {"Input Dims": [[1]], "Input type": ["float"]}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize""#,
                1,
            );
        let text = import_one(&trace).unwrap();
        assert!(text.contains("all_reduce = \"f32_1MiB\""), "{text}");
        assert!(text.contains("barrier = true"), "{text}");
    }

    #[test]
    fn a_coalesced_nccl_annotation_counts_each_tensor_in_its_own_dtype() {
        // `nccl:allreduce_coalesced` of a 1024-element float and a 1024-element bfloat16: 4 KiB
        // and 2 KiB. Only the first tensor was read: 4 KiB.
        let trace = small_trace(0, 1)
            .replace(
                r#""name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}"#,
                r#""name": "nccl:allreduce_coalesced", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Input Dims": [[1024], [1024]], "Input type": ["float", "c10::BFloat16"]}"#,
            )
            .replace("\"cat\": \"cpu_op\"", "\"cat\": \"user_annotation\"");
        let text = import_one(&trace).unwrap();
        assert!(text.contains("all_reduce = \"f32_6KiB\""), "{text}");
    }

    /// Rank `rank` of two, its all_reduce's `record_param_comms` replaced by the Work's `nccl:*`
    /// annotation `annotation` (name and args), as a trace without `record_param_comms` has it.
    fn two_rank_annotation_import(annotation: &str) -> String {
        let traces = [0, 1].map(|rank| {
                small_trace(rank, 2)
                    .replace(
                        r#""name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}"#,
                        &format!(r#""name": {annotation}"#),
                    )
                    .replace("\"cat\": \"cpu_op\"", "\"cat\": \"user_annotation\"")
        });
        import_two(&traces)
    }

    #[test]
    fn an_all_gather_annotation_is_sized_as_the_gathered_output() {
        // The Work's annotation lists its inputs only: an all_gather's is one rank's slice,
        // 512 KiB of two; the scenario's all_gather is of the gathered 1 MiB, as
        // `record_param_comms`'s `Out msg nelems` gives it.
        let text = two_rank_annotation_import(
            r#""nccl:_all_gather_base", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Input Dims": [[131072]], "Input type": ["float"]}"#,
        );
        assert!(text.contains("all_gather = \"f32_1MiB\""), "{text}");
        // A reduce_scatter's input is the whole.
        let text = two_rank_annotation_import(
            r#""nccl:_reduce_scatter_base", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Input Dims": [[262144]], "Input type": ["float"]}"#,
        );
        assert!(text.contains("reduce_scatter = \"f32_1MiB\""), "{text}");
    }

    #[test]
    fn a_coalesced_all_gather_annotation_is_imported_gathered() {
        // `nccl:all_gather_into_tensor_coalesced`, PyTorch 2.11's name of a coalescing block of
        // all_gather_into_tensor calls: two slices of 512 KiB and 256 KiB, gathered over two
        // ranks, 1.5 MiB.
        let text = two_rank_annotation_import(
            r#""nccl:all_gather_into_tensor_coalesced", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Input Dims": [[131072], [65536]], "Input type": ["float", "float"]}"#,
        );
        assert!(text.contains("all_gather = \"f32_1536KiB\""), "{text}");
    }

    #[test]
    fn a_mixed_dtype_coalesced_block_is_sized_from_its_work_s_annotation() {
        // `allreduce_coalesced` of a 1024-element float and a 1024-element bfloat16:
        // `record_param_comms` counts the block's 2048 elements in the first tensor's dtype,
        // 8 KiB; the Work's annotation inside it lists each tensor in its own, 6 KiB.
        const ALL_REDUCE: &str = r#""name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]"}},"#;
        let block = |rank: u32, comms: &str, annotation: &str| {
            small_trace(rank, 2).replace(
                ALL_REDUCE,
                &format!(
                    r#""name": "record_param_comms", "pid": 1, "tid": 1, "ts": 130.0, "dur": 30.0, "args": {comms}}},
{{"ph": "X", "cat": "user_annotation", "name": {annotation}, "pid": 1, "tid": 1, "ts": 132.0, "dur": 20.0, "args": {{"Input Dims": [[1024], [1024]], "Input type": ["float", "c10::BFloat16"]}}}},"#
                ),
            )
        };
        let import_two = |comms: &str, annotation: &str| {
            import_two(&[block(0, comms, annotation), block(1, comms, annotation)])
        };
        let text = import_two(
            r#"{"Collective name": "allreduce_coalesced", "dtype": "Float", "In msg nelems": 2048, "Out msg nelems": 2048, "Process Group Ranks": "[0, 1]"}"#,
            r#""nccl:allreduce_coalesced""#,
        );
        assert!(text.contains("all_reduce = \"f32_6KiB\""), "{text}");
        // An all_gather block's annotation lists the slices: 6 KiB gathered over two ranks.
        let text = import_two(
            r#"{"Collective name": "allgather_into_tensor_coalesced", "dtype": "Float", "In msg nelems": 2048, "Out msg nelems": 4096, "Process Group Ranks": "[0, 1]"}"#,
            r#""nccl:all_gather_into_tensor_coalesced""#,
        );
        assert!(text.contains("all_gather = \"f32_12KiB\""), "{text}");
    }

    #[test]
    fn a_collective_of_bytes_is_a_whole_number_of_scenario_elements() {
        // An all_reduce of 3 `Byte` elements: the scenario has no 1-byte dtype, so f32 of its
        // bytes, rounded up to one whole element (the Flight Recorder importer's rule).
        let trace = small_trace(0, 1).replace(
            r#""dtype": "Float", "In msg nelems": 262144, "Out msg nelems": 262144, "Process Group Ranks": "[0, 1]""#,
            r#""dtype": "Byte", "In msg nelems": 3, "Out msg nelems": 3, "Process Group Ranks": "[0]""#,
        );
        let text = import_one(&trace).unwrap();
        assert!(text.contains("all_reduce = \"f32_4B\""), "{text}");
        sim::scenario::parse("import.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    }

    #[test]
    fn refusals_say_what_is_wrong_and_where() {
        let syntax = import_one("{\"traceEvents\": [\n  {\"ph\": \"X\",]}").unwrap_err();
        assert_eq!(syntax.place.as_deref(), Some("2:14"));
        let no_cuda = import_one(r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}"#)
            .unwrap_err();
        assert!(no_cuda.message.contains("no CUDA activities"), "{no_cuda}");
        // Runtime calls show CUDA was recorded: a run whose GPU work never ended (a hang).
        let no_gpu_work = import_one(r#"{"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 2}]}"#)
            .unwrap_err();
        assert_eq!(no_gpu_work.message, "the trace has 1 CUDA runtime call but no GPU activity (no \"kernel\", \"gpu_memcpy\" or \"gpu_memset\" events): no GPU work ended while it was recorded, so there is no program to replay");
        let bad_ts = import_one(
            r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x", "dur": 2}]}"#,
        )
        .unwrap_err();
        assert_eq!(bad_ts.to_string(), "rank0.json:traceEvents[0]: error: \"k\" (kernel) needs numeric \"ts\" and \"dur\" in µs");
        let one = small_trace(0, 2);
        let twice = import(
            &[
                TraceFile {
                    name: "a/rank0.json",
                    text: &one,
                },
                TraceFile {
                    name: "b/rank0.json",
                    text: &one,
                },
            ],
            &KinetoOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            twice.message,
            "two traces of rank 0: a/rank0.json and b/rank0.json"
        );
        let huge_seq = small_trace(0, 1).replace(
            "\"Process Group Ranks\": \"[0, 1]\"",
            "\"Process Group Ranks\": \"[0]\", \"Seq\": 1000000000001",
        );
        assert_eq!(
            import_one(&huge_seq).unwrap_err().message,
            "all_reduce with Seq 1000000000001: c10dsim numbers a group's collectives up to 1000000000000"
        );
        let half = small_trace(0, 2);
        let missing = import_one(&half).unwrap_err();
        assert!(missing.message.contains("no trace of rank 1:"), "{missing}");
        // A large world with a few traces: the missing ranks as ranges, one short line.
        let pair = |rank| {
            small_trace(rank, 65_536).replace(
                "\"Process Group Ranks\": \"[0, 1]\"",
                "\"Process Group Ranks\": \"[2, 5]\"",
            )
        };
        let (two, five) = (pair(2), pair(5));
        let files = [("rank2.json", &two), ("rank5.json", &five)]
            .map(|(name, text)| TraceFile { name, text });
        let traces: Vec<Trace> = (files.iter())
            .flat_map(|file| Trace::parse_file(file).unwrap())
            .collect();
        assert_eq!(
            job_world_size(&traces).unwrap_err(),
            "world size 65536 but no trace of ranks 0-1,3-4,6-65535 (65,534 ranks): give one trace per rank"
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// One event of a generated trace: a category, a name, times and args drawn from values
    /// that stress the importer (huge, negative, odd names, unknown collectives, bad ranks).
    fn event() -> impl Strategy<Value = serde_json::Value> {
        let name = prop::sample::select(vec![
            "cudaLaunchKernel",
            "cudaMemcpyAsync",
            "cudaMemcpy",
            "cudaStreamWaitEvent",
            "cudaEventRecord",
            "cudaEventSynchronize",
            "cudaStreamSynchronize",
            "cudaDeviceSynchronize",
            "void a::b<1>(int)",
            "Memcpy DtoH (Device -> Pinned)",
            "record_param_comms",
            "ProfilerStep#1\n[x]",
            "nccl:all_reduce",
            "\"odd\\name\"",
        ]);
        let category = prop::sample::select(vec![
            "cuda_runtime",
            "kernel",
            "gpu_memcpy",
            "gpu_memset",
            "cpu_op",
            "user_annotation",
        ]);
        let collective =
            prop::sample::select(vec!["allreduce", "_allgather_base", "send", "barrier"]);
        let ranks = prop::sample::select(vec!["[0]", "[0, 1]", "[0, 0]", "[5]", "[]", "x"]);
        (
            name,
            category,
            prop_oneof![40 => 0.0..2000.0f64, 1 => Just(1e14), 1 => Just(-5.0)],
            prop_oneof![40 => 0.0..500.0f64, 1 => Just(1e11)],
            0i64..4,
            0i64..6,
            collective,
            ranks,
            prop_oneof![20 => 1u64..1_000_000, 1 => Just(u64::MAX / 2)],
            prop::collection::vec(0u64..300, 0..3),
        )
            .prop_map(
                |(name, cat, ts, dur, stream, correlation, collective, ranks, elements, grid)| {
                    json!({
                        "ph": "X", "cat": cat, "name": name, "tid": stream % 2, "ts": ts, "dur": dur,
                        "args": {
                            "stream": stream, "correlation": correlation, "grid": grid,
                            "Collective name": collective, "dtype": "BFloat16",
                            "In msg nelems": elements, "Out msg nelems": elements,
                            "Process Group Ranks": ranks, "Seq": elements,
                        }
                    })
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever a trace holds, the importer refuses it or writes a scenario that parses.
        #[test]
        fn an_import_parses_or_is_refused(
            events in prop::collection::vec(event(), 0..40),
            world in prop_oneof![3 => Just(1u32), 1 => Just(2u32)],
            bucket in prop::option::of(1u64..200_000_000),
        ) {
            let trace = json!({
                "distributedInfo": {"rank": 0, "world_size": world},
                "deviceProperties": [{"name": "NVIDIA H200\n", "numSms": 132}],
                "traceEvents": events,
            })
            .to_string();
            let options = KinetoOptions { bucket_bytes: bucket };
            let file = TraceFile { name: "p.json", text: &trace };
            if let Ok(text) = import(&[file], &options) {
                if let Err(error) = sim::scenario::parse("p.toml", &text) {
                    panic!("{error}\n{text}");
                }
            }
        }
    }
}
