//! The guide cannot drift from the code: every Rust or TOML block in `docs/guide/*.md` must
//! be marked `<!-- include: FILE#ANCHOR -->` (or `<!-- include: FILE -->` for a whole
//! file) and equal, line for line, the region of FILE between `ANCHOR: name` and
//! `ANCHOR_END: name` — code that this crate compiles and its tests run.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of `file` between its `ANCHOR: name` and `ANCHOR_END: name` lines (the whole
/// file without an anchor).
fn region(file: &str, anchor: Option<&str>) -> Result<String, String> {
    let text = std::fs::read_to_string(root().join(file)).map_err(|e| format!("{file}: {e}"))?;
    let Some(anchor) = anchor else {
        return Ok(text.trim_end_matches('\n').to_owned());
    };
    let (start, end) = (format!("ANCHOR: {anchor}"), format!("ANCHOR_END: {anchor}"));
    let mut inside = false;
    let mut found = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_end().ends_with(&end) {
            inside = false;
        } else if line.trim_end().ends_with(&start) {
            inside = true;
            found = true;
        } else if inside {
            out.push(line);
        }
    }
    if found {
        Ok(out.join("\n"))
    } else {
        Err(format!("{file}: no anchor `{anchor}`"))
    }
}

/// Every problem in one guide page.
fn check(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).expect("a guide page");
    let lines: Vec<&str> = text.lines().collect();
    let name = page
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Vec::new();
    let mut i = 0;
    let mut pending: Option<(usize, String)> = None;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some(spec) = line
            .strip_prefix("<!-- include: ")
            .and_then(|s| s.strip_suffix(" -->"))
        {
            pending = Some((i + 1, spec.to_owned()));
        } else if let Some(lang) = line.strip_prefix("```").filter(|l| !l.is_empty()) {
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && lines[end].trim() != "```" {
                end += 1;
            }
            let body = lines[start..end.min(lines.len())].join("\n");
            let checked = matches!(lang, "rust" | "toml");
            match (pending.take(), checked) {
                (Some((at, spec)), _) => {
                    let (file, anchor) = match spec.split_once('#') {
                        Some((f, a)) => (f, Some(a)),
                        None => (spec.as_str(), None),
                    };
                    match region(file, anchor) {
                        Ok(want) if want == body => {}
                        Ok(_) => problems.push(format!(
                            "{name}:{at}: the block differs from {spec} (copy the region again)"
                        )),
                        Err(e) => problems.push(format!("{name}:{at}: {e}")),
                    }
                }
                (None, true) => problems.push(format!(
                    "{name}:{}: a {lang} block without an include marker: it is not tested",
                    i + 1
                )),
                (None, false) => {}
            }
            i = end;
        }
        i += 1;
    }
    problems
}

#[test]
fn every_code_block_of_the_guide_is_the_tested_code() {
    let dir = root().join("docs/guide");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("docs/guide")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 4, "guide pages missing: {pages:?}");
    let problems: Vec<String> = pages.iter().flat_map(|p| check(p)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The tutorial shows all of the game's code.
    let tutorial = std::fs::read_to_string(dir.join("tutorial.md")).expect("tutorial");
    for anchor in [
        "lib.rs#objects",
        "lib.rs#behaviour",
        "lib.rs#world",
        "main.rs#main",
        "sim.rs#sim_test",
    ] {
        assert!(tutorial.contains(anchor), "the tutorial does not show {anchor}");
    }
}

#[test]
fn a_changed_block_is_caught() {
    let dir = std::env::temp_dir().join(format!("guide-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let page = dir.join("page.md");
    let good = format!(
        "<!-- include: examples/beacons/node-0.toml -->\n```toml\n{}\n```\n",
        region("examples/beacons/node-0.toml", None).expect("the config")
    );
    std::fs::write(&page, &good).expect("write");
    assert!(check(&page).is_empty());
    std::fs::write(&page, good.replace("id = 0", "id = 9")).expect("write");
    assert_eq!(check(&page).len(), 1);
    std::fs::write(&page, "```rust\nfn main() {}\n```\n").expect("write");
    assert_eq!(check(&page).len(), 1, "an unmarked rust block");
    let _ = std::fs::remove_dir_all(&dir);
}
