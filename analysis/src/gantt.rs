//! The Gantt chart of a Timeline (SVG text, written by hand): a row per rank's host and per
//! stream, kernels as bars and cross-stream waits as arrows. Pure: callers write the result.

use crate::plot::number_tick;
use sim::timeline::{KernelClass, Timeline};
use std::fmt::Write;

/// The most ranks a Gantt chart draws (the first ones); the rest are named in a note.
pub const GANTT_MAX_RANKS: usize = 16;

const GANTT_LABEL_WIDTH_PX: f64 = 190.0;
const GANTT_PLOT_WIDTH_PX: f64 = 1200.0;
const GANTT_ROW_HEIGHT_PX: f64 = 22.0;
const GANTT_TOP_PX: f64 = 40.0;

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `ticks` ticks over `span`.
fn tick_step(span: f64, ticks: f64) -> f64 {
    let raw = (span / ticks).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The Timeline as a Gantt chart: per rank a host row (host calls) and a row per stream
/// (kernels: compute blue, communication orange, sleep grey), with an arrow for each
/// cross-stream wait from where the source stream's event fired to where the waiting stream
/// was released (R5, R10a, R12). Times in µs from the start of the run.
pub fn timeline_svg(timeline: &Timeline) -> String {
    let ranks = &timeline.ranks[..timeline.ranks.len().min(GANTT_MAX_RANKS)];
    let end_ns = ranks
        .iter()
        .flat_map(|r| {
            r.host
                .iter()
                .map(|h| h.end_ns)
                .chain(r.kernels.iter().map(|k| k.end_ns))
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let x = |ns: u64| GANTT_LABEL_WIDTH_PX + ns as f64 / end_ns as f64 * GANTT_PLOT_WIDTH_PX;
    let rows: usize = ranks.iter().map(|r| 1 + r.streams.len()).sum();
    let height = GANTT_TOP_PX + rows as f64 * GANTT_ROW_HEIGHT_PX + 50.0;
    let width = GANTT_LABEL_WIDTH_PX + GANTT_PLOT_WIDTH_PX + 20.0;
    let op_name = |op: u32| {
        timeline
            .ops
            .get(op as usize)
            .map_or_else(|| format!("op {op}"), |o| o.name.clone())
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"##
    );
    svg.push_str(
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#c0392b"/></marker></defs>
<rect width="100%" height="100%" fill="white"/>
"##,
    );
    let mut title = format!(
        "{}: {}, {} — host calls, kernels (compute, communication, sleep) and stream waits (arrows)",
        timeline.scenario.name,
        crate::text::counted(u64::from(timeline.scenario.ranks), "rank"),
        crate::text::counted(u64::from(timeline.scenario.repeat), "iteration")
    );
    if timeline.ranks.len() > ranks.len() {
        let _ = write!(title, "; the first {} ranks shown", ranks.len());
    }
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="14">{}</text>"#,
        escape(&title)
    );
    let mut next_row = 0usize;
    for rank in ranks {
        let host_y = GANTT_TOP_PX + next_row as f64 * GANTT_ROW_HEIGHT_PX;
        next_row += 1;
        let streams_y: Vec<f64> = (0..rank.streams.len())
            .map(|i| GANTT_TOP_PX + (next_row + i) as f64 * GANTT_ROW_HEIGHT_PX)
            .collect();
        next_row += rank.streams.len();
        let _ = writeln!(
            svg,
            r##"<text x="6" y="{}">rank {} host</text>"##,
            host_y + 15.0,
            rank.rank
        );
        for (stream, y) in rank.streams.iter().zip(&streams_y) {
            let _ = writeln!(
                svg,
                r##"<text x="6" y="{}">rank {} {}</text><line x1="{GANTT_LABEL_WIDTH_PX}" x2="{}" y1="{}" y2="{}" stroke="#eeeeee"/>"##,
                y + 15.0,
                rank.rank,
                escape(&stream.name),
                GANTT_LABEL_WIDTH_PX + GANTT_PLOT_WIDTH_PX,
                y + GANTT_ROW_HEIGHT_PX / 2.0,
                y + GANTT_ROW_HEIGHT_PX / 2.0
            );
        }
        for call in &rank.host {
            let _ = writeln!(
                svg,
                r##"<rect x="{:.2}" y="{}" width="{:.2}" height="{}" fill="#7f8c8d"><title>{} iteration {}: host {:.3}–{:.3} µs</title></rect>"##,
                x(call.start_ns),
                host_y + 5.0,
                (x(call.end_ns) - x(call.start_ns)).max(0.5),
                GANTT_ROW_HEIGHT_PX - 10.0,
                escape(&op_name(call.op)),
                call.iteration,
                call.start_ns as f64 / 1e3,
                call.end_ns as f64 / 1e3
            );
        }
        for kernel in &rank.kernels {
            let color = match kernel.class {
                KernelClass::Compute => "#2e86c1",
                KernelClass::Communication => "#e67e22",
                KernelClass::Sleep => "#95a5a6",
            };
            let y = streams_y[usize::from(kernel.stream)];
            let _ = writeln!(
                svg,
                r##"<rect x="{:.2}" y="{}" width="{:.2}" height="{}" fill="{color}"><title>{} iteration {}: {:.3}–{:.3} µs</title></rect>"##,
                x(kernel.start_ns),
                y + 3.0,
                (x(kernel.end_ns) - x(kernel.start_ns)).max(0.5),
                GANTT_ROW_HEIGHT_PX - 6.0,
                escape(&op_name(kernel.op)),
                kernel.iteration,
                kernel.start_ns as f64 / 1e3,
                kernel.end_ns as f64 / 1e3
            );
        }
        for wait in &rank.stream_waits {
            if wait.source_stream == wait.waiting_stream {
                continue;
            }
            let from_y = streams_y[usize::from(wait.source_stream)] + GANTT_ROW_HEIGHT_PX / 2.0;
            let to_y = streams_y[usize::from(wait.waiting_stream)] + GANTT_ROW_HEIGHT_PX / 2.0;
            let _ = writeln!(
                svg,
                r##"<line x1="{:.2}" y1="{from_y}" x2="{:.2}" y2="{to_y}" stroke="#c0392b" stroke-width="1" marker-end="url(#arrow)"><title>{} iteration {}: stream wait, event at {:.3} µs, released at {:.3} µs</title></line>"##,
                x(wait.source_ns),
                x(wait.released_ns),
                escape(&op_name(wait.op)),
                wait.iteration,
                wait.source_ns as f64 / 1e3,
                wait.released_ns as f64 / 1e3
            );
        }
    }
    let axis_y = GANTT_TOP_PX + next_row as f64 * GANTT_ROW_HEIGHT_PX + 8.0;
    let end_us = end_ns as f64 / 1e3;
    let step = tick_step(end_us, 10.0);
    let _ = writeln!(
        svg,
        r##"<line x1="{GANTT_LABEL_WIDTH_PX}" x2="{}" y1="{axis_y}" y2="{axis_y}" stroke="black"/>"##,
        GANTT_LABEL_WIDTH_PX + GANTT_PLOT_WIDTH_PX
    );
    let mut tick = 0.0;
    while tick <= end_us {
        let tx = GANTT_LABEL_WIDTH_PX + tick / end_us * GANTT_PLOT_WIDTH_PX;
        let _ = writeln!(
            svg,
            r##"<line x1="{tx:.2}" x2="{tx:.2}" y1="{axis_y}" y2="{}" stroke="black"/><text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"##,
            axis_y + 5.0,
            axis_y + 18.0,
            number_tick(tick)
        );
        tick += step;
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle">time (µs)</text>"##,
        GANTT_LABEL_WIDTH_PX + GANTT_PLOT_WIDTH_PX / 2.0,
        axis_y + 36.0
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(1000.0, 10.0), 100.0);
        assert_eq!(tick_step(1500.0, 10.0), 200.0);
    }

    #[test]
    fn the_gantt_chart_has_a_row_per_stream_and_arrows_for_waits() {
        let text = "[cluster]\nranks = 2\n[tensors]\nx = \"64MiB\"\n[[op]]\nlabel = \"ar\"\n\
                    all_reduce = \"x\"\nasync_op = true\nwork = \"w\"\n[[op]]\nwait = \"w\"\n";
        let scenario = sim::scenario::parse("g.toml", text).unwrap();
        let timeline = sim::engine::simulate(&scenario);
        let svg = timeline_svg(&timeline);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        for rank in &timeline.ranks {
            assert!(svg.contains(&format!(">rank {} host<", rank.rank)));
            for stream in &rank.streams {
                assert!(svg.contains(&format!(">rank {} {}<", rank.rank, stream.name)));
            }
        }
        // syncStream (R10a) and wait() (R12): two cross-stream waits per rank.
        let waits: usize = timeline
            .ranks
            .iter()
            .flat_map(|r| &r.stream_waits)
            .filter(|w| w.source_stream != w.waiting_stream)
            .count();
        assert_eq!(waits, 4);
        assert_eq!(svg.matches("marker-end=\"url(#arrow)\"").count(), waits);
        assert_eq!(
            svg.matches("fill=\"#e67e22\"").count(),
            2,
            "one NCCL kernel per rank"
        );
    }
}
