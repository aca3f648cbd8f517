//! Unit tests of the sweep: points, axes, shards and the errors of a bad sweep.

use super::*;

const BASE: &str = "seed = 7\n[cluster]\nranks = 2\n[tensors]\nx = \"1MiB\"\n\
    [[op]]\nlabel = \"ar\"\nall_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n\
    [[op]]\nlabel = \"finish\"\nwait = \"w\"\n";

fn sweep(extra: &str, cli: &[&str]) -> Result<Sweep, ScenarioError> {
    let cli: Vec<AxisArg> = cli.iter().map(|a| AxisArg::parse(a).unwrap()).collect();
    Sweep::parse("s.toml", &format!("{BASE}{extra}"), &cli)
}

#[test]
fn splitmix64_is_the_reference_sequence() {
    // The first outputs of SplitMix64 seeded with 0 (Vigna's reference implementation:
    // 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4), top bit cleared.
    assert_eq!(point_seed(0, 0), 0x6220_a839_7b1d_cdaf);
    assert_eq!(point_seed(0, 1), 0x6e78_9e6a_a1b9_65f4);
    assert_ne!(point_seed(1, 0), point_seed(0, 0));
}

#[test]
fn product_in_file_order_last_axis_fastest() {
    let s = sweep(
        "[sweep]\n\"tensors.x\" = [\"1KiB\", \"1MiB\", \"64MiB\"]\n\"cluster.ranks\" = [2, 4]\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.point_count(), 6);
    let cells: Vec<Vec<String>> = (0..6).map(|i| s.point(i).values).collect();
    assert_eq!(cells[0], ["1KiB", "2"]);
    assert_eq!(cells[1], ["1KiB", "4"]);
    assert_eq!(cells[5], ["64MiB", "4"]);
    let scenario = s.scenario(&s.point(5)).unwrap();
    assert_eq!(scenario.cluster.ranks, 4);
    assert_eq!(scenario.seed, point_seed(7, 5));
    assert_eq!(s.base_scenario().unwrap().seed, 7);
}

#[test]
fn zipped_axes_advance_together_and_replace_ops() {
    let s = sweep(
        "[sweep]\n\"cluster.ranks\" = [2, 4]\n[sweep.zip.mode]\nvalues = [\"sync\", \"async\"]\n\
         \"op.ar\" = [{ all_reduce = \"x\" }, { all_reduce = \"x\", async_op = true, work = \"w\" }]\n\
         \"op.finish\" = [{ device_sync = true }, { wait = \"w\" }]\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.columns(), ["cluster.ranks", "mode"]);
    assert_eq!(s.point_count(), 4);
    let point = s.point(2);
    assert_eq!(point.values, ["4", "sync"]);
    let scenario = s.scenario(&point).unwrap();
    assert_eq!(scenario.ops[0].display_name(), "ar");
    assert_eq!(scenario.ops[1].kind.key(), "device_sync");
}

#[test]
fn dotted_keys_need_no_quotes() {
    let s = sweep(
        "[sweep]\ncluster.ranks = [2, 4]\ntensors.x = [\"1KiB\"]\n\
         [sweep.zip.size]\nvalues = [\"small\"]\nop.ar.async_op = [true]\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.columns(), ["cluster.ranks", "tensors.x", "size"]);
    assert_eq!(s.point(1).overrides[2].path, "op.ar.async_op");
}

#[test]
fn a_zip_without_values_shows_each_path() {
    let s = sweep(
        "[sweep.zip.size]\n\"cluster.ranks\" = [2, 4]\n\"tensors.x\" = [\"1KiB\", \"2KiB\"]\n",
        &["tensors.x=4KiB,8KiB"],
    )
    .unwrap();
    assert_eq!(s.columns(), ["cluster.ranks", "tensors.x"]);
    assert_eq!(s.point(1).values, ["4", "8KiB"]);
    let err = sweep(
        "[sweep.zip.size]\n\"cluster.ranks\" = [2, 4]\n\"tensors.x\" = [\"1KiB\", \"2KiB\"]\n",
        &["tensors.x=4KiB"],
    )
    .unwrap_err();
    assert!(err.message.contains("needs 2 values"), "{err}");
}

#[test]
fn command_line_axes_add_replace_and_fix() {
    let s = sweep(
        "[sweep]\n\"tensors.x\" = [\"1KiB\", \"1MiB\"]\n",
        &["tensors.x=2MiB,4MiB,8MiB", "cluster.ranks=2,4", "repeat=3"],
    )
    .unwrap();
    assert_eq!(s.columns(), ["tensors.x", "cluster.ranks"]);
    assert_eq!(s.point_count(), 6);
    assert_eq!(s.point(5).values, ["8MiB", "4"]);
    assert_eq!(s.scenario(&s.point(0)).unwrap().repeat, 3);
    let gemm = AxisArg::parse("op.g.gemm=[1,2,3], [4,5,6]").unwrap();
    assert_eq!(gemm.values, ["[1,2,3]", "[4,5,6]"]);
    let names = AxisArg::parse(r#"name="a,b","c\"d",'e\',f"#).unwrap();
    assert_eq!(names.values, [r#""a,b""#, r#""c\"d""#, r"'e\'", "f"]);
}

#[test]
fn a_labelled_zipped_axis_takes_new_values_only_with_new_labels() {
    let zip = "[sweep.zip.size]\nvalues = [\"small\", \"large\"]\n\
               \"tensors.x\" = [\"1KiB\", \"1MiB\"]\n";
    // New values under the old labels would name each point by what it did not run.
    let error = sweep(zip, &["tensors.x=2MiB,4MiB"]).unwrap_err();
    assert!(
        error
            .message
            .contains("\"tensors.x\" is in the zipped axis \"size\"")
            && error.message.contains("--set size=LABEL1,LABEL2"),
        "{}",
        error.message
    );
    // With new labels, in either order.
    for cli in [
        ["tensors.x=2MiB,4MiB", "size=two,four"],
        ["size=two,four", "tensors.x=2MiB,4MiB"],
    ] {
        let s = sweep(zip, &cli).unwrap();
        assert_eq!(s.columns(), ["size"]);
        assert_eq!(s.point(1).values, ["four"]);
        let scenario = s.scenario(&s.point(1)).unwrap();
        assert_eq!(scenario.tensors[0].size_bytes, 4 << 20);
    }
    // New labels alone relabel the file's values; they come one per value.
    assert_eq!(sweep(zip, &["size=a,b"]).unwrap().point(0).values, ["a"]);
    let error = sweep(zip, &["size=a,b,c"]).unwrap_err();
    assert!(
        error.message.contains("needs 2 labels, found 3"),
        "{}",
        error.message
    );
}

#[test]
fn sweep_errors_name_line_and_column() {
    let err = sweep("[sweep]\n\"tensors.x\" = \"1KiB\"\n", &[]).unwrap_err();
    assert_eq!((err.line, err.column), (15, 15), "{err}");
    assert!(err.message.contains("must be a list"), "{err}");
    let err = sweep("[sweep]\n\"cluster.ranks\" = []\n", &[]).unwrap_err();
    assert_eq!((err.line, err.column), (15, 19), "{err}");
    let err = sweep(
        "[sweep.zip.m]\n\"cluster.ranks\" = [2, 4]\n\"tensors.x\" = [\"1KiB\"]\n",
        &[],
    )
    .unwrap_err();
    assert_eq!((err.line, err.column), (16, 1), "{err}");
    assert!(err.message.contains("equal lengths"), "{err}");
    let err = sweep(
        "[sweep.zip.\"a\\nb\"]\nvalues = [\"p\"]\n\"cluster.ranks\" = [2]\n",
        &[],
    )
    .unwrap_err();
    assert!(err.message.contains("holds a control character"), "{err}");
    assert_eq!((err.line, err.column), (14, 12), "{err}");
    let err = sweep("[sweep]\n\"op.nope.gemm\" = [[1, 1, 1]]\n", &[]).unwrap_err();
    assert!(err.message.contains("no [[op]] has label"), "{err}");
    assert_eq!((err.line, err.column), (15, 1), "{err}");
}

#[test]
fn a_zipped_axis_named_like_a_path_axis_is_refused_at_the_second_name() {
    let path_axis = "\"tensors.x\" = [\"1KiB\", \"1MiB\"]\n";
    let zip = "[sweep.zip.\"tensors.x\"]\nvalues = [\"a\", \"b\"]\n\"cluster.ranks\" = [2, 4]\n";
    // The zipped axis second: at its name.
    let err = sweep(&format!("[sweep]\n{path_axis}{zip}"), &[]).unwrap_err();
    assert!(err.message.contains("\"tensors.x\" appears twice"), "{err}");
    assert_eq!((err.line, err.column), (16, 12), "{err}");
    // The path axis second: at its key.
    let err = sweep(&format!("{zip}[sweep]\n{path_axis}"), &[]).unwrap_err();
    assert!(err.message.contains("\"tensors.x\" appears twice"), "{err}");
    assert_eq!((err.line, err.column), (18, 1), "{err}");
}

#[test]
fn a_zipped_axis_named_like_a_scenario_path_is_refused_at_its_name() {
    for name in [
        "tensors.x",
        "seed",
        "env.TORCH_NCCL_BLOCKING_WAIT",
        "cluster.ranks",
        "op.ar.async_op",
        "machine",
    ] {
        let zip = format!("[sweep.zip.\"{name}\"]\nvalues = [\"a\", \"b\"]\nrepeat = [2, 3]\n");
        // `--set NAME=…` is not taken as new labels (the CSV would show values the points did
        // not run with), and the name is refused without it too.
        let set = format!("{name}=1KiB,2KiB");
        let refusals = [
            sweep(&zip, &[set.as_str()]).unwrap_err(),
            sweep(&zip, &[]).unwrap().check_zip_names(&[]).unwrap_err(),
        ];
        for err in refusals {
            assert!(
                err.message.starts_with(&format!(
                    "zipped axis {name:?} is named like a scenario path"
                )),
                "{err}"
            );
            assert_eq!((err.line, err.column), (14, 12), "{err}");
        }
    }
    // A plain name, or one that only looks like a path (a metric's), is the axis's own.
    for name in ["mode", "ar.kernel_us"] {
        let zip = format!("[sweep.zip.\"{name}\"]\nvalues = [\"a\", \"b\"]\nrepeat = [2, 3]\n");
        let s = sweep(&zip, &[&format!("{name}=c,d")]).unwrap();
        assert_eq!(s.point(1).values, ["d"]);
        s.check_zip_names(&[]).unwrap();
    }
}

#[test]
fn a_misspelt_op_label_names_the_nearest_one() {
    let set = |path: &str| Override {
        path: path.to_string(),
        value: "true".to_string(),
    };
    let err = apply_overrides_with_ops(BASE, &[set("op.finsh.device_sync")]).unwrap_err();
    assert_eq!(
        err.message,
        "--set op.finsh.device_sync=true: no [[op]] has label = \"finsh\"; did you mean \"finish\"?"
    );
    let err = apply_overrides_with_ops(BASE, &[set("op.zzzzzz.device_sync")]).unwrap_err();
    assert_eq!(
        err.message,
        "--set op.zzzzzz.device_sync=true: no [[op]] has label = \"zzzzzz\""
    );
}

#[test]
fn an_invalid_combination_fails_only_its_point() {
    let s = sweep("[sweep]\n\"tensors.x\" = [\"1KiB\", \"1KB2\"]\n", &[]).unwrap();
    assert!(s.scenario(&s.point(0)).is_ok());
    let err = s.scenario(&s.point(1)).unwrap_err();
    assert!(err.path.contains("[point 1: tensors.x=\"1KB2\"]"), "{err}");
    assert!(err.line > 0, "{err}");
}

#[test]
fn shards_partition_the_points() {
    let shard = Shard::parse("1/3").unwrap();
    assert_eq!(shard.indices(8).collect::<Vec<_>>(), [1, 4, 7]);
    assert_eq!(shard.len(8), 3);
    assert_eq!(Shard::parse("2/3").unwrap().len(8), 2);
    let mut all: Vec<u64> = (0..3)
        .flat_map(|i| Shard { index: i, count: 3 }.indices(8))
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..8).collect::<Vec<_>>());
    assert!(Shard::parse("3/3").is_err());
    assert!(Shard::parse("x").is_err());
}

#[test]
fn an_axis_no_value_of_which_is_valid_is_refused_by_name() {
    let error = sweep("", &["env.TORCH_NCCL_BLOCKING_WIAT=0,1"]).unwrap_err();
    assert!(
        error
            .message
            .starts_with("sweep axis env.TORCH_NCCL_BLOCKING_WIAT: none of its values"),
        "{error}"
    );
    // The culprit is named even when another axis comes first.
    let error = sweep("", &["cluster.ranks=2,4", "op.ar.async_op=false,false"]).unwrap_err();
    assert!(
        error.message.starts_with("sweep axis op.ar.async_op:"),
        "{error}"
    );
    // One bad value among good ones fails only its points.
    assert!(sweep("", &["op.ar.async_op=true,false"]).is_ok());
}

#[test]
fn an_error_of_the_file_or_a_fixed_set_is_not_put_on_an_axis() {
    let axis = "[sweep]\n\"tensors.x\" = [\"1KiB\", \"1MiB\"]\n";
    // A one-value --set that writes a new table, or a misspelt key: named as that --set.
    let error = sweep(axis, &["bogus.key=1"]).unwrap_err();
    assert_eq!((error.line, error.path.as_str()), (0, "s.toml"));
    assert!(
        error
            .message
            .starts_with("--set bogus.key=1: unknown field `bogus`"),
        "{error}"
    );
    let error = sweep(axis, &["cluster.rnaks=4"]).unwrap_err();
    assert!(
        error
            .message
            .starts_with("--set cluster.rnaks=4: unknown field `rnaks`; did you mean `ranks`?"),
        "{error}"
    );
    // A typo in the file itself: at its line and column in the file, no axis named.
    let typo = BASE.replace("ranks = 2", "rnaks = 2");
    let cli = [AxisArg::parse("repeat=2,3").unwrap()];
    let error = Sweep::parse("s.toml", &format!("{typo}{axis}"), &cli).unwrap_err();
    assert_eq!((error.line, error.column), (3, 1), "{error}");
    assert!(
        error.message.starts_with("unknown field `rnaks`"),
        "{error}"
    );
    // An axis at fault is still named, its error placed on the file's line.
    let error = sweep(axis, &["env.TORCH_NCCL_BLOCKING_WIAT=0,1"]).unwrap_err();
    assert!(
        error
            .message
            .starts_with("sweep axis env.TORCH_NCCL_BLOCKING_WIAT:"),
        "{error}"
    );
}

#[test]
fn a_torch_version_on_the_command_line_is_a_string_though_it_looks_like_a_number() {
    let s = sweep("", &["torch=2.5,2.12"]).unwrap();
    let cells: Vec<Vec<String>> = (0..2).map(|i| s.point(i).values).collect();
    assert_eq!(cells, [["2.5"], ["2.12"]]);
    assert_ne!(
        s.scenario(&s.point(0)).unwrap().torch,
        s.scenario(&s.point(1)).unwrap().torch
    );
    let scenario = |version: &str| {
        let text = crate::sweep::apply_overrides_with_ops(
            BASE,
            &[Override::parse(&format!("torch={version}")).unwrap()],
        )
        .unwrap();
        crate::scenario::parse("s.toml", &text).map(|scenario| scenario.torch)
    };
    assert_ne!(scenario("2.5").unwrap(), scenario("2.12").unwrap());
    // 2.10 stays "2.10" (a float would read 2.1) and is refused by name.
    let error = scenario("2.10").unwrap_err();
    assert!(error.message.contains("\"2.10\""), "{}", error.message);
}

#[test]
fn a_file_axis_no_value_of_which_is_valid_is_placed_at_its_key() {
    let error = sweep("[sweep]\n\"bogus.key\" = [1, 2]\n", &[]).unwrap_err();
    let line = BASE.lines().count() as u32 + 2;
    assert_eq!(
        (error.path.as_str(), error.line, error.column),
        ("s.toml", line, 1)
    );
    assert!(
        error
            .message
            .starts_with("sweep axis bogus.key: none of its values"),
        "{}",
        error.message
    );
}

#[test]
fn a_key_varied_by_two_axes_is_refused_at_the_second() {
    // Two named zips both set tensors.x: the column would show the first zip's value while
    // the point ran with the second's.
    let error = sweep(
        "[sweep.zip.a]\nvalues = [\"p\", \"q\"]\n\"tensors.x\" = [\"1MiB\", \"4MiB\"]\n\
         [sweep.zip.b]\nvalues = [\"x\", \"y\"]\n\"tensors.x\" = [\"2MiB\", \"8MiB\"]\n",
        &[],
    )
    .unwrap_err();
    assert!(
        error
            .message
            .contains("sweep key \"tensors.x\" is varied by two axes"),
        "{}",
        error.message
    );
    assert_eq!((error.line, error.column), (19, 1));
    // A key and a part of it overlap too, here through the command line.
    let error = sweep(
        "[sweep]\n\"tensors.x\" = [\"1MiB\", \"2MiB\"]\n",
        &["tensors.x.size=1KiB,2KiB"],
    )
    .unwrap_err();
    assert!(
        error
            .message
            .contains("\"tensors.x.size\" overlaps \"tensors.x\""),
        "{}",
        error.message
    );
}

#[test]
fn an_axis_on_the_sweep_table_itself_is_refused() {
    let error = sweep("[sweep]\n\"sweep.x\" = [1, 2]\n", &[]).unwrap_err();
    assert!(
        error
            .message
            .contains("would edit the [sweep] table itself"),
        "{}",
        error.message
    );
    assert_eq!((error.line, error.column), (15, 1));
    let error = sweep("", &["sweep.zip.a.x=1,2"]).unwrap_err();
    assert!(
        error.message.contains("\"sweep.zip.a.x\""),
        "{}",
        error.message
    );
    let error = sweep("", &["sweep.x=1"]).unwrap_err();
    assert!(
        error.message.contains("would edit the [sweep] table"),
        "{}",
        error.message
    );
}

#[test]
fn a_points_ops_keep_the_files_line_numbers() {
    // `repeat` is not in the file: setting it inserts a line above the ops, which a finding
    // naming an op's line (`ar, line 6`) must not count.
    let s = sweep("[sweep]\nrepeat = [2, 3]\n", &["warmup=1"]).unwrap();
    let scenario = s.scenario(&s.point(0)).unwrap();
    let lines: Vec<u32> = scenario.ops.iter().map(|op| op.line).collect();
    assert_eq!(lines, [6, 11]);
}

#[test]
fn a_quoted_key_in_a_path_names_a_tensor_or_label_holding_a_dot() {
    let base = "[cluster]\nranks = 2\n[tensors]\n\"a.b\" = \"1MiB\"\n\
        [[op]]\nlabel = \"x.y\"\nall_reduce = \"a.b\"\n";
    let size_of = |sweep: &Sweep, index: u64| {
        let scenario = sweep.scenario(&sweep.point(index)).unwrap();
        let async_op = matches!(
            scenario.ops[0].kind,
            crate::scenario::OpKind::Collective { async_op: true, .. }
        );
        (scenario.tensors[0].size_bytes, async_op)
    };
    // `[sweep]` written with the path as one quoted key, as a TOML dotted key, and on the
    // command line: one column, one spelling.
    for (sweep_table, cli) in [
        (
            "[sweep]\n'tensors.\"a.b\"' = [\"1KiB\", \"2KiB\"]\n",
            vec![],
        ),
        ("[sweep]\ntensors.\"a.b\" = [\"1KiB\", \"2KiB\"]\n", vec![]),
        ("", vec![AxisArg::parse("tensors.'a.b'=1KiB,2KiB").unwrap()]),
    ] {
        let mut cli = cli;
        cli.push(AxisArg::parse("op.\"x.y\".async_op=true").unwrap());
        let sweep = Sweep::parse("s.toml", &format!("{base}{sweep_table}"), &cli).unwrap();
        assert_eq!(sweep.columns(), ["tensors.\"a.b\""], "{sweep_table}");
        assert_eq!(sweep.size_columns(), [true]);
        assert_eq!(size_of(&sweep, 1), (2048, true), "{sweep_table}");
    }
    let error = sweep("[sweep]\n'tensors.\"x' = [\"1KiB\"]\n", &[]).unwrap_err();
    assert!(error.message.contains("never closed"), "{error}");
    assert!(error.line > 0, "{error}");
}

#[test]
fn a_column_quotes_every_key_that_is_not_a_bare_key() {
    // TOML's bare keys are A-Za-z0-9_- alone: a name holding a comma or a space used to be
    // written bare (`tensors.a,b`), where one holding a quote was quoted.
    let base = "[cluster]\nranks = 2\n[tensors]\n\"a,b\" = \"1MiB\"\n\"a b\" = \"1MiB\"\n\
        \"c\\\"d\" = \"1MiB\"\nplain_name-2 = \"1MiB\"\n[[op]]\nall_reduce = \"a,b\"\n";
    let sweep_table = "[sweep]\ntensors.\"a,b\" = [\"1KiB\"]\ntensors.\"a b\" = [\"1KiB\"]\n\
        tensors.'c\"d' = [\"1KiB\"]\ntensors.plain_name-2 = [\"1KiB\"]\n";
    let sweep = Sweep::parse("s.toml", &format!("{base}{sweep_table}"), &[]).unwrap();
    let columns = sweep.columns();
    assert_eq!(
        columns,
        [
            "tensors.\"a,b\"",
            "tensors.\"a b\"",
            "tensors.\"c\\\"d\"",
            "tensors.plain_name-2"
        ]
    );
    // Each column reads back, as `--set` and `[sweep]` read a path, to the tensor it names.
    for (column, name) in columns.iter().zip(["a,b", "a b", "c\"d", "plain_name-2"]) {
        let keys = crate::scenario::path_keys(column).unwrap();
        assert_eq!(keys, ["tensors", name], "{column}");
    }
    assert_eq!(sweep.size_columns(), [true; 4]);
}
