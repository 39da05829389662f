//! `xwarp-bench plot`: a compare file becomes grouped bars per cell with the spread of the
//! rounds, a panel per unit and the legend beside them; a latency file CDF curves; a bandwidth
//! sweep a line against size. The SVG is checked for the expected series (legend entries, bars
//! in each cell's colour, where they stand, group labels).

use std::path::{Path, PathBuf};
use std::process::Command;

use bench::cli::TestKind;
use bench::compare::{Cell, CompareRecord};
use bench::plot::{cell_color, LEGEND_FILL};
use bench::report::Record;
use bench::stats::{BwStats, LatencyRecorder};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("xwarp-plot-{}-{name}", std::process::id()))
}

fn plot(input: &Path, output: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_xwarp-bench"))
        .args(["plot"])
        .arg(input)
        .arg(output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(output).unwrap()
}

/// The elements `<NAME ...>` of an SVG, each as its attributes (` a="1" b="2"`) and its text
/// up to `</NAME>` (empty for self-closing ones).
fn elements<'a>(svg: &'a str, name: &str) -> Vec<(&'a str, String)> {
    svg.split(&format!("<{name}"))
        .skip(1)
        .filter(|t| t.starts_with(' '))
        .filter_map(|t| {
            let open = &t[..t.find('>')?];
            let body = &t[open.len() + 1..];
            let text = body
                .find(&format!("</{name}>"))
                .map_or("", |e| &body[..e])
                .trim();
            Some((open, text.to_string()))
        })
        .collect()
}

/// The text of every `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    elements(svg, "text").into_iter().map(|(_, t)| t).collect()
}

/// An attribute of an opening tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A rectangle of the SVG: its fill and corners (x0, y0, x1, y1).
#[derive(Debug, Clone, Copy)]
struct Rect<'a> {
    fill: &'a str,
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect<'_> {
    fn overlaps(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn inside(&self, o: &Rect) -> bool {
        self.x0 >= o.x0 && self.x1 <= o.x1 && self.y0 >= o.y0 && self.y1 <= o.y1
    }
}

fn rects(svg: &str) -> Vec<Rect<'_>> {
    elements(svg, "rect")
        .into_iter()
        .map(|(tag, _)| {
            let (x, y) = (num(tag, "x"), num(tag, "y"));
            Rect {
                fill: attr(tag, "fill").unwrap_or(""),
                x0: x,
                y0: y,
                x1: x + num(tag, "width"),
                y1: y + num(tag, "height"),
            }
        })
        .collect()
}

/// A cell's colour as the SVG writes it.
fn hex(cell: Cell) -> String {
    let c = cell_color(cell);
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// compare's JSON from a short run (one MTU, every cell of the plan and beside it), as
/// `xwarp-bench compare --json` writes it: every unit has its panel, send_bw's message rate
/// stands in the Mpps panel (and its Gb/s figure nowhere), every cell measured has its bars
/// (the polling Linux TCP ones in the latency panel), and the legend covers no bar.
#[test]
fn a_compare_file_becomes_a_panel_per_unit_with_every_cell_and_the_legend_beside() {
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare-short.json");
    let output = tmp("compare-short.svg");
    let svg = plot(&input, &output);
    let labels: Vec<(f64, String)> = elements(&svg, "text")
        .into_iter()
        .map(|(tag, t)| (num(tag, "y"), t))
        .collect();
    // A panel per unit, top to bottom: each from its title to the next one's.
    let mut panels: Vec<(f64, &str)> = Vec::new();
    for unit in ["[usec]", "[Gb/s]", "[Mpps]"] {
        let titles: Vec<f64> = labels
            .iter()
            .filter(|(_, t)| t.starts_with("compare: ") && t.contains(unit))
            .map(|(y, _)| *y)
            .collect();
        assert_eq!(titles.len(), 1, "one {unit} panel: {labels:?}");
        panels.push((titles[0], unit));
    }
    panels.sort_by(|a, b| a.0.total_cmp(&b.0));
    let panel_of = |y: f64| {
        panels
            .iter()
            .rev()
            .find(|(top, _)| y >= *top)
            .map(|(_, unit)| *unit)
    };
    // send_bw: its message rates over the bars of the Mpps panel, its Gb/s figures nowhere.
    for mpps in ["1.068", "0.321", "0.471", "3.912"] {
        let at: Vec<f64> = labels
            .iter()
            .filter(|(_, t)| t == mpps)
            .map(|l| l.0)
            .collect();
        assert_eq!(at.len(), 1, "{mpps}");
        assert_eq!(panel_of(at[0]), Some("[Mpps]"), "{mpps} at y {}", at[0]);
    }
    for gbps in ["0.547", "0.164", "0.241", "2.003"] {
        assert!(
            !labels.iter().any(|(_, t)| t == gbps),
            "send_bw {gbps} Gb/s drawn"
        );
    }
    assert!(labels.iter().any(|(_, t)| t == "send_bw 64"));
    let all = rects(&svg);
    let fill = format!(
        "#{:02X}{:02X}{:02X}",
        LEGEND_FILL.0, LEGEND_FILL.1, LEGEND_FILL.2
    );
    let boxes: Vec<&Rect> = all.iter().filter(|r| r.fill == fill).collect();
    assert_eq!(boxes.len(), 1, "one legend box");
    let legend = boxes[0];
    let mut swatches = 0;
    for cell in Cell::ALL {
        let colour = hex(cell);
        let (inside, bars): (Vec<&Rect>, Vec<&Rect>) = all
            .iter()
            .filter(|r| r.fill == colour)
            .partition(|r| r.inside(legend));
        assert_eq!(
            inside.len(),
            1,
            "{cell}: one swatch in the legend {legend:?} {bars:?}"
        );
        swatches += inside.len();
        assert!(
            labels.iter().any(|(_, t)| t == cell.name()),
            "{cell} named in the legend"
        );
        for b in &bars {
            assert!(
                !b.overlaps(legend),
                "{cell}: the legend covers a bar at {b:?}"
            );
        }
        let per_panel = |unit| bars.iter().filter(|b| panel_of(b.y0) == Some(unit)).count();
        let want = match cell {
            // write_lat, send_lat; write_bw, rpc_read; send_bw.
            Cell::Xdp | Cell::Kernel | Cell::Linux => [2, 2, 1],
            Cell::Raw => [2, 1, 1],
            Cell::LinuxPoll => [2, 0, 0],
            Cell::XdpOneQueue | Cell::XdpTwoQueues | Cell::XdpTcp | Cell::XdpTcpOption => [0, 1, 0],
        };
        assert_eq!(
            ["[usec]", "[Gb/s]", "[Mpps]"].map(per_panel),
            want,
            "{cell}'s bars per panel"
        );
    }
    assert_eq!(swatches, Cell::ALL.len());
    if let Some(png) = render_png(&output) {
        assert!(std::fs::metadata(png).unwrap().len() > 1000);
    }
}

fn rec(test: TestKind, c: Cell, bytes: u64, lat: Option<f64>, bw: Option<f64>) -> CompareRecord {
    CompareRecord {
        t_typical_us: lat,
        p99_us: lat,
        bw_gbps: bw,
        t_typical_range_us: lat.map(|v| [v * 0.9, v * 1.2]),
        bw_range_gbps: bw.map(|v| [v * 0.8, v * 1.1]),
        ..CompareRecord::new(test, c, bytes)
    }
}

/// compare files of the bare-array format before the environment block still plot.
#[test]
fn compare_becomes_grouped_bars_per_transport_with_the_spread_of_rounds() {
    use TestKind::{RpcRead, WriteBw, WriteLat};
    let recs = vec![
        rec(WriteLat, Cell::Raw, 64, Some(9.0), None),
        rec(WriteLat, Cell::Xdp, 64, Some(14.0), None),
        rec(WriteLat, Cell::Kernel, 64, Some(31.0), None),
        rec(WriteBw, Cell::Raw, 65536, None, Some(7.9)),
        rec(WriteBw, Cell::Xdp, 65536, None, Some(4.2)),
        rec(WriteBw, Cell::Kernel, 65536, None, Some(5.5)),
        rec(RpcRead, Cell::Raw, 1 << 20, None, None),
        rec(RpcRead, Cell::Xdp, 1 << 20, None, Some(3.1)),
        rec(RpcRead, Cell::Kernel, 1 << 20, None, Some(4.8)),
    ];
    let input = tmp("compare.json");
    std::fs::write(&input, serde_json::to_string(&recs).unwrap()).unwrap();
    let output = tmp("compare.svg");
    let svg = plot(&input, &output);
    let t = texts(&svg);
    for want in [
        "raw",
        "xdp",
        "kernel",
        "write_lat 64",
        "write_bw 64K",
        "rpc_read 1M",
    ] {
        assert!(t.iter().any(|x| x == want), "no {want:?} in {t:?}");
    }
    // Two panels (no send_bw: no message rate panel), one legend of the three cells.
    assert_eq!(t.iter().filter(|x| x.starts_with("compare: ")).count(), 2);
    assert_eq!(t.iter().filter(|x| *x == "xdp").count(), 1, "{t:?}");
    // Bars: 3 latency + 5 bandwidth (raw rpc_read was not measured), plus a legend swatch
    // per cell, in each cell's colour.
    let fills = |c: Cell| svg.matches(&format!("fill=\"{}\"", hex(c))).count();
    assert_eq!(fills(Cell::Raw), 2 + 1, "raw bars and swatch");
    assert_eq!(fills(Cell::Xdp), 3 + 1, "xdp bars and swatch");
    assert_eq!(fills(Cell::Kernel), 3 + 1, "kernel bars and swatch");
    // A whisker per measured bar.
    assert!(svg.matches("<polyline").count() >= 8, "whiskers");
    let _ = std::fs::remove_file(&input);
}

/// With `rsvg-convert` installed, the SVG renders (a PNG next to it); `None` without it.
fn render_png(svg: &Path) -> Option<PathBuf> {
    let png = svg.with_extension("png");
    let ok = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(svg)
        .status()
        .ok()?
        .success();
    assert!(ok, "rsvg-convert failed on {}", svg.display());
    Some(png)
}

#[test]
fn latency_percentiles_become_cdf_curves_and_a_sweep_a_line_against_size() {
    let mut lat = LatencyRecorder::new();
    for us in 1..=1000u64 {
        lat.record(std::time::Duration::from_nanos(5_000 + us * 10));
    }
    let mut r = Record::latency(
        bench::cli::TestKind::WriteLat,
        "xdp",
        64,
        &lat.summary().unwrap(),
    );
    r.percentiles_us = Some(lat.percentiles());
    let input = tmp("lat.json");
    std::fs::write(&input, serde_json::to_string(&vec![r]).unwrap()).unwrap();
    let svg = plot(&input, &tmp("lat.svg"));
    let t = texts(&svg);
    assert!(t.iter().any(|x| x == "write_lat xdp 64 B"), "{t:?}");
    assert!(t.iter().any(|x| x.contains("percentile")), "{t:?}");
    assert!(svg.contains("<polyline"), "a curve");

    let sweep: Vec<Record> = (1..=12)
        .map(|p| {
            let b = BwStats {
                iterations: 100,
                peak_gbps: p as f64,
                avg_gbps: p as f64 * 0.9,
                msg_rate_mpps: 0.1,
            };
            Record::bandwidth(bench::cli::TestKind::WriteBw, "kernel", 1 << p, &b)
        })
        .collect();
    let input2 = tmp("bw.json");
    std::fs::write(&input2, serde_json::to_string(&sweep).unwrap()).unwrap();
    let svg = plot(&input2, &tmp("bw.svg"));
    let t = texts(&svg);
    assert!(t.iter().any(|x| x == "write_bw kernel"), "{t:?}");
    assert!(t.iter().any(|x| x == "4K"), "a size label: {t:?}");
    assert_eq!(svg.matches("<circle").count(), 12, "a point per size");
    for p in [input, input2] {
        let _ = std::fs::remove_file(p);
    }
}
