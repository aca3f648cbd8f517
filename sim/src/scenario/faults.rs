//! Resolution of what goes wrong: `[[fault]]` tables, the watchdog's environment variables
//! (R26–R28) and functional collectives (R30), with file:line:column errors like every other
//! scenario check.
//!
//! Over 1,000 lines (about 1,050) with its tests, which parse whole scenarios through
//! [`super::parse`] and share its program and error helpers.

use super::raw::{RawFault, RawOp};
use super::*;

/// The Work of a functional collective's result `y` is named `wait_tensor(y)` (R30), as its
/// waits are in reports; the program has no name for it.
pub(super) const FUNCTIONAL_WORK_PREFIX: &str = "wait_tensor(";

/// A functional collective whose result no later op has read yet (R30).
#[derive(Clone)]
pub(super) struct PendingResult {
    result: TensorId,
    work: WorkId,
    ranks: Option<Vec<u32>>,
}

impl Resolver<'_> {
    /// Reads one of the watchdog's numeric variables into `env`; false if `key` is none of
    /// them.
    pub(super) fn watchdog_env(
        &self,
        env: &mut Env,
        key: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Result<bool> {
        let name = key.get_ref().as_str();
        let (min, max) = match name {
            "TORCH_NCCL_ASYNC_ERROR_HANDLING" => (0, 3),
            "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC" | "TORCH_NCCL_COORD_CHECK_MILSEC" => {
                (1, 86_400_000)
            }
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" | "TORCH_NCCL_NONBLOCKING_TIMEOUT" => (1, 86_400),
            _ => return Ok(false),
        };
        let number = match value.get_ref() {
            toml::Value::Integer(number) => Some(*number),
            toml::Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        }
        .filter(|number| (min..=max).contains(number))
        .ok_or_else(|| {
            self.error(
                value.span(),
                format!(
                    "{name} expects an integer between {min} and {max}, found {}",
                    value.get_ref()
                ),
            )
        })?;
        let ms = 1_000_000u64;
        match name {
            "TORCH_NCCL_ASYNC_ERROR_HANDLING" => {
                env.async_error_handling =
                    ErrorHandling::from_number(number).expect("checked range")
            }
            "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC" => env.wait_timeout_dump_ns = number as u64 * ms,
            "TORCH_NCCL_COORD_CHECK_MILSEC" => env.coord_check_ns = number as u64 * ms,
            "TORCH_NCCL_NONBLOCKING_TIMEOUT" => {
                env.nonblocking_timeout_ns = number as u64 * 1_000 * ms
            }
            _ => env.heartbeat_timeout_ns = number as u64 * 1_000 * ms,
        }
        env.raw.insert(name.to_string(), number.to_string());
        Ok(true)
    }

    pub(super) fn faults(
        &self,
        raw: &[Spanned<RawFault>],
        program: &ProgramBuilder,
        cluster: &Cluster,
        tensors: &[Tensor],
        repeat: u32,
    ) -> Result<Vec<Fault>> {
        let mut faults: Vec<Fault> = Vec::with_capacity(raw.len());
        for (index, spanned) in raw.iter().enumerate() {
            let fault = self.fault(spanned.get_ref(), program, cluster, tensors, repeat)?;
            // One place, one fault: a hang or a death stops the rank before the op, so a second
            // fault there never happens, and two mismatches would each replace the one call.
            let clash = faults.iter().enumerate().find_map(|(earlier, other)| {
                let same_place = (other.op, other.iteration) == (fault.op, fault.iteration);
                let rank = fault.ranks.iter().find(|rank| other.ranks.contains(rank));
                rank.filter(|_| same_place).map(|&rank| (earlier, rank))
            });
            if let Some((earlier, rank)) = clash {
                return Err(self.error(
                    spanned.span(),
                    format!(
                        "this [[fault]] strikes rank {rank} at {:?} in iteration {}, as the [[fault]] of line {} does; one fault per rank, op and iteration can happen (a hang or die stops the rank before the op, a mismatch replaces its call): keep one, and give a mismatch its collective, size and dtype together",
                        raw[index].get_ref().at.get_ref(),
                        fault.iteration,
                        self.line_of(&raw[earlier].span()),
                    ),
                ));
            }
            // A hang or a death stops the rank for good: a fault of that rank after it (a later
            // iteration, or a later op of its iteration) never happens.
            let stops = |fault: &Fault| matches!(fault.kind, FaultKind::Hang | FaultKind::Die);
            let after = |later: &Fault, first: &Fault| {
                (later.iteration, later.op) > (first.iteration, first.op)
            };
            let unreachable = faults.iter().enumerate().find_map(|(earlier, other)| {
                let rank = fault.ranks.iter().find(|rank| other.ranks.contains(rank))?;
                let order = if stops(other) && after(&fault, other) {
                    Some((other, &fault, earlier, true))
                } else if stops(&fault) && after(other, &fault) {
                    Some((&fault, other, earlier, false))
                } else {
                    None
                };
                order.map(|(stop, never, earlier, this_never)| {
                    (
                        stop.kind.key(),
                        stop.iteration,
                        never.iteration,
                        earlier,
                        this_never,
                        *rank,
                    )
                })
            });
            if let Some((stop, stop_iteration, never_iteration, earlier, this_never, rank)) =
                unreachable
            {
                let line = self.line_of(&raw[earlier].span());
                let message = if this_never {
                    format!(
                        "this [[fault]] never happens: the {stop} of the [[fault]] of line {line} stops rank {rank} for good in iteration {stop_iteration}, before this one's place (iteration {never_iteration}); keep the one that should happen"
                    )
                } else {
                    format!(
                        "this {stop} stops rank {rank} for good in iteration {stop_iteration}, so the [[fault]] of line {line} (iteration {never_iteration}, later) never happens; keep the one that should happen"
                    )
                };
                return Err(self.error(spanned.span(), message));
            }
            faults.push(fault);
        }
        Ok(faults)
    }

    /// `ranks` of a `[[fault]]` or `[[perturb]]` (`what` names the key) at the op labelled
    /// `label`: ranks of the cluster that run that op, since nothing happens on the others.
    pub(super) fn ranks_running(
        &self,
        ranks: &Spanned<Vec<i64>>,
        op: &Op,
        label: &Spanned<String>,
        cluster: &Cluster,
        what: &str,
    ) -> Result<Vec<u32>> {
        let list = self.rank_list(ranks, cluster.ranks, what)?;
        if let Some(rank) = list.iter().find(|&&rank| !op.runs_on(rank)) {
            return Err(self.error(
                ranks.span(),
                format!(
                    "{what}: rank {rank} does not run op {:?}, so nothing can go wrong there",
                    label.get_ref()
                ),
            ));
        }
        Ok(list)
    }

    fn fault(
        &self,
        raw: &RawFault,
        program: &ProgramBuilder,
        cluster: &Cluster,
        tensors: &[Tensor],
        repeat: u32,
    ) -> Result<Fault> {
        let op_index = *program.labels.get(raw.at.get_ref()).ok_or_else(|| {
            self.error(
                raw.at.span(),
                format!(
                    "fault.at names label {:?}, which no op has{}",
                    raw.at.get_ref(),
                    super::suggest::did_you_mean(
                        raw.at.get_ref(),
                        program.labels.keys().map(String::as_str)
                    )
                ),
            )
        })?;
        let op = &program.ops[op_index];
        let ranks = self.ranks_running(&raw.ranks, op, &raw.at, cluster, "fault.ranks")?;
        let iteration = match &raw.iteration {
            None => 0,
            Some(value) => self.count(value, "fault.iteration", 0, i64::from(repeat) - 1)? as u32,
        };
        // A mismatch replaces the op's first NCCL call (the one it is armed for): one tensor's,
        // a coalescing block's of all of them, or the first bucket's.
        let collective = match op.kind {
            OpKind::Collective { collective, .. } => {
                Some((collective, op.kind.call_sizes(tensors)[0]))
            }
            OpKind::Barrier { .. } => {
                Some((CollectiveKind::AllReduce, op.kind.call_sizes(tensors)[0]))
            }
            _ => None,
        };
        let issued_dtype = op.kind.call_dtype(tensors);
        let kind_name = raw.kind.get_ref().as_str();
        let mut allowed: &[&str] = &[];
        let kind = match kind_name {
            "die" => FaultKind::Die,
            "hang" => FaultKind::Hang,
            "skip" | "mismatch" | "async_error" | "watchdog_stuck" => {
                let Some((issued, issued_bytes)) = collective else {
                    return Err(self.error(
                        raw.at.span(),
                        format!(
                            "a {kind_name} fault needs a collective at {:?}, but that op is {}",
                            raw.at.get_ref(),
                            op.kind.key()
                        ),
                    ));
                };
                if let (
                    "skip",
                    OpKind::Collective {
                        work: Some(work), ..
                    }
                    | OpKind::Barrier {
                        work: Some(work), ..
                    },
                ) = (kind_name, &op.kind)
                {
                    return Err(self.error(
                        raw.kind.span(),
                        format!(
                            "a skip fault at {:?} would leave the later wait on Work {:?} without a Work; use kind = \"hang\" (the host stops before the op)",
                            raw.at.get_ref(),
                            program.works.names[*work]
                        ),
                    ));
                }
                match kind_name {
                    "skip" => FaultKind::Skip,
                    "watchdog_stuck" => FaultKind::WatchdogStuck,
                    "async_error" => {
                        allowed = &["after_us"];
                        FaultKind::AsyncError {
                            after_ns: self.optional_time_us(
                                &raw.after_us,
                                "fault.after_us",
                                0,
                            )?,
                        }
                    }
                    _ => {
                        allowed = &["collective", "size", "dtype"];
                        let collective = match &raw.collective {
                            None => issued,
                            Some(name) => CollectiveKind::from_key(name.get_ref()).ok_or_else(|| {
                                self.error(
                                    name.span(),
                                    format!(
                                        "unknown collective {:?}; expected one of {}",
                                        name.get_ref(),
                                        crate::collective::DESCRIPTORS.map(|d| d.key).join(", ")
                                    ),
                                )
                            })?,
                        };
                        let dtype = self.dtype_or(raw.dtype.as_ref(), issued_dtype)?;
                        // Without a size, the op's tensor as another dtype: as many elements.
                        let size_bytes = match (&raw.size, &raw.dtype) {
                            (Some(size), _) => self.fault_size(size, dtype)?,
                            (None, None) => issued_bytes,
                            (None, Some(_)) => {
                                issued_bytes.div_ceil(issued_dtype.size_bytes())
                                    * dtype.size_bytes()
                            }
                        };
                        if (collective, size_bytes, dtype) == (issued, issued_bytes, issued_dtype)
                        {
                            return Err(self.error(
                                raw.kind.span(),
                                "a mismatch fault needs collective = …, size = … or dtype = … differing from the op's",
                            ));
                        }
                        FaultKind::Mismatch {
                            collective,
                            size_bytes,
                            dtype,
                        }
                    }
                }
            }
            other => {
                return Err(self.error(
                    raw.kind.span(),
                    format!(
                        "unknown fault kind {other:?}; expected skip, hang, mismatch, die, async_error or watchdog_stuck"
                    ),
                ))
            }
        };
        let extras = [
            ("collective", raw.collective.as_ref().map(|v| v.span())),
            ("size", raw.size.as_ref().map(|v| v.span())),
            ("dtype", raw.dtype.as_ref().map(|v| v.span())),
            ("after_us", raw.after_us.as_ref().map(|v| v.span())),
        ];
        for (key, span) in extras {
            if let Some(span) = span.filter(|_| !allowed.contains(&key)) {
                return Err(
                    self.error(span, format!("{key} does not apply to a {kind_name} fault"))
                );
            }
        }
        Ok(Fault {
            ranks,
            op: op_index,
            iteration,
            kind,
        })
    }

    /// `fault.size`: a whole number of `dtype` elements, 1 B to 1 TiB.
    fn fault_size(&self, size: &Spanned<toml::Value>, dtype: DType) -> Result<u64> {
        let text = match size.get_ref() {
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(bytes) => bytes.to_string(),
            other => {
                return Err(self.error(
                    size.span(),
                    format!("fault.size expects a size such as \"2MiB\", found {other}"),
                ))
            }
        };
        match parse_size_bytes(&text) {
            Ok(bytes) if !(1..=1 << 40).contains(&bytes) => Err(self.error(
                size.span(),
                format!("fault.size must be between 1 B and 1 TiB, found {bytes} B"),
            )),
            Ok(bytes) if bytes % dtype.size_bytes() != 0 => Err(self.error(
                size.span(),
                format!(
                    "fault.size {bytes} B is not a whole number of {} elements",
                    dtype.as_str()
                ),
            )),
            Ok(bytes) => Ok(bytes),
            Err(message) => Err(self.error(size.span(), message)),
        }
    }

    /// `functional_all_reduce = "x"`, `result = "y"` (R30): an async all_reduce whose Work is
    /// waited on (`wait_tensor`) at the first later op that reads `y`, on the ranks that run
    /// it (`ranks`, of `total_ranks`).
    pub(super) fn functional_collective(
        &self,
        raw: &RawOp,
        ranks: &Option<Vec<u32>>,
        total_ranks: u32,
        names: &Names,
        program: &mut ProgramBuilder,
    ) -> Result<OpKind> {
        let input = raw.functional_all_reduce.as_ref().expect("present");
        let tensor = self.lookup(&names.tensors, input, "tensor", "[tensors]")?;
        let Some(result_name) = &raw.result else {
            return Err(self.error(
                input.span(),
                "functional_all_reduce needs result = \"…\": a tensor declared in [tensors] that receives the reduced copy",
            ));
        };
        let result = self.lookup(&names.tensors, result_name, "tensor", "[tensors]")?;
        // `fcol.all_reduce` takes one tensor and returns its clone (R30): the result is a tensor
        // of the input's size and dtype.
        let shape = |t: TensorId| {
            let size = crate::units::format_size(program.tensor_sizes[t]);
            (
                program.tensor_counts[t],
                size,
                program.tensor_dtypes[t].as_str(),
            )
        };
        let ((input_count, input_size, input_dtype), (result_count, result_size, result_dtype)) =
            (shape(tensor), shape(result));
        if input_count != 1 {
            return Err(self.error(
                input.span(),
                format!(
                    "functional_all_reduce takes one tensor, and {:?} is a list of {input_count}",
                    input.get_ref()
                ),
            ));
        }
        if (result_count, &result_size, result_dtype) != (1, &input_size, input_dtype) {
            return Err(self.error(
                result_name.span(),
                format!(
                    "the result of functional_all_reduce is a clone of its input {:?} \
                     ({input_size} {input_dtype}); {:?} is declared as {}{result_size} \
                     {result_dtype}",
                    input.get_ref(),
                    result_name.get_ref(),
                    if result_count == 1 {
                        String::new()
                    } else {
                        format!("a list of {result_count} x ")
                    },
                ),
            ));
        }
        let group = match &raw.group {
            None => 0,
            Some(name) => self.lookup(&names.groups, name, "group", "[groups]")?,
        };
        let work = program.works.intern(&format!(
            "{FUNCTIONAL_WORK_PREFIX}{})",
            result_name.get_ref()
        ));
        cover(&mut program.work_coverage, work, ranks);
        // The call rebinds `y` on its ranks; on the others an earlier call's result stays
        // pending.
        for pending in &mut program.pending_results {
            if pending.result == result {
                pending.ranks = Some(split_ranks(&pending.ranks, ranks, total_ranks).1);
            }
        }
        (program.pending_results).retain(|p| p.ranks.as_ref().is_none_or(|list| !list.is_empty()));
        program.pending_results.push(PendingResult {
            result,
            work,
            ranks: ranks.clone(),
        });
        Ok(OpKind::Collective {
            collective: CollectiveKind::AllReduce,
            tensor,
            group,
            async_op: true,
            work: Some(work),
            batch: crate::scenario::Batch::Each,
            result: Some(result),
        })
    }

    /// A Work name the program writes (`work`, `wait`, `is_completed`, `get_future`): not one
    /// of the form `wait_tensor(y)`, the Work of a functional collective's result, which Python
    /// holds no handle on (R30).
    pub(super) fn program_work_name(&self, name: &Spanned<String>) -> Result<()> {
        if !name.get_ref().starts_with(FUNCTIONAL_WORK_PREFIX) {
            return Ok(());
        }
        Err(self.error(
            name.span(),
            format!(
                "{:?}: names of the form wait_tensor(…) are the Works of functional collectives' results (R30), which the program has no handle on (a result's wait_tensor comes before its first use); use another name",
                name.get_ref()
            ),
        ))
    }

    /// R30: before an op that reads a pending functional result, the `wait_tensor` of its
    /// collective: the latest legal point, on the stream current at that op, on the ranks that
    /// run it (`ranks`, of `total_ranks`); on the others the result stays pending.
    pub(super) fn insert_tensor_waits(
        &self,
        raw_op: &Spanned<RawOp>,
        ranks: &Option<Vec<u32>>,
        total_ranks: u32,
        names: &Names,
        program: &mut ProgramBuilder,
    ) {
        if program.pending_results.is_empty() {
            return;
        }
        let raw = raw_op.get_ref();
        let read_names = raw.tensors_used();
        let read: Vec<TensorId> = read_names
            .filter_map(|name| names.tensors.get(name.get_ref()).copied())
            .collect();
        let stream = raw
            .stream
            .as_ref()
            .and_then(|name| names.streams.get(name.get_ref()).copied())
            .unwrap_or(program.current_stream);
        let line = self.line_of(&raw_op.span());
        let mut slot = 0;
        while slot < program.pending_results.len() {
            if !read.contains(&program.pending_results[slot].result) {
                slot += 1;
                continue;
            }
            let pending = &mut program.pending_results[slot];
            let (waiting, left) = split_ranks(&pending.ranks, ranks, total_ranks);
            let pending = if left.is_empty() {
                program.pending_results.remove(slot)
            } else {
                pending.ranks = Some(left);
                slot += 1;
                program.pending_results[slot - 1].clone()
            };
            if waiting.is_empty() {
                continue;
            }
            let result_name = &names_of(names, pending.result);
            program.ops.push(Op {
                index: program.ops.len(),
                label: Some(format!("wait_tensor({result_name})")),
                line,
                kind: OpKind::Wait {
                    work: pending.work,
                    timeout_ns: None,
                    previous_iteration: false,
                },
                stream,
                ranks: rank_set(waiting, total_ranks),
                reads: vec![pending.result],
                writes: Vec::new(),
                catch: false,
            });
        }
    }
}

impl Resolver<'_> {
    /// R30 across the loop's back edge: a result still unused when the program ends is waited
    /// on at its first use in the next iteration, which can come before its call (`x` in `y =
    /// fcol.all_reduce(x); x = fcol.all_reduce(y)`): the `wait_tensor` goes before that op, and
    /// does nothing in the first iteration, where no such Work exists yet. A call that binds
    /// the name again before any use drops the result unwaited, as Python does.
    /// `op_index_of_raw` is the index each raw op took among `program.ops`.
    pub(super) fn insert_carried_tensor_waits(
        &self,
        raw_ops: &[Spanned<RawOp>],
        op_index_of_raw: &[usize],
        total_ranks: u32,
        names: &Names,
        program: &mut ProgramBuilder,
    ) {
        let mut waits = Vec::new();
        for pending in std::mem::take(&mut program.pending_results) {
            // Each rank's first op that uses or binds the result, in program order.
            let mut left = pending.ranks.clone();
            for (raw_index, raw_op) in raw_ops.iter().enumerate() {
                let raw = raw_op.get_ref();
                let is_result = |name: &Spanned<String>| {
                    names.tensors.get(name.get_ref()) == Some(&pending.result)
                };
                let uses = raw.tensors_used().any(is_result);
                let binds = raw.functional_all_reduce.is_some() && raw.result.iter().any(is_result);
                if !(uses || binds) {
                    continue;
                }
                let at = op_index_of_raw[raw_index];
                let (reached, rest) = split_ranks(&left, &program.ops[at].ranks, total_ranks);
                if uses && !reached.is_empty() {
                    let ranks = Some(reached);
                    waits.push((
                        at,
                        PendingResult {
                            ranks,
                            ..pending.clone()
                        },
                    ));
                }
                if rest.is_empty() {
                    break;
                }
                left = Some(rest);
            }
        }
        // From the last place back, so that each insertion leaves the places before it as
        // they are.
        waits.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        for (at, pending) in waits {
            let user = &program.ops[at];
            let wait = Op {
                index: at,
                label: Some(format!("wait_tensor({})", names_of(names, pending.result))),
                line: user.line,
                kind: OpKind::Wait {
                    work: pending.work,
                    timeout_ns: None,
                    previous_iteration: true,
                },
                stream: user.stream,
                ranks: (pending.ranks).and_then(|ranks| rank_set(ranks, total_ranks)),
                reads: vec![pending.result],
                writes: Vec::new(),
                catch: false,
            };
            program.insert_op(wait);
        }
    }
}

/// Of `pending`'s ranks (all `total` when `None`), those that run an op on `ranks` (all when
/// `None`) and those that do not.
fn split_ranks(
    pending: &Option<Vec<u32>>,
    ranks: &Option<Vec<u32>>,
    total: u32,
) -> (Vec<u32>, Vec<u32>) {
    let runs = |rank: &u32| ranks.as_ref().is_none_or(|list| list.contains(rank));
    match pending {
        None => (0..total).partition(runs),
        Some(list) => list.iter().partition(|rank| runs(rank)),
    }
}

/// An op's `ranks` for `list` out of `total` ranks: `None` when it holds every one.
fn rank_set(list: Vec<u32>, total: u32) -> Option<Vec<u32>> {
    (list.len() < total as usize).then_some(list)
}

fn names_of(names: &Names, tensor: TensorId) -> String {
    names
        .tensors
        .iter()
        .find(|(_, &id)| id == tensor)
        .map_or_else(String::new, |(name, _)| name.clone())
}

#[cfg(test)]
mod tests {
    use crate::scenario::{parse, ErrorHandling, FaultKind, OpKind};

    const PROGRAM: &str = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";

    /// The line and column of an error, and its message.
    fn error(text: &str) -> (u32, u32, String) {
        let error = parse("f.toml", text).unwrap_err();
        (error.line, error.column, error.message)
    }

    #[test]
    fn an_async_barrier_names_its_work_which_a_skip_fault_would_leave_unmade() {
        let program = "[cluster]\nranks = 2\n[[op]]\nlabel = \"b\"\nbarrier = true\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
        let scenario = parse("f.toml", program).unwrap();
        assert!(matches!(
            scenario.ops[0].kind,
            OpKind::Barrier {
                group: 0,
                async_op: true,
                work: Some(0),
            }
        ));
        let (line, _, message) = error("[[op]]\nbarrier = true\nwork = \"w\"\n");
        assert_eq!(line, 3);
        assert!(message.contains("needs async_op = true"), "{message}");
        let (_, _, message) = error(&format!(
            "{program}[[fault]]\nranks = [1]\nat = \"b\"\nkind = \"skip\"\n"
        ));
        assert!(
            message.contains("would leave the later wait on Work \"w\" without a Work"),
            "{message}"
        );
    }

    #[test]
    fn faults_resolve_to_their_op_and_kind() {
        let text = format!(
            "{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\nsize = \"2MiB\"\n"
        );
        let scenario = parse("f.toml", &text).unwrap();
        assert_eq!(scenario.faults[0].op, 0);
        assert_eq!(
            scenario.faults[0].kind,
            FaultKind::Mismatch {
                collective: crate::scenario::CollectiveKind::AllReduce,
                size_bytes: 2 << 20,
                dtype: crate::scenario::DType::F32,
            }
        );
        // Another dtype alone: the op's tensor as that type, as many elements.
        let mismatch = |keys: &str| {
            let text = format!(
                "{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\n{keys}"
            );
            parse("f.toml", &text).unwrap().faults[0].kind.clone()
        };
        assert_eq!(
            mismatch("dtype = \"bf16\"\n"),
            FaultKind::Mismatch {
                collective: crate::scenario::CollectiveKind::AllReduce,
                size_bytes: 512 << 10,
                dtype: crate::scenario::DType::Bf16,
            }
        );
        assert_eq!(
            mismatch("dtype = \"bf16\"\nsize = \"1MiB\"\n"),
            FaultKind::Mismatch {
                collective: crate::scenario::CollectiveKind::AllReduce,
                size_bytes: 1 << 20,
                dtype: crate::scenario::DType::Bf16,
            }
        );
    }

    #[test]
    fn a_barrier_s_own_four_bytes_are_no_mismatch() {
        // ProcessGroupNCCL's barrier all_reduces one f32 (R14): 4 bytes, as it issues them.
        let text = "[cluster]\nranks = 2\n[[op]]\nlabel = \"bar\"\nbarrier = true\n\
                    [[fault]]\nranks = [1]\nat = \"bar\"\nkind = \"mismatch\"\n";
        let error = parse("f.toml", &format!("{text}size = \"4B\"\n")).unwrap_err();
        assert!(
            error.to_string().contains("differing from the op's"),
            "{error}"
        );
        assert!(parse("f.toml", &format!("{text}size = \"8B\"\n")).is_ok());
    }

    #[test]
    fn a_mismatch_on_a_tensor_list_replaces_its_first_call_whole() {
        // Three 4 KiB tensors: the fault hits the op's first NCCL call, a coalescing block's
        // one call of all three (12 KiB), a bucketed op's first bucket (8 KiB under a 10 KB
        // cap), or one tensor's call.
        let mismatch = |batch: &str, keys: &str| {
            let text = format!(
                "[cluster]\nranks = 2\n[tensors]\ng = {{ size = \"4KiB\", count = 3 }}\n\
                 [[op]]\nlabel = \"l\"\nall_reduce = \"g\"\n{batch}\n\
                 [[fault]]\nranks = [1]\nat = \"l\"\nkind = \"mismatch\"\n{keys}"
            );
            parse("f.toml", &text).map(|s| s.faults[0].kind.clone())
        };
        let issued = |batch: &str, keys: &str| match mismatch(batch, keys).unwrap() {
            FaultKind::Mismatch { size_bytes, .. } => size_bytes,
            other => panic!("{other:?}"),
        };
        let block = "coalesce = true";
        assert_eq!(issued(block, "dtype = \"bf16\"\n"), 6 << 10);
        assert_eq!(issued(block, "collective = \"broadcast\"\n"), 12 << 10);
        assert_eq!(issued("bucket = \"10KB\"", "dtype = \"bf16\"\n"), 4 << 10);
        assert_eq!(issued("", "dtype = \"bf16\"\n"), 2 << 10);
        // The block's own size is no mismatch.
        let error = mismatch(block, "size = \"12KiB\"\n").unwrap_err();
        assert!(
            error.message.contains("differing from the op's"),
            "{}",
            error.message
        );
    }

    #[test]
    fn bad_faults_name_their_line_and_column() {
        // The [[fault]] table opens on line 13: ranks on 14, at on 15, then the next keys.
        let fault = |body: &str| format!("{PROGRAM}[[fault]]\n{body}");
        let (line, column, message) =
            error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"explode\"\n"));
        assert_eq!((line, column), (16, 8));
        assert!(
            message.contains("expected skip, hang, mismatch"),
            "{message}"
        );
        let (line, column, message) = error(&fault("ranks = [1]\nat = \"nope\"\nkind = \"die\"\n"));
        assert_eq!((line, column), (15, 6));
        assert!(message.contains("no op has"), "{message}");
        let (line, _, message) = error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\n"));
        assert_eq!(line, 16);
        assert!(message.contains("differing from the op's"), "{message}");
        let (line, _, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f32\"\n",
        ));
        assert_eq!(line, 16);
        assert!(
            message.contains("size = … or dtype = … differing from the op's"),
            "{message}"
        );
        let (line, column, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f64\"\n",
        ));
        assert_eq!((line, column), (17, 9));
        assert!(
            message.contains("unknown dtype \"f64\"; expected f32, bf16 or f16"),
            "{message}"
        );
        let (line, _, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ndtype = \"f32\"\nsize = 6\n",
        ));
        assert_eq!(line, 18);
        assert!(
            message.contains("fault.size 6 B is not a whole number of f32 elements"),
            "{message}"
        );
        let (line, _, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\nkind = \"hang\"\ndtype = \"bf16\"\n",
        ));
        assert_eq!(line, 17);
        assert!(
            message.contains("dtype does not apply to a hang fault"),
            "{message}"
        );
        let (line, _, message) = error(&fault("ranks = [1]\nat = \"ar\"\nkind = \"skip\"\n"));
        assert_eq!(line, 16);
        assert!(message.contains("use kind = \"hang\""), "{message}");
        let (line, _, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\nkind = \"die\"\nafter_us = 5\n",
        ));
        assert_eq!(line, 17);
        assert!(
            message.contains("after_us does not apply to a die fault"),
            "{message}"
        );
        let (line, _, message) = error(&fault(
            "ranks = [1]\nat = \"ar\"\niteration = 1\nkind = \"die\"\n",
        ));
        assert_eq!(line, 16);
        assert!(
            message.contains("fault.iteration must be between 0 and 0"),
            "{message}"
        );
    }

    #[test]
    fn watchdog_variables_are_checked_and_read() {
        let text = format!("[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 2\nTORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = \"60\"\n{PROGRAM}");
        let env = parse("f.toml", &text).unwrap().env;
        assert_eq!(env.async_error_handling, ErrorHandling::CleanUpOnly);
        assert_eq!(env.heartbeat_timeout_ns, 60_000_000_000);
        let (line, column, message) = error(&format!(
            "[env]\nTORCH_NCCL_ASYNC_ERROR_HANDLING = 4\n{PROGRAM}"
        ));
        assert_eq!((line, column), (2, 35));
        assert!(message.contains("between 0 and 3"), "{message}");
        let (line, _, message) = error(&format!("[groups.world]\ntimeout_s = -1\n{PROGRAM}"));
        assert_eq!(line, 2);
        assert!(message.contains("groups.timeout_s"), "{message}");
        // PyTorch keeps whole milliseconds: 0.5 ms would be 0 ms there, 1.0005 s 1000 ms.
        let (line, column, message) =
            error(&format!("[groups.world]\ntimeout_s = 0.0005\n{PROGRAM}"));
        assert_eq!((line, column), (2, 13));
        assert!(
            message
                .contains("groups.timeout_s must be a whole number of milliseconds, found 0.0005")
                && message.contains("PyTorch would time out after 0 ms"),
            "{message}"
        );
        let (_, _, message) = error(&format!("[groups.world]\ntimeout_s = 1.0005\n{PROGRAM}"));
        assert!(message.contains("after 1000 ms"), "{message}");
        // Whole milliseconds that a binary fraction cannot hold exactly are kept.
        let groups = |timeout_s: &str| {
            parse(
                "f.toml",
                &format!("[groups.world]\ntimeout_s = {timeout_s}\n{PROGRAM}"),
            )
            .unwrap()
            .groups
        };
        assert_eq!(groups("1.001")[0].timeout_ns, 1_001_000_000);
        assert_eq!(groups("0.001")[0].timeout_ns, 1_000_000);
    }

    #[test]
    fn a_group_s_first_seq_num_is_read_and_checked() {
        let first = |text: &str| {
            let groups = parse("f.toml", &format!("{text}{PROGRAM}")).unwrap().groups;
            groups.iter().map(|g| g.first_seq_num).collect::<Vec<_>>()
        };
        assert_eq!(first(""), [1]);
        let tp = "[groups.tp]\nranks = [0]\nfirst_seq_num = 2001\n";
        assert_eq!(
            first(&format!("[groups.world]\nfirst_seq_num = 7\n{tp}")),
            [7, 2001]
        );
        for (value, column) in [("0", 17), ("1000000000001", 17)] {
            let (line, at, message) = error(&format!(
                "[groups.world]\nfirst_seq_num = {value}\n{PROGRAM}"
            ));
            assert_eq!((line, at), (2, column));
            assert!(
                message.contains(&format!(
                    "groups.world.first_seq_num must be between 1 and 1000000000000, found {value}"
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn a_functional_collective_waits_at_the_first_read_of_its_result_r30() {
        let text = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\ngemm = [64, 64, 64]\nreads = [\"x\"]\n[[op]]\nlabel = \"use\"\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nkernel = { us = 5 }\nreads = [\"y\"]\n";
        let scenario = parse("f.toml", text).unwrap();
        let keys: Vec<&str> = scenario.ops.iter().map(|op| op.kind.key()).collect();
        // One wait_tensor, right before the first reader; none before the second.
        assert_eq!(keys, ["all_reduce", "gemm", "wait", "kernel", "kernel"]);
        assert!(matches!(
            scenario.ops[0].kind,
            OpKind::Collective {
                async_op: true,
                work: Some(_),
                ..
            }
        ));
        assert_eq!(scenario.ops[2].display_name(), "wait_tensor(y)");
        let (line, _, message) =
            error("[tensors]\nx = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\n");
        assert_eq!(line, 4);
        assert!(message.contains("needs result"), "{message}");
    }

    #[test]
    fn each_rank_waits_for_a_functional_result_at_its_own_first_use_r30() {
        // Rank 0 uses y at use0, rank 1 only at use1: each rank's wait_tensor comes before its
        // own first use, in the iteration and across the loop's back edge.
        let head = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n";
        let call = "[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n";
        let uses = "[[op]]\nlabel = \"use0\"\nranks = [0]\nkernel = { us = 5 }\nreads = [\"y\"]\n[[op]]\nlabel = \"use1\"\nranks = [1]\nkernel = { us = 5 }\nreads = [\"y\"]\n";
        let waits = |text: &str| -> Vec<(String, Option<Vec<u32>>, bool)> {
            (parse("f.toml", text).unwrap().ops.iter())
                .map(|op| {
                    let previous = matches!(
                        op.kind,
                        OpKind::Wait {
                            previous_iteration: true,
                            ..
                        }
                    );
                    (op.display_name(), op.ranks.clone(), previous)
                })
                .collect()
        };
        let wait =
            |ranks: u32, previous| ("wait_tensor(y)".to_string(), Some(vec![ranks]), previous);
        let use_on = |rank: u32| (format!("use{rank}"), Some(vec![rank]), false);
        assert_eq!(
            waits(&format!("{head}{call}{uses}"))[1..],
            [wait(0, false), use_on(0), wait(1, false), use_on(1)]
        );
        assert_eq!(
            waits(&format!("repeat = 2\n{head}{uses}{call}"))[..4],
            [wait(0, true), use_on(0), wait(1, true), use_on(1)]
        );
    }

    #[test]
    fn a_call_on_some_ranks_leaves_the_others_result_pending_r30() {
        // `ar0` rebinds y on rank 0 only: rank 1's y is still `ar`'s result, whose wait_tensor
        // comes before its use, as rank 0's for `ar0`'s.
        let text = "[cluster]\nranks = 2\n[groups.solo]\nranks = [0]\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nlabel = \"ar\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"ar0\"\ngroup = \"solo\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"use\"\nkernel = { us = 5 }\nreads = [\"y\"]\n";
        let ops: Vec<(String, Option<Vec<u32>>)> = (parse("f.toml", text).unwrap().ops.iter())
            .map(|op| (op.display_name(), op.ranks.clone()))
            .collect();
        let wait = |rank: u32| ("wait_tensor(y)".to_string(), Some(vec![rank]));
        assert_eq!(ops[2..], [wait(1), wait(0), ("use".to_string(), None)]);
    }

    #[test]
    fn the_program_cannot_name_a_functional_result_s_work_r30() {
        // `wait_tensor(y)` is the Work of the result y: a Work the program names so would be
        // taken for it (and y's wait_tensor would wait on that Work), and a wait on it is a
        // wait Python has no handle for.
        let head = "[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\nz = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n";
        for (program, column) in [
            (
                "[[op]]\nall_reduce = \"z\"\nasync_op = true\nwork = \"wait_tensor(y)\"\n",
                8,
            ),
            (
                "[[op]]\nbarrier = true\nasync_op = true\nwork = \"wait_tensor(q)\"\n",
                8,
            ),
            ("[[op]]\nwait = \"wait_tensor(y)\"\n", 8),
            ("[[op]]\nis_completed = \"wait_tensor(y)\"\n", 16),
        ] {
            let (line, at, message) = error(&format!("{head}{program}"));
            let lines = program.lines().count() as u32;
            assert_eq!((line, at), (9 + lines, column), "{program}");
            assert!(
                message.contains("are the Works of functional collectives' results (R30)"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_functional_result_is_a_clone_of_one_input_tensor_r30() {
        let program = |x: &str, y: &str| {
            format!("[cluster]\nranks = 2\n[tensors]\nx = {x}\ny = {y}\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n")
        };
        let (line, column, message) = error(&program("\"4MiB\"", "\"1MiB\""));
        assert_eq!((line, column), (8, 10), "{message}");
        assert!(
            message.contains("clone of its input \"x\" (4MiB f32); \"y\" is declared as 1MiB f32"),
            "{message}"
        );
        let (_, _, message) = error(&program(
            "\"4MiB\"",
            "{ size = \"4MiB\", dtype = \"bf16\" }",
        ));
        assert!(message.contains("declared as 4MiB bf16"), "{message}");
        let (_, _, message) = error(&program("\"4MiB\"", "{ size = \"4MiB\", count = 2 }"));
        assert!(
            message.contains("declared as a list of 2 x 4MiB f32"),
            "{message}"
        );
        let (line, column, message) = error(&program("{ size = \"4MiB\", count = 3 }", "\"4MiB\""));
        assert_eq!((line, column), (7, 25), "{message}");
        assert!(
            message.contains("takes one tensor, and \"x\" is a list of 3"),
            "{message}"
        );
        assert!(parse("f.toml", &program("\"4MiB\"", "\"4MiB\"")).is_ok());
    }

    #[test]
    fn a_functional_result_exists_from_its_call_unless_named_before_r30() {
        let text = |before: &str| {
            format!("[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{before}[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nkernel = {{ us = 5 }}\nreads = [\"y\"]\n")
        };
        // Made by the call, and alive past the program's end (the next iteration's call
        // rebinds it): no `free` asked.
        let scenario = parse("f.toml", &text("")).unwrap();
        assert!(scenario.tensors[1].dynamic);
        // Written before the call: a tensor of its own before the call binds the name.
        let scenario = parse(
            "f.toml",
            &text("[[op]]\nkernel = { us = 5 }\nwrites = [\"y\"]\n"),
        )
        .unwrap();
        assert!(!scenario.tensors[1].dynamic);
        // `y = fcol.all_reduce(y)`: the call reads y before it binds the result, so y is the
        // program's from the start.
        let in_place = "[cluster]\nranks = 2\n[tensors]\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"y\"\n";
        assert!(!parse("f.toml", in_place).unwrap().tensors[0].dynamic);
    }

    #[test]
    fn every_collective_given_a_functional_result_waits_for_it_first_r30() {
        let program = |uses: &str| {
            format!("[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n[[op]]\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n{uses}")
        };
        // Each program, and the index its wait_tensor(y) takes: right before the op given y.
        let uses = [
            ("[[op]]\nall_reduce = \"y\"\n", 1),
            ("[[op]]\nall_gather = \"y\"\n", 1),
            ("[[op]]\nreduce_scatter = \"y\"\n", 1),
            ("[[op]]\nbroadcast = \"y\"\n", 1),
            ("[[op]]\nall_to_all = \"y\"\n", 1),
            ("[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n", 1),
            ("[[op]]\nranks = [0]\nsend = \"y\"\npeer = 1\n[[op]]\nranks = [1]\nrecv = \"x\"\npeer = 0\n", 1),
            ("[[op]]\nranks = [1]\nsend = \"x\"\npeer = 0\n[[op]]\nranks = [0]\nrecv = \"y\"\npeer = 1\n", 2),
            ("[[op]]\nbatch_isend_irecv = [{ send = \"y\", shift = 1 }, { recv = \"x\", shift = -1 }]\n", 1),
        ];
        for (used, index) in uses {
            let scenario =
                parse("f.toml", &program(used)).unwrap_or_else(|e| panic!("{used}: {}", e.message));
            let waits: Vec<usize> = (scenario.ops.iter())
                .filter(|op| op.display_name() == "wait_tensor(y)")
                .map(|op| op.index)
                .collect();
            assert_eq!(waits, [index], "{used}");
        }
        // A kernel writing the result's storage is not a use: no wait before it.
        let scenario = parse(
            "f.toml",
            &program("[[op]]\nkernel = { us = 5 }\nwrites = [\"y\"]\n"),
        )
        .unwrap();
        assert!(scenario
            .ops
            .iter()
            .all(|op| op.display_name() != "wait_tensor(y)"));
    }

    #[test]
    fn a_result_unused_at_the_program_end_is_waited_at_its_first_use_in_the_next_iteration_r30() {
        // y = fcol.all_reduce(x); use(y); x = fcol.all_reduce(y): the next iteration's first
        // call uses x, the result the previous iteration left pending.
        let program = |repeat: u32, first: &str| {
            format!("repeat = {repeat}\n[cluster]\nranks = 4\n[tensors]\nx = \"1MiB\"\ny = \"1MiB\"\n{first}[[op]]\nlabel = \"ar_x\"\nfunctional_all_reduce = \"x\"\nresult = \"y\"\n[[op]]\nlabel = \"use_y\"\nkernel = {{ us = 5 }}\nreads = [\"y\"]\n[[op]]\nlabel = \"ar_y\"\nranks = [0, 1]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n")
        };
        let scenario = parse("f.toml", &program(2, "")).unwrap();
        let names: Vec<String> = scenario.ops.iter().map(|op| op.display_name()).collect();
        assert_eq!(
            names,
            ["wait_tensor(x)", "ar_x", "wait_tensor(y)", "use_y", "ar_y"]
        );
        let wait = &scenario.ops[0];
        assert!(matches!(
            wait.kind,
            OpKind::Wait {
                previous_iteration: true,
                ..
            }
        ));
        // On the ranks of the call that made it, named after the op that moved.
        assert_eq!(wait.ranks, Some(vec![0, 1]));
        assert_eq!(wait.line, scenario.ops[1].line);
        assert!(scenario.ops.iter().enumerate().all(|(i, op)| op.index == i));
        let labelled = |label: &str| {
            let text = format!(
                "{}[[perturb]]\nranks = [0]\nbefore = \"{label}\"\nhost_delay_us = 1\n",
                program(2, "")
            );
            parse("f.toml", &text).unwrap().perturbations[0].before_op
        };
        assert_eq!((labelled("ar_x"), labelled("ar_y")), (1, 4));
        // One iteration has no next one; a call that binds x again before any use drops the
        // pending result unwaited.
        for scenario in [
            parse("f.toml", &program(1, "")).unwrap(),
            parse(
                "f.toml",
                &program(2, "[[op]]\nfunctional_all_reduce = \"y\"\nresult = \"x\"\n"),
            )
            .unwrap(),
        ] {
            assert!(scenario.ops.iter().all(|op| !matches!(
                op.kind,
                OpKind::Wait {
                    previous_iteration: true,
                    ..
                }
            )));
        }
    }

    #[test]
    fn two_faults_on_one_rank_op_and_iteration_are_refused_at_the_second() {
        let fault =
            |kind: &str| format!("[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"{kind}\"\n");
        let (hang, die) = (fault("hang"), fault("die"));
        let shrink = fault("mismatch") + "dtype = \"bf16\"\n";
        let swap = fault("mismatch") + "collective = \"broadcast\"\n";
        for (first, second) in [(&hang, &die), (&die, &hang), (&shrink, &swap)] {
            let (line, column, message) = error(&format!("repeat = 2\n{PROGRAM}{first}{second}"));
            let second_line = 14 + first.lines().count() as u32;
            assert_eq!((line, column), (second_line, 1), "{message}");
            assert!(
                message.contains("rank 1 at \"ar\" in iteration 0, as the [[fault]] of line 14"),
                "{message}"
            );
        }
        // Another rank, or another iteration after a fault that does not stop the rank, is
        // another place.
        let other_rank = die.replace("[1]", "[0]");
        let other_iteration = die.clone() + "iteration = 1\n";
        for (first, second) in [(&hang, &other_rank), (&shrink, &other_iteration)] {
            let text = format!("repeat = 2\n{PROGRAM}{first}{second}");
            assert_eq!(parse("f.toml", &text).unwrap().faults.len(), 2);
        }
    }

    #[test]
    fn a_fault_after_a_hang_or_death_of_its_rank_is_refused_as_never_happening() {
        let fault = |kind: &str, iteration: u32| {
            format!(
                "[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"{kind}\"\niteration = {iteration}\n"
            )
        };
        // Listed after the hang: refused at itself.
        let text = format!(
            "repeat = 3\n{PROGRAM}{}{}",
            fault("hang", 0),
            fault("die", 2)
        );
        let (line, _, message) = error(&text);
        assert_eq!(line, 19, "{message}");
        assert!(
            message.contains("this [[fault]] never happens: the hang of the [[fault]] of line 14 stops rank 1 for good in iteration 0"),
            "{message}"
        );
        // Listed before the death that stops the rank first: refused at the death.
        let text = format!(
            "repeat = 3\n{PROGRAM}{}dtype = \"bf16\"\n{}",
            fault("mismatch", 2),
            fault("die", 1)
        );
        let (line, _, message) = error(&text);
        assert_eq!(line, 20, "{message}");
        assert!(
            message.contains("this die stops rank 1 for good in iteration 1, so the [[fault]] of line 14 (iteration 2, later) never happens"),
            "{message}"
        );
        // A fault before the hang happens.
        let text = format!(
            "repeat = 3\n{PROGRAM}{}dtype = \"bf16\"\n{}",
            fault("mismatch", 0),
            fault("hang", 1)
        );
        assert_eq!(parse("f.toml", &text).unwrap().faults.len(), 2);
    }

    #[test]
    fn a_perturb_on_a_rank_that_does_not_run_the_op_is_refused_as_a_fault_is() {
        let program =
            "[cluster]\nranks = 2\n[[op]]\nlabel = \"k\"\nranks = [0]\nkernel = { us = 10 }\n";
        for (table, what) in [
            (
                "[[perturb]]\nranks = [1]\nbefore = \"k\"\nhost_delay_us = 5\n",
                "perturb.ranks",
            ),
            (
                "[[fault]]\nranks = [1]\nat = \"k\"\nkind = \"hang\"\n",
                "fault.ranks",
            ),
        ] {
            let (line, column, message) = error(&format!("{program}{table}"));
            assert_eq!((line, column), (8, 9), "{message}");
            assert!(
                message.contains(&format!("{what}: rank 1 does not run op \"k\"")),
                "{message}"
            );
        }
    }

    #[test]
    fn a_mismatch_fault_names_every_collective_it_accepts() {
        let (line, column, message) = error(&format!(
            "{PROGRAM}[[fault]]\nranks = [1]\nat = \"ar\"\nkind = \"mismatch\"\ncollective = \"all_to_al\"\n"
        ));
        assert_eq!((line, column), (17, 14));
        assert!(
            message.contains("unknown collective \"all_to_al\"; expected one of all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send, recv, batch_isend_irecv"),
            "{message}"
        );
    }
}
