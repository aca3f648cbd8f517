//! Resolution of what goes wrong: `[[fault]]` tables, the watchdog's environment variables
//! (R26–R28) and functional collectives (R30), with file:line:column errors like every other
//! scenario check.
//!
//! Its unit tests, in `faults/tests.rs`, parse whole scenarios through [`super::parse`].

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
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" => (1, 86_400),
            // PyTorch waits for good where it is 0 or less (`nccl_nonblocking_timeout() > 0`):
            // any such integer.
            "TORCH_NCCL_NONBLOCKING_TIMEOUT" => (i64::MIN, 86_400),
            _ => return Ok(false),
        };
        let number = match value.get_ref() {
            toml::Value::Integer(number) => Some(*number),
            toml::Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        }
        .filter(|number| (min..=max).contains(number))
        .ok_or_else(|| {
            let range = match min < 0 {
                true => format!("an integer of at most {max} (0 or less: no timeout)"),
                false => format!("an integer between {min} and {max}"),
            };
            self.error(
                value.span(),
                format!("{name} expects {range}, found {}", value.get_ref()),
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
                env.nonblocking_timeout_ns = (number > 0).then(|| number as u64 * 1_000 * ms)
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
mod tests;
