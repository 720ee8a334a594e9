//! `worldmesh plan`, run as a user would.

mod common;

use common::{run_ok, tmp, worldmesh};

#[test]
fn plan_prints_predictions_and_writes_files() {
    let out = tmp("good");
    // 10 × 10 free cells, uniform density, everything visible and of interest:
    // S = Σᵢ Σ_{j≠i} (1/100)² = 0.99, so Rel(10) = 10² · 0.99 = 99 and the expected
    // directed relationships are 10 · 9 · 0.99 = 89.1 (890.1… updates/s at 10 Hz).
    let stdout = run_ok(
        worldmesh()
            .args([
                "plan",
                "--map",
                "empty:320x320",
                "--players",
                "10,20",
                "--aoi",
                "none",
                "--density",
                "uniform",
                "--out",
            ])
            .arg(out.path()),
    );
    assert!(
        stdout.contains("SteadyState(10)") && stdout.contains("SteadyState(20)"),
        "{stdout}"
    );
    assert!(stdout.contains("4950 visible pairs"), "{stdout}");
    let csv = std::fs::read_to_string(out.path().join("plan.csv")).unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[0], "SteadyState(10)");
    let num = |k: usize| row[k].parse::<f64>().unwrap();
    assert!((num(3) - 99.0).abs() < 1e-9, "{csv}");
    assert!((num(4) - 89.1).abs() < 1e-9, "{csv}");
    assert!((num(5) - 891.0).abs() < 1e-6, "{csv}");
    for f in ["plan.json", "density.svg", "visibility.svg"] {
        assert!(out.path().join(f).exists(), "{f}");
    }
}

#[test]
fn plan_reads_load_states_and_map_files() {
    let dir = tmp("files");
    let map = dir.path().join("map.toml");
    std::fs::write(
        &map,
        "width = 640\nheight = 320\n[[obstacle]]\nmin_x = 300\nmin_y = 0\nmax_x = 340\nmax_y = 320\n",
    )
    .unwrap();
    let load = dir.path().join("load.toml");
    std::fs::write(
        &load,
        "[[steady]]\nname = \"night\"\nplayers = 12\n[daily]\npoints = [[0, 12], [19.5, 24]]\n[[peak]]\nplayers = 30\n",
    )
    .unwrap();
    let stdout = run_ok(
        worldmesh()
            .args(["plan", "--transport", "quic", "--map"])
            .arg(&map)
            .arg("--load")
            .arg(&load)
            .arg("--out")
            .arg(dir.path().join("out")),
    );
    assert!(
        stdout.contains("night") && stdout.contains("peak(30)"),
        "{stdout}"
    );
    assert!(stdout.contains("daily 19:30"), "{stdout}");
    // The wall splits the map: with `--sight none` interest crosses it.
    let pairs = |sight: &str| -> u64 {
        let o = worldmesh()
            .args([
                "plan",
                "--aoi",
                "none",
                "--players",
                "4",
                "--sight",
                sight,
                "--map",
            ])
            .arg(&map)
            .arg("--out")
            .arg(dir.path().join(sight))
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        let at = s.find(" visible pairs").unwrap();
        s[..at].rsplit(' ').next().unwrap().parse().unwrap()
    };
    // 20 × 10 cells of 32, the wall covers columns 9 and 10: 2 × 90 free cells.
    assert_eq!(pairs("los"), 2 * (90 * 89 / 2));
    assert_eq!(pairs("none"), 180 * 179 / 2);
    for f in ["bandwidth.svg", "daily.svg"] {
        assert!(dir.path().join("out").join(f).exists(), "{f}");
    }
    assert!(
        stdout.contains("quic transport") && stdout.contains("58 bytes/packet"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("SteadyState(10)"),
        "--load alone replaces the default counts"
    );
}

#[test]
fn bad_map_file_names_the_line() {
    let dir = tmp("badmap");
    let map = dir.path().join("bad.toml");
    std::fs::write(
        &map,
        "width = 100\nheight = 100\n\n[[obstacle]]\nmin_x = 50\nmin_y = 0\nmax_x = 10\nmax_y = 5\n",
    )
    .unwrap();
    let o = worldmesh().args(["plan", "--map"]).arg(&map).output().unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("bad.toml:4:") && stderr.contains("obstacle 1"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_are_refused_clearly() {
    let cases: [(&[&str], &str); 9] = [
        (&["--players", "ten"], "invalid value 'ten'"),
        (&["--trace", "a.csv", "--trace", "b.csv"], "give each as N=FILE"),
        (&["--cell-size", "0.5"], "grid cells"),
        (&["--aoi", "circle:3"], "expected none, radius:R"),
        (&["--map", "random:10x10:3"], "expected random:WIDTHxHEIGHT"),
        (&["--transport", "tcp"], "unknown transport"),
        (
            &["--validate", "--players", "12"],
            "positive multiple of --players-per-node",
        ),
        (&["--validate", "--map", "empty:64x64"], "cannot be used with"),
        (&["--duration", "5"], "--validate"),
    ];
    for (args, want) in cases {
        let o = worldmesh().arg("plan").args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn plan_builds_densities_from_traces_per_n() {
    let dir = tmp("trace");
    // Two traces on a 64 × 32 map (2 × 1 cells of 32): at N = 2 both avatars share
    // cell 0 (no cross-cell pairs → Rel = 0); at N = 4 they are split between the cells.
    std::fs::write(
        dir.path().join("n2.csv"),
        "time_s,object_kind,x,y\n0,avatar,5,5\n0,avatar,6,6\n0,missile,40,5\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("n4.csv"),
        "0,avatar,5,5\n0,avatar,40,5\n0.5,avatar,5,5\n0.5,avatar,40,5\n1,avatar,5,5\n1,avatar,40,5\n",
    )
    .unwrap();
    run_ok(
        worldmesh()
            .args([
                "plan",
                "--map",
                "empty:64x32",
                "--aoi",
                "none",
                "--players",
                "2,3,4",
                "--kind",
                "avatar",
            ])
            .arg("--trace")
            .arg(format!("2={}", dir.path().join("n2.csv").display()))
            .arg("--trace")
            .arg(format!("4={}", dir.path().join("n4.csv").display()))
            .args(["--sample-interval", "avatar=0.6", "--out"])
            .arg(dir.path().join("out")),
    );
    let csv = std::fs::read_to_string(dir.path().join("out/plan.csv")).unwrap();
    let rel: Vec<f64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap().parse().unwrap())
        .collect();
    // N = 2: P = (1, 0) → 0. N = 4: P = (½, ½) → 16 · ½ = 8. N = 3 interpolates the maps
    // halfway: P = (¾, ¼) → 9 · 2 · 3/16 = 3.375.
    assert_eq!(rel, vec![0.0, 3.375, 8.0], "{csv}");
    assert!(dir.path().join("out/density_n2.svg").exists() && dir.path().join("out/density_n4.svg").exists());
    // A bad trace line is named.
    std::fs::write(dir.path().join("bad.csv"), "0,avatar,1,2\n0,avatar,1\n").unwrap();
    let o = worldmesh()
        .args(["plan", "--map", "empty:64x32", "--trace"])
        .arg(dir.path().join("bad.csv"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && stderr.contains("bad.csv:2:"), "{stderr}");
}

#[test]
fn plan_is_deterministic_across_thread_counts() {
    let dir = tmp("det");
    let run = |threads: &str, out: &str| {
        let o = worldmesh()
            .args([
                "plan",
                "--map",
                "random:960x640:8:2",
                "--players",
                "5,40",
                "--threads",
                threads,
            ])
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(dir.path().join(out).join("plan.csv")).unwrap()
    };
    let (a, b) = (run("1", "a"), run("2", "b"));
    assert_eq!(a, b);
    assert_eq!(a.lines().count(), 3);
}

#[test]
fn validate_runs_the_simulator_and_prints_errors() {
    let out = tmp("validate");
    let stdout = run_ok(
        worldmesh()
            .args([
                "plan",
                "--validate",
                "--players",
                "16",
                "--duration",
                "3",
                "--warmup",
                "0.5",
                "--cell-size",
                "64",
                "--out",
            ])
            .arg(out.path()),
    );
    assert!(stdout.contains("predicted vs measured"), "{stdout}");
    for metric in [
        "player relationships",
        "cs server out kbps",
        "wm node update kbps",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.contains(metric))
            .unwrap_or_else(|| panic!("{metric}: {stdout}"));
        assert!(line.contains('%'), "{line}");
    }
    for f in [
        "validate.csv",
        "validate.json",
        "calibration.csv",
        "bandwidth.svg",
    ] {
        assert!(out.path().join(f).exists(), "{f}");
    }
}
