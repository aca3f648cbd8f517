//! Line charts of sweep CSV columns (plotters, SVG text or PNG bytes); the Gantt chart of a
//! Timeline is `crate::gantt`. Nothing here touches a file: callers write the results.
//!
//! Text in charts needs a TrueType font registered once with [`register_font`] (the binary
//! reads one from the system); the Gantt chart leaves fonts to the SVG viewer.
//!
//! Over 1,000 lines (about 1,620, 570 of them tests): one chart model drawn to two backends (SVG
//! and PNG) with panels, log axes and line styles; the tests are the part to move out.
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

use plotters::coord::ranged1d::{BoldPoints, DefaultFormatting, KeyPointHint, LightPoints, Ranged};
use plotters::prelude::*;
use std::collections::HashSet;
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
    /// The y column holds bytes (its name ends in `_bytes`): ticks as sizes.
    pub y_is_bytes: bool,
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
/// The drawing adds ", log scale" where the axis is logarithmic (`with_scale`).
pub fn axis_label(column: &str, is_bytes: bool) -> String {
    let unit = if is_bytes || column.ends_with("_bytes") {
        "bytes"
    } else if column.ends_with("_us") {
        "µs"
    } else if column.ends_with("_ns") {
        "ns"
    } else if column.ends_with("_ms") {
        "ms"
    } else if column.ends_with("_per_s") {
        "per second"
    } else if column.ends_with("_s") {
        "s"
    } else if column.ends_with("_mib") {
        "MiB"
    } else if column.ends_with(".overlap") {
        "R3: 1 = hidden, 0 = serial"
    } else if column.ends_with("_share")
        || column.ends_with("completed_at_wait")
        || column.ends_with(".is_completed")
    {
        // `<op>.completed_at_wait_share`, `<q>.is_completed_share`; without `_share` in a
        // `c10dsim-sweep/1` file (docs/sweep-format.md).
        "share of samples, 0 to 1"
    } else {
        return column.to_string();
    };
    format!("{column} ({unit})")
}

/// An axis label as drawn: `col (unit, log scale)` where the axis is logarithmic. A size axis
/// is logarithmic only when every value is above 0, so its label says which it got.
fn with_scale(label: &str, log: bool) -> String {
    match (log, label.strip_suffix(')')) {
        (false, _) => label.to_string(),
        (true, Some(open)) => format!("{open}, log scale)"),
        (true, None) => format!("{label} (log scale)"),
    }
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

/// A finite number beyond what [`plottable`] allows, in a row a chart would draw.
fn beyond_axis(
    column: &str,
    value: &str,
    header: &[String],
    rows: &[Vec<String>],
    row: usize,
) -> String {
    format!(
        "column {column:?} holds {value:?} at {}: beyond ±1e300, more than an axis can span \
         (a range over it, with the axis's room, overflows a 64-bit float)",
        row_name(header, rows, row)
    )
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

/// Builds a chart from a sweep table: rows with an empty y (or `nan`, `inf`) are left out; any
/// other y that is not a number is refused.
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
    // Each series' index by name: a lookup per row, not a scan of the series (`--by point`
    // makes a series per row).
    let mut series_index: std::collections::HashMap<String, usize> =
        std::collections::HashMap::new();
    // Per series, the row index of each point (for the ambiguity check).
    let mut sources: Vec<Vec<usize>> = Vec::new();
    let mut any_bytes = false;
    for (row_index, row) in rows.iter().enumerate() {
        if filters.iter().any(|&(i, value)| cell(row, i) != value) {
            continue;
        }
        // `nan` and `inf` are left out, as empty cells are; a finite number no axis can span,
        // or a cell that is no number at all, is refused, not dropped from the line unsaid.
        let y_cell = cell(row, y).trim();
        if y_cell.is_empty() {
            continue;
        }
        let Ok(y_value) = y_cell.parse::<f64>() else {
            return Err(format!(
                "column {:?} holds {:?} at {}, not a number (only an empty cell, `nan` or `inf` \
                 is left out)",
                query.y,
                cell(row, y),
                row_name(header, rows, row_index)
            ));
        };
        if !plottable(y_value) {
            if y_value.is_finite() {
                return Err(beyond_axis(query.y, cell(row, y), header, rows, row_index));
            }
            continue;
        }
        let Some((x_number, is_bytes)) = x_value(cell(row, x)) else {
            if cell(row, x).trim().parse::<f64>().is_ok_and(f64::is_finite) {
                return Err(beyond_axis(query.x, cell(row, x), header, rows, row_index));
            }
            return Err(format!(
                "column {:?} holds {:?} at {}, not a finite number or a size",
                query.x,
                cell(row, x),
                row_name(header, rows, row_index)
            ));
        };
        any_bytes |= is_bytes;
        let name = by.map_or_else(|| query.y.to_string(), |i| cell(row, i).to_string());
        let index = *series_index.entry(name).or_insert_with_key(|name| {
            series.push(Series {
                name: name.clone(),
                points: Vec::new(),
            });
            sources.push(Vec::new());
            series.len() - 1
        });
        series[index].points.push((x_number, y_value));
        sources[index].push(row_index);
    }
    if series.is_empty() {
        return Err(no_rows_left(header, rows, &filters, query));
    }
    let fixed: Vec<usize> = [Some(x), by]
        .into_iter()
        .flatten()
        .chain(filters.iter().map(|&(i, _)| i))
        .collect();
    for (line, rows_of_line) in series.iter_mut().zip(&sources) {
        let mut order: Vec<usize> = (0..line.points.len()).collect();
        order.sort_by(|&a, &b| line.points[a].0.total_cmp(&line.points[b].0));
        for pair in order.windows(2) {
            if line.points[pair[0]].0 == line.points[pair[1]].0 {
                let same_x = [rows_of_line[pair[0]], rows_of_line[pair[1]]];
                return Err(ambiguous(header, rows, &fixed, same_x, query, &line.name));
            }
        }
        line.points = order.iter().map(|&i| line.points[i]).collect();
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
        y_is_bytes: query.y.ends_with("_bytes"),
        series,
    })
}

/// Why a chart has no point: a table of no rows (a header alone: a shard without points, a sweep
/// stopped before its first), a `--where` that no row meets (with the values its column holds,
/// so that a misspelt value shows), filters that no row meets together, or no number in y.
fn no_rows_left(
    header: &[String],
    rows: &[Vec<String>],
    filters: &[(usize, &str)],
    query: &ChartQuery,
) -> String {
    if rows.is_empty() {
        return "the table has no rows, only its header: nothing to draw".to_string();
    }
    for &(column, value) in filters {
        if rows.iter().all(|row| cell(row, column) != value) {
            // In first-seen order; a set, so that a column of distinct values (a metric of a
            // large sweep) is read once, not once per row.
            let mut seen = HashSet::new();
            let values: Vec<&str> = (rows.iter())
                .map(|row| cell(row, column))
                .filter(|value| seen.insert(*value))
                .collect();
            let shown = if values.len() > 12 {
                format!("{}, … ({} values)", values[..12].join(", "), values.len())
            } else {
                values.join(", ")
            };
            return format!(
                "--where {}={value}: no row has that value (the column holds: {shown})",
                header[column]
            );
        }
    }
    let kept = rows.iter().any(|row| {
        filters
            .iter()
            .all(|&(column, value)| cell(row, column) == value)
    });
    if kept {
        format!("no row has a number in {:?} (after the filters)", query.y)
    } else {
        "no row meets every --where at once".to_string()
    }
}

/// A row as a message names it: by its `point` where the CSV has that column, else by its
/// number among the data rows (1 first).
fn row_name(header: &[String], rows: &[Vec<String>], row: usize) -> String {
    header
        .iter()
        .position(|h| h == crate::sweep::POINT_COLUMN)
        .map_or(format!("row {}", row + 1), |i| {
            format!("point {}", rows[row][i])
        })
}

/// Two rows of one line at the same x: the chart would join unrelated points. The message names
/// the input columns that differ between them (the sweep's axes, when the table is a sweep CSV),
/// so that `--by` or `--where` can tell them apart.
fn ambiguous(
    header: &[String],
    rows: &[Vec<String>],
    fixed: &[usize],
    same_x: [usize; 2],
    query: &ChartQuery,
    line: &str,
) -> String {
    let inputs = crate::sweep::axis_columns(header);
    let varying: Vec<&str> = inputs
        .filter(|i| !fixed.contains(i))
        .filter(|&i| rows[same_x[0]][i] != rows[same_x[1]][i])
        .filter(|&i| {
            // A size's `_bytes` twin varies with its label: name the label only.
            let name = &header[i];
            let twin = name.strip_suffix(crate::sweep::SIZE_BYTES_SUFFIX);
            twin.is_none_or(|label| !header.iter().any(|h| h == label))
        })
        .map(|i| header[i].as_str())
        .collect();
    let point = |row: usize| row_name(header, rows, row);
    let differ = if varying.is_empty() {
        "no input column tells them apart".to_string()
    } else {
        format!("they differ in {}", varying.join(", "))
    };
    format!(
        "ambiguous series: {} and {} both give line {line:?} a point at {} = {:?}; {differ}. \
         Draw one line per value with --by COLUMN, or keep one with --where COLUMN=VALUE",
        point(same_x[0]),
        point(same_x[1]),
        query.x,
        rows[same_x[0]][header.iter().position(|h| h == query.x).unwrap_or(0)],
    )
}

/// How a chart is drawn: its size in pixels and whether the y axis is logarithmic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canvas {
    pub width_px: u32,
    pub height_px: u32,
    pub log_y: bool,
    /// A logarithmic x axis (every x must be positive); a size column always has one.
    pub log_x: bool,
}

impl Default for Canvas {
    /// 960 × 600, linear y.
    fn default() -> Canvas {
        Canvas {
            width_px: 960,
            height_px: 600,
            log_y: false,
            log_x: false,
        }
    }
}

impl Canvas {
    /// Checks the size: 16 to 16384 pixels a side.
    pub fn check_size(&self) -> Result<(), String> {
        for (what, px) in [("--width", self.width_px), ("--height", self.height_px)] {
            if !(16..=16_384).contains(&px) {
                return Err(format!("{what} {px}: expected 16 to 16384 pixels"));
            }
        }
        Ok(())
    }

    /// Checks the size and, for a log axis, that every value on it is positive and that the
    /// axis can span them.
    pub fn check(&self, chart: &LineChart) -> Result<(), String> {
        self.check_size()?;
        if self.log_x {
            let bad = chart
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(move |p| (s, p)))
                .find(|(_, p)| p.0 <= 0.0);
            if let Some((series, point)) = bad {
                return Err(format!(
                    "--log-x needs positive values; line {:?} has x = {}",
                    series.name, point.0
                ));
            }
        }
        if self.log_y {
            let bad = chart
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(move |p| (s, p)))
                .find(|(_, p)| p.1 <= 0.0);
            if let Some((series, point)) = bad {
                return Err(format!(
                    "--log-y needs positive values; line {:?} has {} at x = {}",
                    series.name, point.1, point.0
                ));
            }
        }
        let points = || chart.series.iter().flat_map(|s| s.points.iter());
        let x_log = (self.log_x || chart.x_is_bytes) && points().all(|p| p.0 > 0.0);
        for (axis, log, coordinate) in [("x", x_log, 0), ("y", self.log_y, 1)] {
            let value = |p: &(f64, f64)| if coordinate == 0 { p.0 } else { p.1 };
            let low = points().map(value).fold(f64::INFINITY, f64::min);
            let high = points().map(value).fold(f64::NEG_INFINITY, f64::max);
            let span = log_span(low, high);
            if log && !(span.end / span.start).is_finite() {
                return Err(format!(
                    "the {axis} values span {low:e} to {high:e}: more than a logarithmic axis \
                     can draw (their ratio, with the axis's room, overflows a 64-bit float)"
                ));
            }
        }
        Ok(())
    }
}

/// A logarithmic axis has room of this factor below its least value and above its greatest.
const LOG_ROOM: f64 = 1.5;

/// The range of a logarithmic axis over values from `low` to `high`.
fn log_span(low: f64, high: f64) -> std::ops::Range<f64> {
    low / LOG_ROOM..high * LOG_ROOM
}

/// The chart as SVG text.
pub fn line_chart_svg(chart: &LineChart, canvas: Canvas) -> Result<String, String> {
    panels_svg(std::slice::from_ref(chart), canvas)
}

/// Charts stacked top to bottom in one SVG (one panel per y column of `c10dsim plot`), the
/// canvas's height shared among them.
pub fn panels_svg(charts: &[LineChart], canvas: Canvas) -> Result<String, String> {
    for chart in charts {
        canvas.check(chart)?;
    }
    let mut svg = String::new();
    {
        let size = (canvas.width_px, canvas.height_px);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_panels(root, charts, canvas)?;
    }
    Ok(svg)
}

/// The chart as PNG bytes.
pub fn line_chart_png(chart: &LineChart, canvas: Canvas) -> Result<Vec<u8>, String> {
    panels_png(std::slice::from_ref(chart), canvas)
}

/// [`panels_svg`] as PNG bytes.
pub fn panels_png(charts: &[LineChart], canvas: Canvas) -> Result<Vec<u8>, String> {
    for chart in charts {
        canvas.check(chart)?;
    }
    let (width, height) = (canvas.width_px, canvas.height_px);
    let mut rgb = vec![0u8; (width as usize) * (height as usize) * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        draw_panels(root, charts, canvas)?;
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

fn draw_panels<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    charts: &[LineChart],
    canvas: Canvas,
) -> Result<(), String> {
    for (area, chart) in root
        .split_evenly((charts.len().max(1), 1))
        .into_iter()
        .zip(charts)
    {
        draw_chart(area, chart, canvas.log_x, canvas.log_y)?;
    }
    // Once for the whole picture: the SVG backend closes its document when presented.
    root.present()
        .map_err(|error| format!("drawing the chart failed: {error}"))
}

fn draw_chart<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
    log_x: bool,
    log_y: bool,
) -> Result<(), String> {
    let all = chart.series.iter().flat_map(|s| s.points.iter());
    let (x_low, _) = all
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    let (y_low, y_high) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    // Sizes double per tick, other numbers grow tenfold.
    let x_log = (chart.x_is_bytes || log_x) && x_low > 0.0;
    let x_kind = if chart.x_is_bytes && x_low > 0.0 {
        TickKind::Size
    } else {
        TickKind::Number
    };
    // Bytes on a log axis double per tick, as sizes; on a linear one they are drawn in the unit
    // of the greatest, so that the ticks are round in it (`50 MiB`, not `47.684 MiB`).
    let (y_kind, y_scale) = match chart.y_is_bytes {
        true if log_y => (TickKind::Size, 1.0),
        true => {
            let (unit, scale) = size_unit(y_low.abs().max(y_high.abs()));
            (TickKind::Unit(unit), scale)
        }
        false => (TickKind::Number, 1.0),
    };
    let scaled;
    let chart = if y_scale == 1.0 {
        chart
    } else {
        scaled = LineChart {
            series: (chart.series.iter())
                .map(|line| Series {
                    name: line.name.clone(),
                    points: (line.points.iter())
                        .map(|&(x, y)| (x, y / y_scale))
                        .collect(),
                })
                .collect(),
            ..chart.clone()
        };
        &scaled
    };
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let span = |value: fn(&(f64, f64)) -> f64| {
        (points().map(value)).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
    };
    let ((x_low, x_high), (y_low, y_high)) = (span(|p| p.0), span(|p| p.1));
    let x_base = if chart.x_is_bytes { 2.0 } else { 10.0 };
    let y_base = if chart.y_is_bytes { 2.0 } else { 10.0 };
    let axes = Axes {
        x_kind,
        y_kind,
        x_scale: match x_log {
            true => AxisScale::Log { base: x_base },
            false => AxisScale::Linear,
        },
        y_scale: match log_y {
            true => AxisScale::Log { base: y_base },
            false => AxisScale::Linear,
        },
        x_description: with_scale(&chart.x_label, x_log),
        y_description: with_scale(&chart.y_label, log_y),
    };
    let (x_pad_low, x_pad_high) = padded(x_low, x_high);
    let (y_pad_low, y_pad_high) = padded(y_low, y_high);
    let log_y_range = log_span(y_low, y_high).log_scale().base(y_base);
    match (x_log, log_y) {
        (true, true) => {
            let x_range = log_span(x_low, x_high).log_scale().base(x_base);
            draw_with(root, chart, x_range, log_y_range, &axes)
        }
        (true, false) => {
            let x_range = log_span(x_low, x_high).log_scale().base(x_base);
            draw_with(root, chart, x_range, y_pad_low..y_pad_high, &axes)
        }
        (false, true) => draw_with(root, chart, x_pad_low..x_pad_high, log_y_range, &axes),
        (false, false) => draw_with(
            root,
            chart,
            x_pad_low..x_pad_high,
            y_pad_low..y_pad_high,
            &axes,
        ),
    }
}

/// The colour of line `index`: Okabe and Ito's colour-blind-safe palette (no yellow, which
/// vanishes on white), then again.
fn line_color(index: usize) -> RGBColor {
    const PALETTE: [(u8, u8, u8); 7] = [
        (0, 114, 178),
        (213, 94, 0),
        (0, 158, 115),
        (204, 121, 167),
        (230, 159, 0),
        (86, 180, 233),
        (0, 0, 0),
    ];
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

/// The dash of line `index` (drawn length, gap, in pixels; a gap of 0 is a solid line), so that
/// lines that coincide stay distinguishable and the chart reads in black and white.
fn dash_of(index: usize) -> (u32, u32) {
    const DASHES: [(u32, u32); 4] = [(1, 0), (10, 5), (3, 4), (14, 4)];
    DASHES[index % DASHES.len()]
}

/// The marker of line `index`, as a filled polygon around (0, 0) in pixels: circle, triangle,
/// square, diamond, then again.
fn marker_of(index: usize) -> Vec<(i32, i32)> {
    match index % 4 {
        0 => (0..12)
            .map(|k| {
                let angle = f64::from(k) * std::f64::consts::PI / 6.0;
                (
                    (4.0 * angle.cos()).round() as i32,
                    (4.0 * angle.sin()).round() as i32,
                )
            })
            .collect(),
        1 => vec![(0, -5), (5, 4), (-5, 4)],
        2 => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        _ => vec![(0, -5), (5, 0), (0, 5), (-5, 0)],
    }
}

/// The legend's sample of line `index`: three segments over 24 pixels in the line's dash.
fn legend_segments(index: usize) -> [[(i32, i32); 2]; 3] {
    let (dash, gap) = dash_of(index);
    let (dash, gap) = (dash as i32, gap as i32);
    if gap == 0 {
        return [[(0, 0), (8, 0)], [(8, 0), (16, 0)], [(16, 0), (24, 0)]];
    }
    let start = |k: i32| (k * (dash + gap)).min(24);
    [0, 1, 2].map(|k| [(start(k), 0), ((start(k) + dash).min(24), 0)])
}

/// The binary unit of a size (`MiB` for 1 MiB up to 1 GiB) and its bytes.
fn size_unit(bytes: f64) -> (&'static str, f64) {
    const UNITS: [(&str, f64); 6] = [
        ("PiB", 1125899906842624.0),
        ("TiB", 1099511627776.0),
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    UNITS
        .iter()
        .find(|(_, scale)| bytes >= *scale)
        .copied()
        .unwrap_or(("B", 1.0))
}

fn size_tick(bytes: f64) -> String {
    let (unit, scale) = size_unit(bytes);
    number_tick(bytes / scale) + " " + unit
}

/// A number with at most `decimals` decimals, its trailing zeros dropped.
fn number_tick_places(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

pub(crate) fn number_tick(value: f64) -> String {
    number_tick_places(value, 3)
}

/// A tick of a number axis with at most `decimals` decimals: as [`number_tick`] from 0.01 to
/// below 10,000, else with an SI prefix (`250M`, `1.2T`, `30µ`) so that it stays short, else in
/// scientific notation (`4e21`).
fn compact_tick(value: f64, decimals: usize) -> String {
    const PREFIXES: [(&str, i32); 10] = [
        ("f", -15),
        ("p", -12),
        ("n", -9),
        ("µ", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
    ];
    let magnitude = value.abs();
    if magnitude == 0.0 || (0.01..1e4).contains(&magnitude) {
        return number_tick_places(value, decimals);
    }
    let engineering = (magnitude.log10().floor() as i32).div_euclid(3) * 3;
    match PREFIXES.iter().find(|&&(_, of)| of == engineering) {
        Some((prefix, _)) => number_tick_places(value / 10f64.powi(engineering), decimals) + prefix,
        None => {
            let scientific = format!("{value:.decimals$e}");
            let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, ""));
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
    }
}

/// How an axis writes its ticks.
#[derive(Clone, Copy)]
enum TickKind {
    /// Sizes, each in its own binary unit (`4 KiB`, `1 MiB`).
    Size,
    /// Numbers of one binary unit (the values already divided by it): `50 MiB`.
    Unit(&'static str),
    /// Numbers ([`compact_tick`]).
    Number,
}

impl TickKind {
    /// Tick `value` with at most `decimals` decimals.
    fn write(self, value: f64, decimals: usize) -> String {
        match self {
            TickKind::Size => size_tick(value),
            TickKind::Unit(unit) => format!("{} {unit}", number_tick_places(value, decimals)),
            TickKind::Number => compact_tick(value, decimals),
        }
    }

    /// The fewest decimals, 3 or more, at which neighbouring `ticks` read apart (ticks that
    /// differ in the ninth digit, `123456.791` and `123456.792`, are not both `123.457k`).
    fn decimals_for(self, ticks: &[f64]) -> usize {
        (3..MAX_TICK_DECIMALS)
            .find(|&decimals| {
                ticks
                    .windows(2)
                    .all(|pair| self.write(pair[0], decimals) != self.write(pair[1], decimals))
            })
            .unwrap_or(MAX_TICK_DECIMALS)
    }
}

/// The most decimals a tick is written with.
const MAX_TICK_DECIMALS: usize = 12;

/// The ticks an axis asks the mesh for (its bold lines, which carry the labels).
const TICKS: usize = 11;

/// How the axes are described: how each writes its ticks, how each is scaled, and both axes'
/// labels as drawn.
struct Axes {
    x_kind: TickKind,
    y_kind: TickKind,
    x_scale: AxisScale,
    y_scale: AxisScale,
    x_description: String,
    y_description: String,
}

/// How an axis maps its values.
#[derive(Clone, Copy, PartialEq)]
enum AxisScale {
    Linear,
    Log { base: f64 },
}

/// The values an axis ticks, over `coordinate`'s range: the mesh's own, each once, a tick that
/// is float noise around zero (`-3.155e-30` between `-20f` and `20f`) made 0; where the mesh
/// finds fewer than two (a range of 1e-20) or a log₁₀ axis (the mesh drops every decade below
/// 2.2e-16, and writes each decade twice when it ticks the values between), ticks of this
/// module's own, round in 1, 2 or 5.
fn ticks_of<C: Ranged<ValueType = f64>>(coordinate: &C, scale: AxisScale) -> Vec<f64> {
    let range = coordinate.range();
    let (low, high) = (range.start.min(range.end), range.start.max(range.end));
    let mut ticks = match scale {
        AxisScale::Log { base: 10.0 } => decade_ticks(low, high),
        _ => coordinate.key_points(BoldPoints(TICKS)),
    };
    ticks.sort_by(f64::total_cmp);
    ticks.dedup_by(|later, earlier| (*later - *earlier).abs() <= 1e-9 * later.abs());
    if scale == AxisScale::Linear {
        if ticks.len() < 2 {
            ticks = round_ticks(low, high);
        }
        let step = (ticks.windows(2))
            .map(|pair| pair[1] - pair[0])
            .fold(f64::INFINITY, f64::min);
        for tick in &mut ticks {
            if tick.abs() < step * 1e-6 {
                *tick = 0.0;
            }
        }
    }
    ticks
}

/// Ticks from `low` to `high`, at most [`TICKS`]: multiples of a step of 1, 2 or 5 times a
/// power of ten, 0 exactly 0.
fn round_ticks(low: f64, high: f64) -> Vec<f64> {
    let rough = (high - low) / (TICKS - 1) as f64;
    if !(rough.is_finite() && rough > 0.0) {
        return vec![low];
    }
    let power = power_of_ten(rough.log10().floor() as i32);
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|&m| m * power)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * power);
    let first = (low / step).ceil() as i64;
    let last = (high / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// 10ⁿ as the nearest float (`powi` is a few ulps off for negative powers).
fn power_of_ten(exponent: i32) -> f64 {
    format!("1e{exponent}").parse().unwrap_or(0.0)
}

/// The ticks of a log₁₀ axis from `low` to `high`: its decades (every second, fifth, … where
/// more than [`TICKS`]); over fewer than three, the values between at 2 and 5 times a decade,
/// or at each of 2 to 9 times where that stays within [`TICKS`].
fn decade_ticks(low: f64, high: f64) -> Vec<f64> {
    let first = low.log10().floor() as i32;
    let last = high.log10().ceil() as i32;
    let within = |value: &f64| (low..=high).contains(value);
    let decades = || (first..=last).map(power_of_ten).filter(within);
    if decades().count() >= 3 {
        let count = decades().count();
        let stride = count.div_ceil(TICKS);
        return decades().step_by(stride).collect();
    }
    let multiples = |factors: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|exponent| factors.iter().map(move |m| m * power_of_ten(exponent)))
            .filter(within)
            .collect()
    };
    let every = multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    if every.len() <= TICKS {
        every
    } else {
        multiples(&[1.0, 2.0, 5.0])
    }
}

/// A coordinate ticked at `ticks` (its labels and bold lines), its light lines where the mesh
/// draws them; its labels written by the chart's formatters.
struct Ticked<C> {
    coordinate: C,
    ticks: Vec<f64>,
    light: Vec<f64>,
}

fn with_ticks<C: Ranged<ValueType = f64>>(coordinate: C, ticks: Vec<f64>) -> Ticked<C> {
    let light = coordinate.key_points(LightPoints::new(TICKS, TICKS * 10));
    Ticked {
        coordinate,
        ticks,
        light,
    }
}

impl<C: Ranged<ValueType = f64>> Ranged for Ticked<C> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.coordinate.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        match hint.weight().allow_light_points() {
            true => self.light.clone(),
            false => self.ticks.clone(),
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.coordinate.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.coordinate.axis_pixel_range(limit)
    }
}

/// The y labels' area is at least this wide, and beside its widest tick has this much room for
/// the tick mark, the gap and the rotated axis label.
const MIN_Y_LABEL_AREA_PX: u32 = 72;
const Y_LABEL_ROOM_PX: u32 = 36;

fn draw_with<DB, X, Y>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    chart: &LineChart,
    x_range: X,
    y_range: Y,
    axes: &Axes,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64>,
{
    let fail = |error: &dyn std::fmt::Display| format!("drawing the chart failed: {error}");
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let (x_kind, y_kind) = (axes.x_kind, axes.y_kind);
    let (x_coordinate, y_coordinate): (X::CoordDescType, Y::CoordDescType) =
        (x_range.into(), y_range.into());
    let x_ticks = ticks_of(&x_coordinate, axes.x_scale);
    let y_ticks = ticks_of(&y_coordinate, axes.y_scale);
    let x_decimals = x_kind.decimals_for(&x_ticks);
    let y_decimals = y_kind.decimals_for(&y_ticks);
    // The y labels' area fits the widest tick beside the rotated axis label, whatever its
    // length: a fixed one cut `1.2e12` at the left, and wrote `250000000` over the label.
    let label_style = TextStyle::from(("sans-serif", 14).into_font());
    let widest_px = (y_ticks.iter())
        .map(|&y| root.estimate_text_size(&y_kind.write(y, y_decimals), &label_style))
        .map(|size| size.map_or(0, |(width, _)| width))
        .max()
        .unwrap_or(0);
    let mut context = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(MIN_Y_LABEL_AREA_PX.max(widest_px + Y_LABEL_ROOM_PX))
        .build_cartesian_2d(
            with_ticks(x_coordinate, x_ticks),
            with_ticks(y_coordinate, y_ticks),
        )
        .map_err(|e| fail(&e))?;
    context
        .configure_mesh()
        .x_labels(TICKS)
        .y_labels(TICKS)
        .x_desc(&axes.x_description)
        .y_desc(&axes.y_description)
        .x_label_formatter(&|x: &f64| x_kind.write(*x, x_decimals))
        .y_label_formatter(&|y: &f64| y_kind.write(*y, y_decimals))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| fail(&e))?;
    let count = chart.series.len();
    for (index, line) in chart.series.iter().enumerate() {
        let color = line_color(index);
        let points = line.points.iter().copied();
        // Earlier lines are drawn wider and with larger markers, so that a later line lying on
        // top of one leaves its edges visible.
        let below = (count - 1 - index).min(3) as u32;
        let stroke = color.stroke_width(2 + below);
        let scale = 1.0 + 0.25 * f64::from(below);
        let marker: Vec<(i32, i32)> = marker_of(index)
            .into_iter()
            .map(|(dx, dy)| {
                (
                    (f64::from(dx) * scale) as i32,
                    (f64::from(dy) * scale) as i32,
                )
            })
            .collect();
        let annotation = match dash_of(index) {
            (_, 0) => context.draw_series(LineSeries::new(points, stroke)),
            (dash, gap) => context.draw_series(DashedLineSeries::new(points, dash, gap, stroke)),
        }
        .map_err(|e| fail(&e))?;
        let segments = legend_segments(index);
        let legend_stroke = color.stroke_width(2);
        annotation.label(&line.name).legend(move |(x, y)| {
            let [a, b, c] = segments;
            EmptyElement::at((x, y))
                + PathElement::new(a.to_vec(), legend_stroke)
                + PathElement::new(b.to_vec(), legend_stroke)
                + PathElement::new(c.to_vec(), legend_stroke)
                + Polygon::new(
                    marker_of(index)
                        .into_iter()
                        .map(|(dx, dy)| (dx + 12, dy))
                        .collect::<Vec<_>>(),
                    color.filled(),
                )
        });
        context
            .draw_series(line.points.iter().map(|&point| {
                EmptyElement::at(point) + Polygon::new(marker.clone(), color.filled())
            }))
            .map_err(|e| fail(&e))?;
    }
    context
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query of column `y` over column `n`, unfiltered, one series.
    const N_OVER_Y: ChartQuery<'static> = ChartQuery {
        x: "n",
        y: "y",
        by: None,
        filters: &[],
    };

    /// Rows of three cells each, as a CSV reader gives them.
    fn rows_of(cells: &[[&str; 3]]) -> Vec<Vec<String>> {
        (cells.iter())
            .map(|row| row.map(String::from).to_vec())
            .collect()
    }

    /// `plot --by point` makes a series per row, each found by its name (it was a scan of the
    /// series per row: 193,489 rows took 30 s; `plot`'s speed is measured outside the tests, as
    /// every speed is, docs/perf.md): the series keep the rows' order, each with its own point.
    #[test]
    fn a_series_per_row_keeps_the_rows_order() {
        let header: Vec<String> = ["n", "y", "point"].map(String::from).to_vec();
        let rows: Vec<Vec<String>> = (0..1_000)
            .map(|row| vec![row.to_string(), "1".into(), ((row * 7) % 1_000).to_string()])
            .collect();
        let query = ChartQuery {
            by: Some("point"),
            ..N_OVER_Y
        };
        let chart = line_chart(&header, &rows, &query).unwrap();
        assert_eq!(chart.series.len(), 1_000);
        for (row, series) in chart.series.iter().enumerate() {
            assert_eq!(series.name, ((row * 7) % 1_000).to_string());
            assert_eq!(series.points, [(row as f64, 1.0)]);
        }
    }

    #[test]
    fn labels_carry_units() {
        assert_eq!(axis_label("ar.host_call_us", false), "ar.host_call_us (µs)");
        assert_eq!(axis_label("tensors.buf", true), "tensors.buf (bytes)");
        assert_eq!(axis_label("gemm", false), "gemm");
        // The share columns of a sweep CSV (`c10dsim-sweep/2`).
        assert_eq!(
            axis_label("ar.completed_at_wait_share", false),
            "ar.completed_at_wait_share (share of samples, 0 to 1)"
        );
        assert_eq!(
            axis_label("q.is_completed_share", false),
            "q.is_completed_share (share of samples, 0 to 1)"
        );
        assert_eq!(
            with_scale("tensors.buf (bytes)", true),
            "tensors.buf (bytes, log scale)"
        );
        assert_eq!(
            with_scale("tensors.buf (bytes)", false),
            "tensors.buf (bytes)"
        );
        assert_eq!(with_scale("gemm", true), "gemm (log scale)");
    }

    /// The labels of the ticks of an axis over `coordinate`, as drawn.
    fn tick_labels<C: Ranged<ValueType = f64>>(coordinate: &C, scale: AxisScale) -> Vec<String> {
        let ticks = ticks_of(coordinate, scale);
        let decimals = TickKind::Number.decimals_for(&ticks);
        (ticks.iter())
            .map(|&tick| TickKind::Number.write(tick, decimals))
            .collect()
    }

    /// At any magnitude an axis has readable ticks, each once: float noise around zero reads
    /// `0` (it read `-3.155e-30` at 1e-16, `-2.487e86` at 1e100), a range of 1e-20 is ticked
    /// (once, at `-7.274e-20`; on a log axis not at all), a log axis writes each decade once
    /// (`100M` was written twice).
    #[test]
    fn ticks_read_at_any_magnitude() {
        for scale in [1e-20, 1e-16, 1e-9, 1.0, 1e5, 1e12, 1e100] {
            let (low, high) = (74.078 * scale, 1701.118 * scale);
            let (pad_low, pad_high) = padded(low, high);
            let linear: plotters::coord::types::RangedCoordf64 = (pad_low..pad_high).into();
            let labels = tick_labels(&linear, AxisScale::Linear);
            assert!(labels.len() >= 5, "{scale:e}: {labels:?}");
            assert!(labels.contains(&"0".to_string()), "{scale:e}: {labels:?}");
            assert!(
                labels
                    .iter()
                    .all(|l| l == "0" || !l.contains("e") || !(1e-15..=1e15).contains(&scale)),
                "{scale:e}: {labels:?}"
            );
            let log: plotters::coord::combinators::LogCoord<f64> =
                log_span(low, high).log_scale().base(10.0).into();
            let log_labels = tick_labels(&log, AxisScale::Log { base: 10.0 });
            assert!(log_labels.len() >= 2, "{scale:e}: {log_labels:?}");
            for labels in [&labels, &log_labels] {
                let distinct: HashSet<_> = labels.iter().collect();
                assert_eq!(distinct.len(), labels.len(), "{scale:e}: {labels:?}");
            }
        }
        let tiny: plotters::coord::types::RangedCoordf64 = (-1e-20..9e-20).into();
        assert_eq!(
            tick_labels(&tiny, AxisScale::Linear),
            [
                "-1e-20", "0", "1e-20", "2e-20", "3e-20", "4e-20", "5e-20", "6e-20", "7e-20",
                "8e-20", "9e-20"
            ]
        );
    }

    #[test]
    fn ticks_are_round() {
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
    fn a_table_of_no_rows_is_named_as_such_not_as_a_where_no_row_meets() {
        let header = ["point", "n", "y"].map(String::from);
        let query = N_OVER_Y;
        let err = line_chart(&header, &[], &query).unwrap_err();
        assert_eq!(
            err,
            "the table has no rows, only its header: nothing to draw"
        );
    }

    fn sweep_table() -> (Vec<String>, Vec<Vec<String>>) {
        let header = [
            "point",
            "tensors.buf",
            "tensors.buf_bytes",
            "killer",
            "gemm",
            "k.overlap",
            "seed",
        ]
        .map(String::from)
        .to_vec();
        let rows = [
            ["0", "1MiB", "1048576", "none", "4096", "0.5", "11"],
            ["1", "1MiB", "1048576", "none", "8192", "0.9", "12"],
            ["2", "2MiB", "2097152", "none", "4096", "0.6", "13"],
            ["3", "2MiB", "2097152", "none", "8192", "0.8", "14"],
        ]
        .map(|row| row.map(String::from).to_vec())
        .to_vec();
        (header, rows)
    }

    #[test]
    fn cells_that_are_not_finite_are_left_out() {
        let header = ["point", "n", "y"].map(String::from);
        let rows = rows_of(&[
            ["0", "1", "nan"],
            ["1", "2", "inf"],
            ["2", "3", "-inf"],
            ["4", "5", "7"],
        ]);
        let query = N_OVER_Y;
        let chart = line_chart(&header, &rows, &query).unwrap();
        assert_eq!(chart.series[0].points, [(5.0, 7.0)]);
        let inf_x = vec![["0", "inf", "1"].map(String::from).to_vec()];
        let err = line_chart(&header, &inf_x, &query).unwrap_err();
        assert!(err.contains("not a finite number"), "{err}");
        assert_eq!(padded(1e20, 1e20), (1e20 - 5e18, 1e20 + 5e18));
    }

    /// A y cell that is no number at all is refused, named with its column and point: dropped,
    /// it could take a whole series with it while `plot` exits 0. Empty cells are left out.
    #[test]
    fn a_y_cell_that_is_not_a_number_is_refused_with_its_point() {
        let header = ["point", "n", "y"].map(String::from);
        let rows = rows_of(&[["0", "1", ""], ["1", "2", " "], ["2", "3", "12ms"]]);
        let query = N_OVER_Y;
        let err = line_chart(&header, &rows, &query).unwrap_err();
        assert_eq!(
            err,
            "column \"y\" holds \"12ms\" at point 2, not a number (only an empty cell, `nan` \
             or `inf` is left out)"
        );
        let chart = line_chart(&header, &rows[..2], &query);
        assert!(
            chart.is_err_and(|err| err.contains("no row has a number")),
            "empty cells are left out"
        );
    }

    /// A finite number no axis can span is refused, named with its row, not dropped unsaid
    /// (leaving a chart short of a point, or reported as no number at all).
    #[test]
    fn finite_numbers_beyond_an_axis_are_refused_with_their_row() {
        let header = ["point", "n", "y"].map(String::from);
        let query = N_OVER_Y;
        let beyond = ": beyond ±1e300, more than an axis can span (a range over it, with the \
                      axis's room, overflows a 64-bit float)";
        let huge_y = rows_of(&[["0", "1", "1e308"], ["1", "2", "-1e308"]]);
        assert_eq!(
            line_chart(&header, &huge_y, &query).unwrap_err(),
            format!("column \"y\" holds \"1e308\" at point 0{beyond}")
        );
        let one_huge_y = rows_of(&[["0", "1", "5"], ["1", "2", "-1e308"]]);
        assert_eq!(
            line_chart(&header, &one_huge_y, &query).unwrap_err(),
            format!("column \"y\" holds \"-1e308\" at point 1{beyond}")
        );
        let huge_x = rows_of(&[["0", "1e308", "1"]]);
        assert_eq!(
            line_chart(&header, &huge_x, &query).unwrap_err(),
            format!("column \"n\" holds \"1e308\" at point 0{beyond}")
        );
        let widest = rows_of(&[["0", "-1e300", "1e300"], ["1", "1e300", "-1e300"]]);
        let chart = line_chart(&header, &widest, &query).unwrap();
        register_font(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap();
        let svg = line_chart_svg(&chart, Canvas::default()).unwrap();
        assert!(!svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn a_where_no_row_meets_is_named_with_the_values_its_column_holds() {
        let (header, rows) = sweep_table();
        let query = |filters| ChartQuery {
            x: "tensors.buf",
            y: "k.overlap",
            by: None,
            filters,
        };
        let misspelt = [("gemm".to_string(), "8193".to_string())];
        assert_eq!(
            line_chart(&header, &rows, &query(&misspelt)).unwrap_err(),
            "--where gemm=8193: no row has that value (the column holds: 4096, 8192)"
        );
        let apart = [
            ("point".to_string(), "0".to_string()),
            ("point".to_string(), "1".to_string()),
        ];
        assert_eq!(
            line_chart(&header, &rows, &query(&apart)).unwrap_err(),
            "no row meets every --where at once"
        );
        let kept = [("gemm".to_string(), "8192".to_string())];
        let no_number = ChartQuery {
            y: "killer",
            ..query(&kept)
        };
        assert_eq!(
            line_chart(&header, &rows, &no_number).unwrap_err(),
            "column \"killer\" holds \"none\" at point 1, not a number (only an empty cell, \
             `nan` or `inf` is left out)"
        );
    }

    #[test]
    fn a_where_on_a_column_of_distinct_values_is_answered_at_once() {
        // A metric of a large sweep: every row its own value. Listing them took a comparison
        // per pair of rows (minutes at 200,000 rows).
        let header = ["point", "x", "y"].map(String::from);
        let rows: Vec<Vec<String>> = (0..60_000)
            .map(|i| vec![i.to_string(), i.to_string(), format!("{i}.5")])
            .collect();
        let filters = [("y".to_string(), "7".to_string())];
        let query = ChartQuery {
            x: "x",
            y: "y",
            by: None,
            filters: &filters,
        };
        let started = std::time::Instant::now();
        let error = line_chart(&header, &rows, &query).unwrap_err();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(
            error.starts_with("--where y=7: no row has that value (the column holds: 0.5, 1.5, ")
                && error.ends_with(", … (60000 values))"),
            "{error}"
        );
    }

    #[test]
    fn rows_that_share_an_x_in_one_line_are_refused_naming_the_varying_axis() {
        let (header, rows) = sweep_table();
        let query = ChartQuery {
            x: "tensors.buf",
            y: "k.overlap",
            by: Some("killer"),
            filters: &[],
        };
        let err = line_chart(&header, &rows, &query).unwrap_err();
        assert!(
            err.starts_with("ambiguous series: point 0 and point 1"),
            "{err}"
        );
        assert!(err.contains("they differ in gemm."), "{err}");
        let by_gemm = ChartQuery {
            by: Some("gemm"),
            ..query
        };
        assert_eq!(
            line_chart(&header, &rows, &by_gemm).unwrap().series.len(),
            2
        );
        let filters = [("gemm".to_string(), "8192".to_string())];
        let one = ChartQuery {
            filters: &filters,
            ..query
        };
        let chart = line_chart(&header, &rows, &one).unwrap();
        assert_eq!(chart.series[0].points, [(1048576.0, 0.9), (2097152.0, 0.8)]);
    }

    /// A log axis over values whose ratio overflows an f64 (1e-160 to 1e160) is refused: drawn,
    /// it never ended (the axis's ticks are counted over an infinite range).
    #[test]
    fn a_log_axis_whose_range_overflows_is_refused_not_drawn_forever() {
        let header = ["point", "n", "y"].map(String::from);
        let rows = vec![
            ["0", "1e-160", "1e-160"].map(String::from).to_vec(),
            ["1", "1e160", "1e160"].map(String::from).to_vec(),
        ];
        let query = N_OVER_Y;
        let chart = line_chart(&header, &rows, &query).unwrap();
        let log_y = Canvas {
            log_y: true,
            ..Canvas::default()
        };
        let err = line_chart_svg(&chart, log_y).unwrap_err();
        assert!(
            err.starts_with("the y values span 1e-160 to 1e160: more than a logarithmic axis"),
            "{err}"
        );
        let log_x = Canvas {
            log_x: true,
            ..Canvas::default()
        };
        let err = line_chart_png(&chart, log_x).unwrap_err();
        assert!(
            err.starts_with("the x values span 1e-160 to 1e160"),
            "{err}"
        );
        // Linear, the same values draw.
        register_font(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap();
        assert!(line_chart_svg(&chart, Canvas::default()).is_ok());
    }

    #[test]
    fn canvases_draw_any_size_log_y_and_distinct_lines() {
        register_font(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap();
        let (header, rows) = sweep_table();
        let query = ChartQuery {
            x: "tensors.buf_bytes",
            y: "k.overlap",
            by: Some("gemm"),
            filters: &[],
        };
        let chart = line_chart(&header, &rows, &query).unwrap();
        let canvas = Canvas {
            width_px: 400,
            height_px: 300,
            log_y: true,
            log_x: false,
        };
        let svg = line_chart_svg(&chart, canvas).unwrap();
        assert!(
            svg.contains(r#"width="400" height="300""#),
            "{}",
            &svg[..200]
        );
        assert!(svg.contains("stroke-dasharray") || svg.matches("<polyline").count() > 2);
        // Both axes are logarithmic here, and their labels say so.
        assert!(
            svg.contains("tensors.buf_bytes (bytes, log scale)"),
            "{svg}"
        );
        assert!(
            svg.contains("k.overlap (R3: 1 = hidden, 0 = serial, log scale)"),
            "{svg}"
        );
        // A size of 0 B cannot sit on a log axis: the axis is linear, and its label does not
        // say "log scale".
        let mut with_zero_size = rows.clone();
        with_zero_size[0][header
            .iter()
            .position(|h| h == "tensors.buf_bytes")
            .unwrap()] = "0".into();
        let linear = line_chart(&header, &with_zero_size, &query).unwrap();
        let svg = line_chart_svg(&linear, Canvas::default()).unwrap();
        assert!(svg.contains("tensors.buf_bytes (bytes)"), "{svg}");
        assert!(!svg.contains("log scale"), "{svg}");
        // Two lines, two marker shapes: 12-gon circles for the first, triangles the second.
        assert_eq!(marker_of(0).len(), 12);
        assert_eq!(marker_of(1).len(), 3);
        assert_ne!(dash_of(0), dash_of(1));
        let png = line_chart_png(&chart, canvas).unwrap();
        assert_eq!(png[..8], *b"\x89PNG\r\n\x1a\n");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 400);
        let zero = [("point".to_string(), "0".to_string())];
        let mut with_zero = rows.clone();
        with_zero[0][5] = "0".into();
        let chart = line_chart(
            &header,
            &with_zero,
            &ChartQuery {
                filters: &zero,
                ..query
            },
        )
        .unwrap();
        let err = line_chart_svg(&chart, canvas).unwrap_err();
        assert!(err.contains("--log-y needs positive values"), "{err}");
        let tiny = Canvas {
            width_px: 2,
            ..canvas
        };
        assert!(line_chart_svg(&chart, tiny)
            .unwrap_err()
            .contains("--width 2"));
    }

    #[test]
    fn panels_stack_one_chart_per_y_on_a_log_x_axis() {
        register_font(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap();
        let header = ["ranks", "wall_s", "peak_memory_mib"].map(String::from);
        let rows = vec![
            ["1024", "1.5", "600"].map(String::from).to_vec(),
            ["8192", "12.0", "4800"].map(String::from).to_vec(),
        ];
        let chart = |y: &str| {
            let query = ChartQuery {
                x: "ranks",
                y,
                by: None,
                filters: &[],
            };
            line_chart(&header, &rows, &query).unwrap()
        };
        let charts = [chart("wall_s"), chart("peak_memory_mib")];
        let canvas = Canvas {
            log_x: true,
            ..Canvas::default()
        };
        let svg = panels_svg(&charts, canvas).unwrap();
        assert!(svg.contains("wall_s by ranks") && svg.contains("peak_memory_mib by ranks"));
        // One document holding both panels: a single root element, closed at the very end.
        assert_eq!(svg.matches("<svg").count(), 1, "{svg}");
        assert_eq!(svg.matches("</svg>").count(), 1);
        assert!(svg.trim_end().ends_with("</svg>"));
        // A log x axis of ranks ticks at powers of ten.
        let ticks: Vec<&str> = svg
            .split('>')
            .filter_map(|part| part.strip_suffix("</text"))
            .map(str::trim)
            .collect();
        assert!(ticks.contains(&"1000"), "{ticks:?}");
        assert!(ticks.contains(&"wall_s (s)") && ticks.contains(&"peak_memory_mib (MiB)"));
        let png = panels_png(&charts, canvas).unwrap();
        assert_eq!(png[..8], *b"\x89PNG\r\n\x1a\n");
        let rows_with_zero = vec![["0", "1", "1"].map(String::from).to_vec()];
        let query = ChartQuery {
            x: "ranks",
            y: "wall_s",
            by: None,
            filters: &[],
        };
        let zero = line_chart(&header, &rows_with_zero, &query).unwrap();
        assert!(panels_svg(&[zero], canvas)
            .unwrap_err()
            .contains("--log-x needs positive values"));
    }

    /// The y ticks of an SVG chart (right-aligned text) with their right edge's x, and the x of
    /// the rotated y axis label's centre.
    fn y_ticks_and_title_x(svg: &str) -> (Vec<(f64, String)>, f64) {
        let attribute = |tag: &str, name: &str| -> f64 {
            let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            tag[start..].split('"').next().unwrap().parse().unwrap()
        };
        let mut ticks = Vec::new();
        let mut title_x = f64::NAN;
        for part in svg.split("<text").skip(1) {
            let (tag, rest) = part.split_once('>').unwrap();
            let text = rest.split("</text").next().unwrap().trim().to_string();
            if tag.contains("rotate(270") {
                title_x = attribute(tag, "x");
            } else if tag.contains(r#"text-anchor="end""#) {
                ticks.push((attribute(tag, "x"), text));
            }
        }
        (ticks, title_x)
    }

    /// One line of `y` against x = 1, 2, 3 in column `y_column`.
    fn chart_of(y_column: &str, y: [&str; 3]) -> LineChart {
        let header = ["n", y_column].map(String::from);
        let rows: Vec<Vec<String>> = [["1", y[0]], ["2", y[1]], ["3", y[2]]]
            .map(|row| row.map(String::from).to_vec())
            .to_vec();
        let query = ChartQuery {
            x: "n",
            y: y_column,
            by: None,
            filters: &[],
        };
        line_chart(&header, &rows, &query).unwrap()
    }

    #[test]
    fn large_and_small_ticks_are_compact() {
        assert_eq!(compact_tick(1.2e12, 3), "1.2T");
        assert_eq!(compact_tick(250_000_000.0, 3), "250M");
        assert_eq!(compact_tick(12_345.0, 3), "12.345k");
        assert_eq!(compact_tick(-2e6, 3), "-2M");
        assert_eq!(compact_tick(3e-5, 3), "30µ");
        assert_eq!(compact_tick(0.005, 3), "5m");
        assert_eq!(compact_tick(0.25, 3), "0.25");
        assert_eq!(compact_tick(1000.0, 3), "1000");
        assert_eq!(compact_tick(0.0, 3), "0");
        assert_eq!(compact_tick(4e21, 3), "4e21");
        assert_eq!(compact_tick(-1e299, 3), "-1e299");
        assert_eq!(compact_tick(2.5e-20, 3), "2.5e-20");
        assert_eq!(compact_tick(5e-324, 3), "4.941e-324");
    }

    /// The review's charts: a y column of bytes ticked as numbers of nine digits over the axis
    /// label, values near 1e12 cut off at the left, values near 1e-5 all reading `0`.
    #[test]
    fn y_ticks_are_sizes_for_bytes_compact_otherwise_and_fit_the_left_margin() {
        register_font(include_bytes!("../../assets/fonts/DejaVuSans.ttf")).unwrap();
        let canvas = Canvas::default();
        let bytes = chart_of(
            "memory.peak_reserved_bytes",
            ["2097152", "134217728", "268435456"],
        );
        let (ticks, _) = y_ticks_and_title_x(&line_chart_svg(&bytes, canvas).unwrap());
        assert!(
            ticks.iter().any(|(_, t)| t == "250 MiB")
                && ticks.iter().all(|(_, t)| t.ends_with(" MiB")),
            "{ticks:?}"
        );
        let huge = chart_of("events", ["1.1e12", "1.2e12", "1.3e12"]);
        let tiny = chart_of("share", ["1e-5", "2e-5", "3e-5"]);
        let long = chart_of("n_count", ["123456.789", "123456.791", "123456.793"]);
        for chart in [&bytes, &huge, &tiny, &long] {
            let (ticks, title_x) = y_ticks_and_title_x(&line_chart_svg(chart, canvas).unwrap());
            let labels: Vec<&str> = ticks.iter().map(|(_, t)| t.as_str()).collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                labels.len(),
                "ticks that read alike: {labels:?}"
            );
            for (right_x, text) in &ticks {
                // At 11.3 px a character is at most 0.65 em wide; the rotated label's half
                // height (8 px) lies right of its centre.
                let width = text.chars().count() as f64 * 11.3 * 0.65;
                assert!(
                    right_x - width >= title_x + 8.0,
                    "{text:?} ends at {right_x}, over the axis label at {title_x}: {labels:?}"
                );
            }
        }
    }
}
