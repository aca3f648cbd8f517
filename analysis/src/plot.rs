//! Pictures: line charts of sweep CSV columns (plotters, SVG text or PNG bytes) and a Gantt
//! chart of a Timeline (SVG text) with a row per rank's host and per stream, kernels as bars
//! and stream waits as arrows. Nothing here touches a file: callers write the results.
//!
//! Text in charts needs a TrueType font registered once with [`register_font`] (the binary
//! reads one from the system); the Gantt chart leaves fonts to the SVG viewer.
//!
//! ```
//! let header = ["point", "tensors.buf", "killer", "killed.overlap"].map(String::from);
//! let rows = vec![
//!     ["0", "1MiB", "none", "0.88"].map(String::from).to_vec(),
//!     ["1", "64MiB", "none", "0.90"].map(String::from).to_vec(),
//!     ["2", "1MiB", "sync", "-0.2"].map(String::from).to_vec(),
//! ];
//! let query = analysis::plot::ChartQuery { x: "tensors.buf", y: "killed.overlap", by: Some("killer"), filters: &[] };
//! let chart = analysis::plot::line_chart(&header, &rows, &query).unwrap();
//! assert!(chart.x_is_bytes);
//! assert_eq!(chart.series.len(), 2);
//! assert_eq!(chart.series[0].points, [(1048576.0, 0.88), (67108864.0, 0.90)]);
//! assert_eq!(chart.y_label, "killed.overlap (R3: 1 = hidden, 0 = serial)");
//! ```

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;
use sim::timeline::{KernelClass, Timeline};
use std::fmt::Write;

/// Registers the TrueType font that chart text is drawn with (family `sans-serif`).
pub fn register_font(bytes: &'static [u8]) -> Result<(), String> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| "not a TrueType/OpenType font".to_string())
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x, y), sorted by x.
    pub points: Vec<(f64, f64)>,
}

/// A line chart, ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The x column holds sizes (`1MiB`) or bytes: log axis, ticks as sizes.
    pub x_is_bytes: bool,
    pub series: Vec<Series>,
}

/// Which columns of a sweep table to draw.
pub struct ChartQuery<'a> {
    pub x: &'a str,
    pub y: &'a str,
    /// One line per distinct value of this column (in order of first appearance).
    pub by: Option<&'a str>,
    /// Only rows whose column equals the value.
    pub filters: &'a [(String, String)],
}

/// The unit of a column, from its name (units last: `_us`, `_ns`, `_bytes`) or what it holds.
pub fn axis_label(column: &str, is_bytes: bool) -> String {
    let unit = if is_bytes || column.ends_with("_bytes") {
        "bytes, log scale"
    } else if column.ends_with("_us") {
        "µs"
    } else if column.ends_with("_ns") {
        "ns"
    } else if column.ends_with("_ms") {
        "ms"
    } else if column.ends_with(".overlap") {
        "R3: 1 = hidden, 0 = serial"
    } else if column.ends_with("completed_at_wait") || column.ends_with(".is_completed") {
        "share of samples"
    } else {
        return column.to_string();
    };
    format!("{column} ({unit})")
}

/// Cell `i` of a row; a short row reads as empty cells.
fn cell(row: &[String], i: usize) -> &str {
    row.get(i).map_or("", String::as_str)
}

/// A value an axis can hold: finite and small enough that a range over any two of them, with
/// its padding, is finite too.
fn plottable(value: f64) -> bool {
    value.is_finite() && value.abs() <= 1e300
}

/// A cell as a number: plain, or a size with a unit (`64MiB`) in bytes.
fn x_value(cell: &str) -> Option<(f64, bool)> {
    if let Ok(number) = cell.trim().parse::<f64>() {
        return plottable(number).then_some((number, false));
    }
    sim::units::parse_size_bytes(cell)
        .ok()
        .map(|bytes| (bytes as f64, true))
}

/// Builds a chart from a sweep table: rows with an empty or non-numeric y are left out.
pub fn line_chart(
    header: &[String],
    rows: &[Vec<String>],
    query: &ChartQuery,
) -> Result<LineChart, String> {
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no column {name:?}; the columns are: {}", header.join(", ")))
    };
    let x = column(query.x)?;
    let y = column(query.y)?;
    let by = query.by.map(column).transpose()?;
    let filters = query
        .filters
        .iter()
        .map(|(name, value)| column(name).map(|i| (i, value.as_str())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut series: Vec<Series> = Vec::new();
    let mut any_bytes = false;
    for row in rows {
        if filters.iter().any(|&(i, value)| cell(row, i) != value) {
            continue;
        }
        // `nan`, `inf` and numbers no axis can span are left out, as empty cells are.
        let Some(y_value) = cell(row, y)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|&v| plottable(v))
        else {
            continue;
        };
        let Some((x_number, is_bytes)) = x_value(cell(row, x)) else {
            return Err(format!(
                "column {:?} holds {:?}, not a finite number or a size",
                query.x,
                cell(row, x)
            ));
        };
        any_bytes |= is_bytes;
        let name = by.map_or_else(|| query.y.to_string(), |i| cell(row, i).to_string());
        let index = match series.iter().position(|s| s.name == name) {
            Some(index) => index,
            None => {
                series.push(Series {
                    name,
                    points: Vec::new(),
                });
                series.len() - 1
            }
        };
        series[index].points.push((x_number, y_value));
    }
    if series.is_empty() {
        return Err(format!(
            "no row has a number in {:?} (after the filters)",
            query.y
        ));
    }
    for line in &mut series {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let x_is_bytes = any_bytes || query.x.ends_with("_bytes");
    let mut title = format!("{} by {}", query.y, query.x);
    if let Some(by) = query.by {
        let _ = write!(title, ", one line per {by}");
    }
    for (name, value) in query.filters {
        let _ = write!(title, ", {name} = {value}");
    }
    Ok(LineChart {
        title,
        x_label: axis_label(query.x, x_is_bytes),
        y_label: axis_label(query.y, false),
        x_is_bytes,
        series,
    })
}

/// Chart size: width, height.
const CHART_SIZE_PX: (u32, u32) = (960, 600);

/// The chart as SVG text.
pub fn line_chart_svg(chart: &LineChart) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE_PX).into_drawing_area();
        draw_chart(root, chart)?;
    }
    Ok(svg)
}

/// The chart as PNG bytes.
pub fn line_chart_png(chart: &LineChart) -> Result<Vec<u8>, String> {
    let (width, height) = CHART_SIZE_PX;
    let mut rgb = vec![0u8; (width * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, CHART_SIZE_PX).into_drawing_area();
        draw_chart(root, chart)?;
    }
    let mut png_bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut png_bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(&rgb))
        .map_err(|error| format!("PNG encoding failed: {error}"))?;
    Ok(png_bytes)
}

/// The range with 5% of room on each side; a single value gets room of 5% of itself (at
/// least 0.05), so that the range is never empty, however large the value.
fn padded(low: f64, high: f64) -> (f64, f64) {
    let pad = if high > low {
        (high - low) * 0.05
    } else {
        low.abs().max(1.0) * 0.05
    };
    (low - pad, high + pad)
}

fn draw_chart<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
) -> Result<(), String> {
    let all = chart.series.iter().flat_map(|s| s.points.iter());
    let (x_low, x_high) = all
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    let (y_low, y_high) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    let y_range = {
        let (low, high) = padded(y_low, y_high);
        low..high
    };
    if chart.x_is_bytes && x_low > 0.0 {
        let x_range = (x_low / 1.5..x_high * 1.5).log_scale().base(2.0);
        draw_with(root, chart, x_range, y_range, &|bytes: &f64| {
            size_tick(*bytes)
        })
    } else {
        let (low, high) = padded(x_low, x_high);
        draw_with(root, chart, low..high, y_range, &|x: &f64| number_tick(*x))
    }
}

fn size_tick(bytes: f64) -> String {
    const UNITS: [(&str, f64); 5] = [
        ("TiB", 1099511627776.0),
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    let (unit, scale) = UNITS
        .iter()
        .find(|(_, scale)| bytes >= *scale)
        .copied()
        .unwrap_or(("B", 1.0));
    number_tick(bytes / scale) + " " + unit
}

fn number_tick(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

fn draw_with<DB, X>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
    x_range: X,
    y_range: std::ops::Range<f64>,
    x_format: &dyn Fn(&f64) -> String,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let fail = |error: &dyn std::fmt::Display| format!("drawing the chart failed: {error}");
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut context = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|e| fail(&e))?;
    context
        .configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(x_format)
        .y_label_formatter(&|y: &f64| number_tick(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| fail(&e))?;
    for (index, line) in chart.series.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        context
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(&line.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        context
            .draw_series(
                line.points
                    .iter()
                    .map(|&point| Circle::new(point, 3, color.filled())),
            )
            .map_err(|e| fail(&e))?;
    }
    context
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

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
        "{}: {} ranks, {} iterations — host calls, kernels (compute, communication, sleep) and stream waits (arrows)",
        timeline.scenario.name, timeline.scenario.ranks, timeline.scenario.repeat
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
    fn labels_carry_units() {
        assert_eq!(axis_label("ar.host_call_us", false), "ar.host_call_us (µs)");
        assert_eq!(
            axis_label("tensors.buf", true),
            "tensors.buf (bytes, log scale)"
        );
        assert_eq!(axis_label("gemm", false), "gemm");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(1000.0, 10.0), 100.0);
        assert_eq!(tick_step(1500.0, 10.0), 200.0);
        assert_eq!(size_tick(1048576.0), "1 MiB");
        assert_eq!(size_tick(1536.0), "1.5 KiB");
        assert_eq!(number_tick(0.25), "0.25");
    }

    #[test]
    fn filters_and_bad_columns() {
        let header = ["point", "n", "k", "y"].map(String::from);
        let rows = vec![
            ["0", "1", "a", "2"].map(String::from).to_vec(),
            ["1", "2", "b", ""].map(String::from).to_vec(),
            ["2", "3", "a", "4"].map(String::from).to_vec(),
        ];
        let filters = [("k".to_string(), "a".to_string())];
        let query = ChartQuery {
            x: "n",
            y: "y",
            by: None,
            filters: &filters,
        };
        let chart = line_chart(&header, &rows, &query).unwrap();
        assert!(!chart.x_is_bytes);
        assert_eq!(chart.series[0].points, [(1.0, 2.0), (3.0, 4.0)]);
        let err = line_chart(&header, &rows, &ChartQuery { x: "m", ..query }).unwrap_err();
        assert!(err.contains("no column \"m\""), "{err}");
    }

    #[test]
    fn cells_no_axis_can_hold_are_left_out() {
        let header = ["point", "n", "y"].map(String::from);
        let rows: Vec<Vec<String>> = [
            ["0", "1", "nan"],
            ["1", "2", "inf"],
            ["2", "3", "-inf"],
            ["3", "4", "1e308"],
            ["4", "5", "7"],
        ]
        .iter()
        .map(|row| row.map(String::from).to_vec())
        .collect();
        let query = ChartQuery {
            x: "n",
            y: "y",
            by: None,
            filters: &[],
        };
        let chart = line_chart(&header, &rows, &query).unwrap();
        assert_eq!(chart.series[0].points, [(5.0, 7.0)]);
        let inf_x = vec![["0", "inf", "1"].map(String::from).to_vec()];
        let err = line_chart(&header, &inf_x, &query).unwrap_err();
        assert!(err.contains("not a finite number"), "{err}");
        assert_eq!(padded(1e20, 1e20), (1e20 - 5e18, 1e20 + 5e18));
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
