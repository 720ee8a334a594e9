//! `worldmesh plan`, run as a user would.

use std::path::PathBuf;
use std::process::Command;

fn worldmesh() -> Command {
    Command::new(env!("CARGO_BIN_EXE_worldmesh"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wm-plan-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn plan_prints_predictions_and_writes_files() {
    let out = tmp("good");
    // 10 × 10 free cells, uniform density, everything visible and of interest:
    // S = Σᵢ Σ_{j≠i} (1/100)² = 0.99, so Rel(10) = 10² · 0.99 = 99 and the expected
    // directed relationships are 10 · 9 · 0.99 = 89.1 (890.1… updates/s at 10 Hz).
    let o = worldmesh()
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
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("SteadyState(10)") && stdout.contains("SteadyState(20)"),
        "{stdout}"
    );
    assert!(stdout.contains("4950 visible pairs"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("plan.csv")).unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[0], "SteadyState(10)");
    let num = |k: usize| row[k].parse::<f64>().unwrap();
    assert!((num(3) - 99.0).abs() < 1e-9, "{csv}");
    assert!((num(4) - 89.1).abs() < 1e-9, "{csv}");
    assert!((num(5) - 891.0).abs() < 1e-6, "{csv}");
    for f in ["plan.json", "density.svg", "visibility.svg"] {
        assert!(out.join(f).exists(), "{f}");
    }
    std::fs::remove_dir_all(out).unwrap();
}

#[test]
fn plan_reads_load_states_and_map_files() {
    let dir = tmp("files");
    let map = dir.join("map.toml");
    std::fs::write(
        &map,
        "width = 640\nheight = 320\n[[obstacle]]\nmin_x = 300\nmin_y = 0\nmax_x = 340\nmax_y = 320\n",
    )
    .unwrap();
    let load = dir.join("load.toml");
    std::fs::write(
        &load,
        "[[steady]]\nname = \"night\"\nplayers = 12\n[[peak]]\nplayers = 30\n",
    )
    .unwrap();
    let o = worldmesh()
        .args(["plan", "--transport", "quic", "--map"])
        .arg(&map)
        .arg("--load")
        .arg(&load)
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("night") && stdout.contains("peak(30)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("quic transport") && stdout.contains("58 bytes/packet"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("SteadyState(10)"),
        "--load alone replaces the default counts"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_map_file_names_the_line() {
    let dir = tmp("badmap");
    let map = dir.join("bad.toml");
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
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_flags_are_refused_clearly() {
    let cases: [(&[&str], &str); 5] = [
        (&["--players", "ten"], "invalid value 'ten'"),
        (&["--aoi", "circle:3"], "expected none, radius:R"),
        (&["--map", "random:10x10:3"], "expected random:WIDTHxHEIGHT"),
        (&["--transport", "tcp"], "unknown transport"),
        (&["--validate"], "needs the model workload (issue 3)"),
    ];
    for (args, want) in cases {
        let o = worldmesh().arg("plan").args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
