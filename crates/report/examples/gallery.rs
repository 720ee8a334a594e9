//! Writes one chart of every kind into `out/gallery/` (SVG and PNG) to look at:
//! `cargo run -p worldmesh-report --example gallery`.

use worldmesh_report::{HeatMap, OutputDir, Plot, Scale, Series};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = OutputDir::create("out/gallery")?;
    // Lines with error bars, integer x, a reference line, twelve series.
    let mut p = Plot::of(
        "paper 000 Fig. 9",
        "per-node locator bandwidth vs nodes (twelve series)",
        "nodes",
        "kB/s per node",
    );
    for i in 0..12 {
        let pts: Vec<(f64, f64)> = [8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
            .iter()
            .map(|n| (*n, (1.0 + i as f64) * f64::sqrt(*n)))
            .collect();
        let err = pts.iter().map(|(_, y)| (y * 0.9, y * 1.1)).collect();
        p = p.with(Series::marked(format!("series {i} with a long-ish name"), pts).with_errors(err));
    }
    out.write_plot("lines.svg", &p.with_hline("paper: 40 kB/s", 40.0))?;
    // Log-log.
    let l = Plot::of("paper 000 Fig. 12a", "bandwidth scaling", "players", "kbit/s")
        .with(Series::marked(
            "worldmesh",
            vec![(9.0, 30.0), (25.0, 40.0), (100.0, 60.0), (512.0, 90.0)],
        ))
        .with(Series::marked(
            "broadcast",
            vec![(9.0, 25.0), (25.0, 80.0), (100.0, 400.0), (512.0, 2500.0)],
        ))
        .scales(Scale::Log, Scale::Log);
    out.write_plot("loglog.svg", &l)?;
    // CDF on a log x axis.
    let v: Vec<f64> = (1..2000).map(|i| (f64::from(i) / 200.0).exp() / 10.0).collect();
    let c = Plot::of(
        "paper 001 Fig. 6",
        "CDF of relative error",
        "relative error",
        "fraction of pairs",
    )
    .with(Series::cdf("vivaldi", &v))
    .with(Series::cdf(
        "landmarks",
        &v.iter().map(|x| x * 0.5).collect::<Vec<_>>(),
    ))
    .with_vline("paper: 80% within 0.5", 0.5)
    .scales(Scale::Log, Scale::Linear);
    out.write_plot("cdf.svg", &c)?;
    // Bars with categories and errors.
    let b = Plot::of(
        "paper 003 Fig. 9",
        "players per server before and after one balancing round",
        "server",
        "players",
    )
    .with_categories((1..=10).map(|s| format!("S{s}")))
    .with(Series::bars(
        "before",
        &[
            5000.0, 5200.0, 4800.0, 6100.0, 5300.0, 5000.0, 6300.0, 6400.0, 6000.0, 6500.0,
        ],
    ))
    .with(Series::bars("Classic after", &[5400.0; 10]).with_errors(vec![(5300.0, 5500.0); 10]))
    .with(Series::bars("Hybrid after", &[5100.0; 10]))
    .with_hline("max_S_load", 5500.0);
    out.write_plot("bars.svg", &b)?;
    // Stacked areas.
    let a = Plot::of(
        "paper 000 Fig. 9",
        "locator bandwidth by component, rangedht rect",
        "nodes",
        "bytes/s per node",
    )
    .with(Series::area(
        "routing",
        vec![(8.0, 1000.0), (16.0, 1500.0), (32.0, 2000.0), (64.0, 2600.0)],
    ))
    .with(Series::area(
        "match delivery",
        vec![(8.0, 500.0), (16.0, 900.0), (32.0, 1400.0), (64.0, 2000.0)],
    ))
    .with(Series::area(
        "maintenance",
        vec![(8.0, 300.0), (16.0, 320.0), (32.0, 330.0), (64.0, 340.0)],
    ));
    out.write_plot("areas.svg", &a)?;
    // Scatter.
    let s = Plot::of(
        "paper 001 Fig. 6",
        "directed relative error vs RTT",
        "RTT (ms)",
        "(estimate − RTT) / RTT",
    )
    .with(Series::points(
        "vivaldi",
        (1..3000)
            .map(|i| {
                (
                    f64::from(i % 400) + 1.0,
                    ((f64::from(i) * 0.37).sin()) * 50.0 / (f64::from(i % 400) + 5.0),
                )
            })
            .collect(),
    ))
    .with_hline("", 0.0);
    out.write_plot("scatter.svg", &s)?;
    // Heat map.
    let (nx, ny) = (60, 40);
    let vals = (0..nx * ny)
        .map(|i| {
            let (x, y) = ((i % nx) as f64, (i / nx) as f64);
            if (x - 30.0).abs() < 3.0 && y > 30.0 {
                f64::NAN
            } else {
                (-((x - 20.0).powi(2) + (y - 15.0).powi(2)) / 80.0).exp() * 1e-3
            }
        })
        .collect();
    let mut h = HeatMap::new(
        "density of players",
        "P(i, N), probability per cell (log scale)",
        (nx, ny),
        32.0,
        vals,
    );
    h.figure = "paper 004 Fig. 3".into();
    h.log = true;
    out.write_heatmap("heat.svg", &h)?;
    Ok(())
}
