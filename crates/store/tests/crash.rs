//! A batch is all or nothing across a crash: a child process applies batches that set every
//! object to the same version, and is killed (SIGKILL) at varying moments of an apply; after each kill
//! the store must hold one whole batch — every object at one version, the checkpoint
//! marker of that same batch — and that batch must be the last one begun or the last one
//! finished. A process kill leaves what the kernel already has; it does not model a power
//! cut (that is redb's fsync-ordered commit, which this test cannot reach).

mod common;

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use worldmesh_store::{Batch, Store};

const DIR_VAR: &str = "WORLDMESH_STORE_CRASH_DIR";
const OBJECTS: u32 = 2000;

/// Not a test: the child's body, run by `batches_survive_kills_whole_or_not_at_all` through
/// this test binary. Applies batches until killed, printing `begin N` and `done N`.
#[test]
#[ignore = "run by batches_survive_kills_whole_or_not_at_all in a child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else {
        return;
    };
    let mut s = Store::open(&dir).unwrap();
    let start = s.load().unwrap().last_checkpoint.map_or(1, |c| c.frame + 1);
    for version in start.. {
        let mut b = Batch::new();
        for i in 0..OBJECTS {
            b.put_object(object(0, i, version));
        }
        b.checkpoint(checkpoint(version));
        println!("begin {version}");
        s.apply(&b).unwrap();
        println!("done {version}");
    }
}

#[test]
fn batches_survive_kills_whole_or_not_at_all() {
    let dir = scratch("crash");
    let exe = std::env::current_exe().unwrap();
    let mut last_version = 0;
    let mut killed_inside_apply = 0;
    // Each round kills the child this long after it announced its second batch of the
    // round (the first one finished), so the kill lands at varied points of an apply.
    for (round, delay_us) in [0u64, 700, 1500, 2500, 4000].into_iter().enumerate() {
        let mut child = Command::new(&exe)
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_VAR, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut out = String::new();
        let mut begins = 0;
        while begins < 2 {
            let mut line = String::new();
            // EOF (0 bytes) means the child died on its own: the assertion below reports it.
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            begins += usize::from(line.starts_with("begin "));
            out.push_str(&line);
        }
        std::thread::sleep(Duration::from_micros(delay_us));
        assert!(
            child.try_wait().unwrap().is_none(),
            "round {round}: the child ended by itself:\n{out}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        stdout.read_to_string(&mut out).unwrap();
        let last = |word: &str| {
            out.lines()
                .filter_map(|l| l.strip_prefix(word)?.trim().parse::<u64>().ok())
                .next_back()
        };
        let (begun, done) = (last("begin "), last("done "));
        if begun.is_some() && begun > done {
            killed_inside_apply += 1;
        }

        let r = Store::open(&dir).unwrap().load().unwrap();
        let Some(c) = r.last_checkpoint else {
            // Killed before the first batch committed: nothing at all, not a part.
            assert!(
                r.objects.is_empty(),
                "round {round}: objects without their checkpoint"
            );
            assert_eq!(done, None, "round {round}: a finished batch is missing");
            continue;
        };
        let v = c.frame;
        assert_eq!(r.objects.len(), OBJECTS as usize, "round {round}");
        for (i, o) in r.objects.iter().enumerate() {
            assert_eq!(
                *o,
                object(0, i as u32, v),
                "round {round}: object {i} not from batch {v}"
            );
        }
        assert!(
            Some(v) == begun || Some(v) == done,
            "round {round}: batch {v} found, last begun {begun:?}, last done {done:?}"
        );
        assert!(
            v >= last_version,
            "round {round}: went back from {last_version} to {v}"
        );
        last_version = v;
    }
    assert!(last_version > 0, "no batch ever committed");
    assert!(
        killed_inside_apply > 0,
        "no kill landed inside an apply: the test proved nothing"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
