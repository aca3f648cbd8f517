//! Resolution of the program's process-group setup (R8): `init_process_group` and `new_group`
//! ops, the groups they create, and the rule that no collective comes before its group exists;
//! file:line:column errors like every other scenario check.

use super::raw::RawOp;
use super::*;

impl Resolver<'_> {
    /// `init_process_group = true` (with `device_id`): once, on every rank.
    pub(super) fn init_process_group_op(
        &self,
        raw: &RawOp,
        index: usize,
        ranks: &Option<Vec<u32>>,
        program: &mut ProgramBuilder,
    ) -> Result<OpKind> {
        let flag = raw.init_process_group.as_ref().expect("present");
        if !*flag.get_ref() {
            return Err(self.error(
                    flag.span(),
                    "init_process_group = false is not an operation; write init_process_group = true or drop the op",
                ));
        }
        if ranks.is_some() {
            return Err(self.error(
                flag.span(),
                "init_process_group runs on every rank; it takes no ranks = …",
            ));
        }
        if let Some(first) = program.init_op {
            return Err(self.error(
                    flag.span(),
                    format!("init_process_group is called twice (op {} on line {} is the first); PyTorch raises on a second call", first + 1, program.ops[first].line),
                ));
        }
        program.init_op = Some(index);
        Ok(OpKind::InitProcessGroup {
            device_id: raw.device_id.as_ref().is_some_and(|d| *d.get_ref()),
        })
    }

    /// `new_group = "g"`: once, on every rank, after `init_process_group` if there is one.
    pub(super) fn new_group_op(
        &self,
        raw: &RawOp,
        index: usize,
        ranks: &Option<Vec<u32>>,
        names: &Names,
        groups: &[Group],
        program: &mut ProgramBuilder,
    ) -> Result<OpKind> {
        let name = raw.new_group.as_ref().expect("present");
        let group = self.lookup(&names.groups, name, "group", "[groups]")?;
        if group == 0 {
            return Err(self.error(
                    name.span(),
                    "the world group is made by init_process_group; new_group makes one of the other [groups]",
                ));
        }
        if ranks.is_some() {
            return Err(self.error(
                    name.span(),
                    "new_group runs on every rank (PyTorch needs every process to call it, members or not); it takes no ranks = …",
                ));
        }
        if let Some(first) = program.created.get(&group) {
            return Err(self.error(
                name.span(),
                format!(
                    "group {:?} is created twice (the first new_group is on line {})",
                    name.get_ref(),
                    program.ops[*first].line
                ),
            ));
        }
        if program.init_planned && program.init_op.is_none() {
            return Err(self.error(
                name.span(),
                "new_group before init_process_group: the default group must exist first",
            ));
        }
        let world_eager = match program.init_op {
            Some(init) => matches!(
                program.ops[init].kind,
                OpKind::InitProcessGroup { device_id: true }
            ),
            None => groups[0].eager_init,
        };
        if groups[group].eager_init && !world_eager {
            return Err(self.error(
                    name.span(),
                    format!("group {:?} is eager_init, but the world's communicator is lazy: PyTorch creates a new group's communicator eagerly only when init_process_group had a device_id (device_id = true on the init_process_group op, or [groups.world] eager_init = true)", name.get_ref()),
                ));
        }
        program.created.insert(group, index);
        Ok(OpKind::NewGroup { group })
    }

    /// A communication op on a group the program creates later (`init_process_group`,
    /// `new_group`) is an error: in PyTorch the group does not exist yet.
    pub(super) fn check_group_exists(
        &self,
        op: &Op,
        span: Range<usize>,
        declared_groups: usize,
        groups: &[Group],
        program: &ProgramBuilder,
    ) -> Result<()> {
        let Some((_, group)) = op.kind.collective() else {
            return Ok(());
        };
        // A send/recv pair's communicator hangs off the world group.
        let group = if group < declared_groups { group } else { 0 };
        if group == 0 && program.init_planned && program.init_op.is_none() {
            return Err(self.error(
                span,
                format!(
                    "{} before init_process_group: the default group does not exist yet",
                    op.kind.key()
                ),
            ));
        }
        if program.created_planned.contains(&group) && !program.created.contains_key(&group) {
            return Err(self.error(
                span,
                format!(
                    "{} on group {:?} before its new_group op: the group does not exist yet",
                    op.kind.key(),
                    groups[group].name
                ),
            ));
        }
        Ok(())
    }

    /// Once every op is resolved: the groups the program creates say so, and a program that
    /// calls `init_process_group` creates every other group with `new_group`.
    pub(super) fn setup_ops(
        &self,
        raw_ops: &[Spanned<RawOp>],
        groups: &mut [Group],
        program: &ProgramBuilder,
    ) -> Result<()> {
        if let Some(init) = program.init_op {
            // The op's place among the raw ops: waits the resolver placed may come before it.
            let span = (raw_ops.iter())
                .find(|op| op.get_ref().init_process_group.is_some())
                .expect("init_op is a raw op's")
                .span();
            if groups[0].eager_init {
                return Err(self.error(
                    span,
                    "the program calls init_process_group, so [groups.world] eager_init cannot say how: write device_id = true on the init_process_group op instead",
                ));
            }
            if let Some(missing) = groups[1..].iter().enumerate().find(|(offset, group)| {
                !group.point_to_point && !program.created.contains_key(&(offset + 1))
            }) {
                return Err(self.error(
                    span,
                    format!("group {:?} is never created: a program that calls init_process_group makes its other groups with new_group; add [[op]] new_group = {:?} after it", missing.1.name, missing.1.name),
                ));
            }
            let OpKind::InitProcessGroup { device_id } = program.ops[init].kind else {
                unreachable!("init_op is an init_process_group op")
            };
            groups[0].eager_init = device_id;
            groups[0].created_by = Some(init);
        }
        // With a device-bound world PyTorch creates every new group's communicator in
        // new_group (a split of the world's), whatever the program intends: measured on the
        // H200 for a group not asked to be eager (docs/torch.md#process-group-setup).
        let world_eager = groups[0].eager_init;
        for (&group, &op) in &program.created {
            groups[group].created_by = Some(op);
            groups[group].eager_init |= world_eager;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::parse;

    #[test]
    fn a_rank_listed_twice_in_a_group_is_refused_at_the_list() {
        let text = "[cluster]\nranks = 4\n[groups]\npair = { ranks = [0, 2, 0] }\n[tensors]\n\
                    x = \"1MiB\"\n[[op]]\nall_reduce = \"x\"\ngroup = \"pair\"\n";
        let error = parse("g.toml", text).unwrap_err();
        assert_eq!((error.line, error.column), (4, 18));
        assert_eq!(error.message, "groups.pair.ranks: rank 0 is listed twice");
    }

    #[test]
    fn an_unknown_name_lists_twenty_known_ones_and_counts_the_rest() {
        let tensors: String = (0..25).map(|i| format!("t{i:02} = \"1KiB\"\n")).collect();
        let text =
            format!("[cluster]\nranks = 2\n[tensors]\n{tensors}[[op]]\nall_reduce = \"t99\"\n");
        let message = parse("g.toml", &text).unwrap_err().message;
        assert!(message.contains("t00, t01"), "{message}");
        assert!(message.contains("t19, … (5 more)"), "{message}");
        assert!(!message.contains("t20"), "{message}");
    }
}
