//! `xwarp-bench plot`: a compare file becomes grouped bars per transport with the spread of the
//! rounds; a latency file CDF curves; a bandwidth sweep a line against size. The SVG is checked
//! for the expected series (legend entries, bars in each transport's colour, group labels).

use std::path::PathBuf;
use std::process::Command;

use bench::cli::TestKind;
use bench::compare::{Cell, CompareRecord};
use bench::report::Record;
use bench::stats::{BwStats, LatencyRecorder};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("xwarp-plot-{}-{name}", std::process::id()))
}

fn plot(input: &PathBuf, output: &PathBuf) -> String {
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

/// The text of every `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

fn rec(test: &str, t: &str, bytes: u64, lat: Option<f64>, bw: Option<f64>) -> CompareRecord {
    let test = TestKind::from_name(test).unwrap();
    CompareRecord {
        t_typical_us: lat,
        p99_us: lat,
        bw_gbps: bw,
        t_typical_range_us: lat.map(|v| [v * 0.9, v * 1.2]),
        bw_range_gbps: bw.map(|v| [v * 0.8, v * 1.1]),
        ..CompareRecord::new(test, Cell::from_name(t).unwrap(), bytes)
    }
}

#[test]
fn compare_becomes_grouped_bars_per_transport_with_the_spread_of_rounds() {
    let recs = vec![
        rec("write_lat", "raw", 64, Some(9.0), None),
        rec("write_lat", "xdp", 64, Some(14.0), None),
        rec("write_lat", "kernel", 64, Some(31.0), None),
        rec("write_bw", "raw", 65536, None, Some(7.9)),
        rec("write_bw", "xdp", 65536, None, Some(4.2)),
        rec("write_bw", "kernel", 65536, None, Some(5.5)),
        rec("rpc_read", "raw", 1 << 20, None, None),
        rec("rpc_read", "xdp", 1 << 20, None, Some(3.1)),
        rec("rpc_read", "kernel", 1 << 20, None, Some(4.8)),
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
    // Two panels, each with one legend of the three transports.
    assert_eq!(t.iter().filter(|x| *x == "xdp").count(), 2, "{t:?}");
    // Bars: 3 latency + 5 bandwidth (raw rpc_read was not measured), plus a legend swatch
    // per transport and panel, in each transport's colour.
    let fills = |rgb: &str| svg.matches(&format!("fill=\"{rgb}\"")).count();
    assert_eq!(fills("#1F77B4"), 2 + 2, "raw bars and swatches");
    assert_eq!(fills("#FF7F0E"), 3 + 2, "xdp bars and swatches");
    assert_eq!(fills("#2CA02C"), 3 + 2, "kernel bars and swatches");
    // A whisker per measured bar.
    assert!(svg.matches("<polyline").count() >= 8, "whiskers");
    if let Some(png) = render_png(&output) {
        assert!(std::fs::metadata(png).unwrap().len() > 1000);
    }
    let _ = std::fs::remove_file(&input);
}

/// With `rsvg-convert` installed, the SVG renders (a PNG next to it); `None` without it.
fn render_png(svg: &PathBuf) -> Option<PathBuf> {
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
