//! `xwarp-bench plot RESULT.json OUT.svg`: a result file drawn as people read these results,
//! with `plotters` (SVG backend):
//!
//! - a `compare` file: grouped bars per test and size, one bar per cell measured (the median of
//!   the rounds, a whisker from the smallest to the largest round), a panel per unit (latency,
//!   bandwidth, message rate: each test in its compare metric's), the legend beside them;
//! - a test's file with latency percentiles: CDF curves (latency against percentile), one per
//!   test, transport and size;
//! - a test's file with bandwidth: bandwidth against message size (an `-a` sweep), one line per
//!   test and transport.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::cli::TestKind;
use crate::compare::{Cell, CompareRecord, CompareReport, Metric};
use crate::report::Record;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// One bar: the median and the spread of the rounds; `None` where nothing was measured.
type Bar = Option<(f64, Option<[f64; 2]>)>;
/// A group of bars (one per cell) and its label.
type Group = (String, Vec<Bar>);

/// The series colours, in order (a compare chart's cells take them in [`Cell::ALL`] order).
pub const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// What a result file holds.
#[derive(Debug)]
pub enum Results {
    /// A test's records (one per size).
    Tests(Vec<Record>),
    /// `compare`'s records.
    Compare(Vec<CompareRecord>),
}

/// Reads a result file: a test's JSON array or `compare`'s.
pub fn read(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Ok(r) = serde_json::from_str::<Vec<Record>>(&text) {
        return Ok(Results::Tests(r));
    }
    CompareReport::from_json(&text)
        .map(|r| Results::Compare(r.records))
        .map_err(|e| {
            format!(
                "{} is neither a test's nor compare's result file: {e}",
                path.display()
            )
        })
}

/// Draws `input` into the SVG file `output`.
pub fn run(input: &Path, output: &Path) -> Result<(), String> {
    let results = read(input)?;
    let size = match &results {
        Results::Compare(c) => compare_size(c),
        Results::Tests(_) => (1000, 640),
    };
    let root = SVGBackend::new(output, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    match &results {
        Results::Compare(c) => compare_bars(&root, c)?,
        Results::Tests(t) if t.iter().any(|r| r.percentiles_us.is_some()) => cdf(&root, t)?,
        Results::Tests(t) if t.iter().any(|r| r.bw_gbps.is_some()) => bw_by_size(&root, t)?,
        Results::Tests(_) => {
            return Err(format!(
                "{}: nothing to draw (no percentiles, no bandwidth)",
                input.display()
            ))
        }
    }
    root.present().map_err(err)
}

/// A size with a binary unit: 64, 4K, 1M.
fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// One panel of grouped bars: groups (test and size) along x, one bar per cell of `cells` in
/// its colour (the legend beside the panels says which).
fn bar_panel(
    area: &Area,
    title: &str,
    y_desc: &str,
    cells: &[Cell],
    rows: &[Group],
) -> Result<(), String> {
    let top = rows
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .map(|(m, r)| r.map_or(*m, |r| r[1].max(*m)))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let groups = rows.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..groups as f64, 0f64..top)
        .map_err(err)?;
    let names: Vec<String> = rows.iter().map(|(n, _)| n.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 {
                names.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    let width = 0.8 / cells.len().max(1) as f64;
    for (t, &cell) in cells.iter().enumerate() {
        let color = cell_color(cell);
        let bars: Vec<(f64, f64, Option<[f64; 2]>)> = rows
            .iter()
            .enumerate()
            .filter_map(|(g, (_, v))| {
                let (m, r) = (*v.get(t)?)?;
                Some((g as f64 + 0.1 + t as f64 * width, m, r))
            })
            .collect();
        chart
            .draw_series(
                bars.iter().map(|&(x, m, _)| {
                    Rectangle::new([(x, 0.0), (x + width * 0.9, m)], color.filled())
                }),
            )
            .map_err(err)?;
        // The figure over each bar and its whisker: small bars beside tall ones stay readable.
        chart
            .draw_series(bars.iter().map(|&(x, m, r)| {
                let above = r.map_or(m, |r| r[1].max(m)) + top * 0.06;
                Text::new(format!("{m:.3}"), (x, above), ("sans-serif", 10))
            }))
            .map_err(err)?;
        // The spread of the rounds.
        chart
            .draw_series(bars.iter().filter_map(|&(x, _, r)| {
                let [lo, hi] = r?;
                let c = x + width * 0.45;
                Some(PathElement::new(
                    vec![(c, lo), (c, hi)],
                    BLACK.stroke_width(2),
                ))
            }))
            .map_err(err)?;
    }
    Ok(())
}

/// The colour of a cell's bars, the same in every panel.
pub fn cell_color(cell: Cell) -> RGBColor {
    let i = Cell::ALL.iter().position(|&c| c == cell).unwrap_or(0);
    COLORS[i % COLORS.len()]
}

/// Width of the legend column right of the panels.
pub const LEGEND_WIDTH: u32 = 170;
/// The legend box's fill (the tests find the box by it).
pub const LEGEND_FILL: RGBColor = RGBColor(248, 248, 248);
/// Height of one panel of a compare chart.
const PANEL_HEIGHT: u32 = 300;
/// Width of a compare chart.
const COMPARE_WIDTH: u32 = 1100;

/// The legend of `cells` in its own column (`area`), so it covers no bar: a swatch of each
/// cell's colour and its name, in a box.
fn legend(area: &Area, cells: &[Cell]) -> Result<(), String> {
    const ROW: i32 = 22;
    let (x0, y0) = (10, 40);
    let x1 = LEGEND_WIDTH as i32 - 10;
    let y1 = y0 + 12 + ROW * cells.len() as i32;
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], LEGEND_FILL.filled()))
        .map_err(err)?;
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], BLACK.stroke_width(1)))
        .map_err(err)?;
    for (i, &cell) in cells.iter().enumerate() {
        let y = y0 + 8 + ROW * i as i32;
        area.draw(&Rectangle::new(
            [(x0 + 10, y + 2), (x0 + 24, y + 14)],
            cell_color(cell).filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            cell.name(),
            (x0 + 32, y + 2),
            ("sans-serif", 13),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// A panel's title and y axis description.
fn panel_names(metric: Metric) -> (&'static str, &'static str) {
    match metric {
        Metric::Typical => (
            "compare: typical latency [usec] (median of rounds; whiskers: min-max)",
            "t_typical [usec]",
        ),
        Metric::Bandwidth => (
            "compare: bandwidth [Gb/s] (median of rounds; whiskers: min-max)",
            "BW average [Gb/sec]",
        ),
        Metric::Rate => (
            "compare: message rate [Mpps] (median of rounds)",
            "MsgRate [Mpps]",
        ),
    }
}

/// A group of bars: a test at a size and MTU.
type GroupKey = (TestKind, u64, Option<u32>);

/// The metrics `recs` have tests for, each with its groups (test, size and MTU, in the order
/// of the file).
fn panels(recs: &[CompareRecord]) -> Vec<(Metric, Vec<GroupKey>)> {
    let mut groups: Vec<GroupKey> = Vec::new();
    for r in recs {
        let key = (r.test, r.bytes, r.mtu);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    Metric::ALL
        .into_iter()
        .map(|m| {
            let these = groups.iter().copied();
            (m, these.filter(|g| Metric::of_test(g.0) == m).collect())
        })
        .filter(|(_, g): &(Metric, Vec<GroupKey>)| !g.is_empty())
        .collect()
}

/// The size of a compare chart of `recs`: a panel per unit, the legend beside them.
fn compare_size(recs: &[CompareRecord]) -> (u32, u32) {
    let n = panels(recs).len().max(1) as u32;
    (COMPARE_WIDTH, PANEL_HEIGHT * n)
}

/// `compare`: a panel per unit (latency in usec, bandwidth in Gb/s, message rate in Mpps),
/// each test in the panel of the figure compare compares it by, one bar per cell measured
/// (the table's columns and the cells beside it), and one legend right of the panels.
fn compare_bars(root: &Area, recs: &[CompareRecord]) -> Result<(), String> {
    let panels = panels(recs);
    if panels.is_empty() {
        return Err("the compare file has no records".into());
    }
    let mtus = recs
        .iter()
        .filter_map(|r| r.mtu)
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    let label = |(test, bytes, mtu): GroupKey| match mtu {
        Some(m) if mtus.len() > 1 => format!("{} {} @{m}", test.name(), size_label(bytes)),
        _ => format!("{} {}", test.name(), size_label(bytes)),
    };
    let find = |(test, bytes, mtu): GroupKey, cell: Cell| {
        recs.iter()
            .find(|r| r.is(test, cell, bytes) && r.mtu == mtu)
    };
    // The cells with a figure in `groups`, in [`Cell::ALL`] order.
    let measured = |groups: &[GroupKey], m: Metric| -> Vec<Cell> {
        let has = |c| {
            groups
                .iter()
                .any(|&g| find(g, c).is_some_and(|r| m.of(r).is_some()))
        };
        Cell::ALL.into_iter().filter(|&c| has(c)).collect()
    };
    let (charts, side) = root.split_horizontally(COMPARE_WIDTH - LEGEND_WIDTH);
    let mut shown: Vec<Cell> = Vec::new();
    let areas = charts.split_evenly((panels.len(), 1));
    for ((metric, groups), area) in panels.iter().zip(&areas) {
        let cells = measured(groups, *metric);
        let rows: Vec<Group> = groups
            .iter()
            .map(|&g| {
                let bars = cells.iter().map(|&c| {
                    let r = find(g, c)?;
                    Some((metric.of(r)?, metric.range(r)))
                });
                (label(g), bars.collect())
            })
            .collect();
        let (title, y_desc) = panel_names(*metric);
        bar_panel(area, title, y_desc, &cells, &rows)?;
        shown.extend(cells);
    }
    let shown: Vec<Cell> = Cell::ALL
        .into_iter()
        .filter(|c| shown.contains(c))
        .collect();
    legend(&side, &shown)
}

/// Latency CDF curves: x latency (usec), y percentile.
fn cdf(root: &Area, recs: &[Record]) -> Result<(), String> {
    let series: Vec<(String, &Vec<[f64; 2]>)> = recs
        .iter()
        .filter_map(|r| {
            let p = r.percentiles_us.as_ref()?;
            Some((format!("{} {} {} B", r.test, r.transport, r.bytes), p))
        })
        .collect();
    let xmax = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q[1]))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let mut chart = ChartBuilder::on(root)
        .caption("latency percentiles (CDF)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..xmax, 0f64..100f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("latency [usec]")
        .y_desc("percentile [%]")
        .draw()
        .map_err(err)?;
    for (i, (name, p)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                p.iter().map(|q| (q[1], q[0])),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Bandwidth against message size (log2 axis), one line per test and transport.
fn bw_by_size(root: &Area, recs: &[Record]) -> Result<(), String> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in recs.iter().filter(|r| r.bw_gbps.is_some()) {
        let k = (r.test.clone(), r.transport.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let log2 = |b: u64| (b.max(1) as f64).log2();
    let (lo, hi) = recs.iter().fold((f64::MAX, 0f64), |(lo, hi), r| {
        (lo.min(log2(r.bytes)), hi.max(log2(r.bytes)))
    });
    let ymax = recs
        .iter()
        .filter_map(|r| r.bw_gbps)
        .fold(0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(root)
        .caption("bandwidth against message size", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo - 0.5)..(hi + 0.5), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size [bytes]")
        .y_desc("BW average [Gb/sec]")
        .x_label_formatter(&|x| size_label(2f64.powf(x.round()) as u64))
        .draw()
        .map_err(err)?;
    for (i, (test, transport)) in keys.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<(f64, f64)> = recs
            .iter()
            .filter(|r| &r.test == test && &r.transport == transport)
            .filter_map(|r| Some((log2(r.bytes), r.bw_gbps?)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{test} {transport}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}
