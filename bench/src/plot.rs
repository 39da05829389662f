//! `xwarp-bench plot RESULT.json OUT.svg`: a result file drawn as people read these results,
//! with `plotters` (SVG backend):
//!
//! - a `compare` file: grouped bars per test and size, one bar per transport (the median of the
//!   rounds, a whisker from the smallest to the largest round), latency and bandwidth in two
//!   panels;
//! - a test's file with latency percentiles: CDF curves (latency against percentile), one per
//!   test, transport and size;
//! - a test's file with bandwidth: bandwidth against message size (an `-a` sweep), one line per
//!   test and transport.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::cli::TestKind;
use crate::compare::{Cell, CompareRecord, CompareReport};
use crate::report::Record;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// One bar: the median and the spread of the rounds; `None` where nothing was measured.
type Bar = Option<(f64, Option<[f64; 2]>)>;
/// A group of bars (one per transport) and its label.
type Group = (String, Vec<Bar>);

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
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
    let root = SVGBackend::new(output, (1000, 640)).into_drawing_area();
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

/// One panel of grouped bars: groups (test and size) along x, one bar per transport.
fn bar_panel(area: &Area, title: &str, unit: &str, rows: &[Group]) -> Result<(), String> {
    let top = rows
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .map(|(m, r)| r.map_or(*m, |r| r[1].max(*m)))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let groups = rows.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
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
        .y_desc(unit)
        .draw()
        .map_err(err)?;
    let n = Cell::TABLE.len() as f64;
    let width = 0.8 / n;
    for (t, cell) in Cell::TABLE.iter().enumerate() {
        let color = COLORS[t % COLORS.len()];
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
            .map_err(err)?
            .label(cell.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        // The figure over each bar: small bars beside tall ones stay readable.
        chart
            .draw_series(bars.iter().map(|&(x, m, _)| {
                Text::new(format!("{m:.3}"), (x, m + top * 0.02), ("sans-serif", 11))
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// `compare`: latency bars above, bandwidth bars below.
fn compare_bars(root: &Area, recs: &[CompareRecord]) -> Result<(), String> {
    // One group per test, size and MTU (compare runs its plan at each MTU).
    let mut groups: Vec<(TestKind, u64, Option<u32>)> = Vec::new();
    for r in recs {
        let key = (r.test, r.bytes, r.mtu);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    let mtus = groups
        .iter()
        .filter_map(|g| g.2)
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    let label = |test: TestKind, bytes: u64, mtu: Option<u32>| match mtu {
        Some(m) if mtus.len() > 1 => format!("{} {} @{m}", test.name(), size_label(bytes)),
        _ => format!("{} {}", test.name(), size_label(bytes)),
    };
    let rows = |lat: bool| -> Vec<Group> {
        groups
            .iter()
            .filter(|(test, _, _)| test.is_latency() == lat)
            .map(|(test, bytes, mtu)| {
                let per: Vec<_> = Cell::TABLE
                    .iter()
                    .map(|&c| {
                        let r = recs
                            .iter()
                            .find(|r| r.is(*test, c, *bytes) && r.mtu == *mtu)?;
                        if lat {
                            Some((r.t_typical_us?, r.t_typical_range_us))
                        } else {
                            Some((r.bw_gbps?, r.bw_range_gbps))
                        }
                    })
                    .collect();
                (label(*test, *bytes, *mtu), per)
            })
            .collect()
    };
    let (upper, lower) = root.split_vertically(320);
    bar_panel(
        &upper,
        "compare: typical latency (median of rounds; whiskers: min-max)",
        "t_typical [usec]",
        &rows(true),
    )?;
    bar_panel(
        &lower,
        "compare: bandwidth (median of rounds; whiskers: min-max)",
        "BW average [Gb/sec]",
        &rows(false),
    )
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
