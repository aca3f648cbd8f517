//! `c10dsim plot` and `c10dsim run --svg`: read a sweep CSV or take a Timeline, have
//! `analysis::plot` draw it, write the picture. The chart's font is read here, from
//! `C10DSIM_FONT` or the usual system places, else the DejaVu Sans compiled in.

use crate::Failure;
use analysis::plot::{self, ChartQuery};
use sim::timeline::Timeline;
use std::path::{Path, PathBuf};

/// What `c10dsim plot` was asked to draw.
pub struct PlotArgs {
    pub csv: PathBuf,
    pub x: String,
    /// One panel per y column.
    pub y: Vec<String>,
    pub by: Option<String>,
    /// `COLUMN=VALUE` filters.
    pub filters: Vec<String>,
    /// Size and y scale.
    pub canvas: plot::Canvas,
    /// `-`: SVG on stdout.
    pub output: PathBuf,
}

/// The variable naming a TrueType font for chart text, and where one is looked for otherwise.
const FONT_VARIABLE: &str = "C10DSIM_FONT";
const FONT_PLACES: [&str; 6] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

fn load_font() -> Result<(), Failure> {
    let chosen = std::env::var(FONT_VARIABLE).ok();
    let places: Vec<&str> = match &chosen {
        Some(path) => vec![path.as_str()],
        None => FONT_PLACES.to_vec(),
    };
    for place in &places {
        if let Ok(bytes) = crate::stdio::read_file(std::path::Path::new(place)) {
            // plotters keeps registered fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            return plot::register_font(bytes)
                .map_err(|error| Failure::input(format!("{place}: {error}")));
        }
    }
    if chosen.is_some() {
        return Err(Failure::input(format!(
            "{FONT_VARIABLE} names {}, which cannot be read",
            places.join(", ")
        )));
    }
    // No system font: the DejaVu Sans shipped with the project (assets/fonts, free licence).
    plot::register_font(SHIPPED_FONT)
        .map_err(|error| Failure::input(format!("shipped font: {error}")))
}

/// DejaVu Sans, compiled in so that charts draw on machines without fonts.
static SHIPPED_FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

/// Whether the picture `output` names is a PNG (else an SVG; `-`, standard output, is SVG),
/// by its extension; any other name is refused.
pub fn picture_is_png(output: &Path) -> Result<bool, Failure> {
    let extension = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        _ if crate::stdio::is_dash(output) => Ok(false),
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => Err(Failure::input(format!(
            "{}: the picture's name must end in .svg or .png",
            output.display()
        ))),
    }
}

pub fn plot(args: &PlotArgs) -> Result<u8, Failure> {
    let png = picture_is_png(&args.output)?;
    let filters = args
        .filters
        .iter()
        .map(|filter| {
            filter
                .split_once('=')
                .map(|(column, value)| (column.trim().to_string(), value.trim().to_string()))
                .ok_or_else(|| {
                    Failure::input(format!("--where expects COLUMN=VALUE, found {filter:?}"))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // The one check of the arguments alone; every later error is the CSV's, named by it.
    args.canvas.check_size().map_err(Failure::input)?;
    let in_csv = |error: String| Failure::input(format!("{}: {error}", args.csv.display()));
    let (header, records) = crate::sweep::read_rows(&args.csv)?;
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| record.iter().map(ToString::to_string).collect())
        .collect();
    let charts = args
        .y
        .iter()
        .map(|y| {
            let query = ChartQuery {
                x: &args.x,
                y,
                by: args.by.as_deref(),
                filters: &filters,
            };
            plot::line_chart(&header, &rows, &query).map_err(in_csv)
        })
        .collect::<Result<Vec<_>, _>>()?;
    load_font()?;
    let bytes = if png {
        plot::panels_png(&charts, args.canvas)
    } else {
        plot::panels_svg(&charts, args.canvas).map(String::into_bytes)
    }
    .map_err(in_csv)?;
    crate::stdio::write_bytes(&args.output, &bytes)?;
    // A CSV of one shard, or of a sweep not finished, draws lines with points missing: said as
    // `merge` says it.
    if let Some(missing) = crate::sweep::missing_points_of(&header, &records) {
        note!("c10dsim: warning: {missing}");
    }
    if crate::stdio::is_dash(&args.output) {
        return Ok(0);
    }
    let lines: usize = charts.iter().map(|chart| chart.series.len()).sum();
    note!(
        "c10dsim: wrote {} ({}{})",
        args.output.display(),
        analysis::text::counted(lines as u64, "line"),
        if charts.len() > 1 {
            format!(" in {} panels", charts.len())
        } else {
            String::new()
        }
    );
    Ok(0)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    crate::stdio::write_bytes(path, bytes)
}

/// `run --svg` draws SVG only: a name ending in `.png`, which `plot` would draw as a PNG, is
/// refused rather than given SVG bytes.
pub fn check_timeline_svg_name(path: &Path) -> Result<(), Failure> {
    if picture_is_png(path).unwrap_or(false) {
        return Err(Failure::input(format!(
            "--svg {}: the Gantt chart is drawn as SVG only; name the file .svg",
            path.display()
        )));
    }
    Ok(())
}

/// `run --svg`: the Timeline as a Gantt chart.
pub fn write_timeline_svg(timeline: &Timeline, path: &Path) -> Result<(), Failure> {
    write(path, analysis::gantt::timeline_svg(timeline).as_bytes())
}
