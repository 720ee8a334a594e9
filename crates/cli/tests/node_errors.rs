//! `worldmesh node` refusing to start, with errors that say what, where and why: a
//! malformed config (file, line, value), an unreachable seed (after retries), a seed
//! whose world differs (the setting), and certificates that are expired, from another CA
//! or for another node (the file and the reason).

mod common;
mod procs;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{tmp, worldmesh};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use worldmesh_core::NodeId;
use worldmesh_net::pki::{self, NodeFiles};

fn fails(o: Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !o.status.success(),
        "expected a failure:\n{}\n{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn a_malformed_config_names_the_file_the_line_and_the_value() {
    let dir = tmp("node-config");
    let f = dir.path().join("node.toml");
    std::fs::write(&f, "id = 0\nlisten = \"127.0.0.1:0\"\nframe_hz = \"fast\"\n").unwrap();
    let err = fails(worldmesh().args(["node", "--config"]).arg(&f).output().unwrap());
    assert!(
        err.contains("node.toml") && err.contains("line 3") && err.contains("frame_hz"),
        "{err}"
    );
    std::fs::write(&f, "id = 0\n[world]\nfounders = 0\n").unwrap();
    let err = fails(worldmesh().args(["node", "--config"]).arg(&f).output().unwrap());
    assert!(
        err.contains("node.toml")
            && err.contains("line 3")
            && err.contains("world.founders must be in 1..=4096, got 0"),
        "{err}"
    );
    std::fs::write(&f, "id = 0\nlisten = \"127.0.0.1:0\"\n[wrld]\nplayers = 3\n").unwrap();
    let err = fails(worldmesh().args(["node", "--config"]).arg(&f).output().unwrap());
    assert!(err.contains("line 3") && err.contains("wrld"), "{err}");
    let err = fails(
        worldmesh()
            .args(["node", "--config", "/no/such/node.toml"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("/no/such/node.toml: cannot read config"), "{err}");
    // Flags are checked too, and name themselves.
    let err = fails(
        worldmesh()
            .args(["node", "--id", "0", "--frame-hz", "0"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("--frame-hz must be in (0, 1000], got 0"), "{err}");
}

#[test]
fn an_unreachable_seed_fails_after_retries_naming_the_address() {
    let n = procs::Nodes::new("unreachable", 2);
    let closed = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let t = Instant::now();
    let mut cmd = worldmesh();
    cmd.args([
        "node",
        "--id",
        "1",
        "--founders",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--join-timeout",
        "3s",
    ])
    .args(["--seeds", &closed.to_string()])
    .args(n.cert_args(1));
    let err = fails(cmd.output().unwrap());
    assert!(
        err.contains("no seed reachable after") && err.contains(&closed.to_string()),
        "{err}"
    );
    let rounds: u32 = err
        .split("no seed reachable after ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap();
    assert!(rounds >= 2, "retried: {err}");
    assert!(t.elapsed() < Duration::from_secs(25), "bounded by --join-timeout");
}

#[test]
fn a_seed_with_other_world_settings_is_refused_naming_the_setting() {
    let mut n = procs::Nodes::new("world", 2);
    let mut a = vec![
        "--founders".to_string(),
        "1".into(),
        "--players".into(),
        "3".into(),
    ];
    a.extend(["--duration".to_string(), "20s".into()]);
    n.spawn(0, &a);
    let a0 = n.ready(0, Duration::from_secs(30));
    let mut cmd = worldmesh();
    cmd.args([
        "node",
        "--id",
        "1",
        "--founders",
        "1",
        "--players",
        "4",
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--join", &a0.to_string(), "--join-timeout", "10s"])
    .args(n.cert_args(1));
    let err = fails(cmd.output().unwrap());
    assert!(
        err.contains(&a0.to_string()) && err.contains("world setting \"players\" differs"),
        "{err}"
    );
}

/// A CA made with rcgen directly, so that the test controls the dates.
fn raw_ca(dir: &Path) -> Issuer<'static, KeyPair> {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, "raw test CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    std::fs::write(dir.join("ca.pem"), cert.pem()).unwrap();
    Issuer::new(p, key)
}

fn expired_leaf(dir: &Path, issuer: &Issuer<'static, KeyPair>, node: u32) -> NodeFiles {
    let mut p = CertificateParams::new(vec![format!("node-{node}.worldmesh")]).unwrap();
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.not_before = rcgen::date_time_ymd(2000, 1, 1);
    p.not_after = rcgen::date_time_ymd(2001, 6, 30);
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, issuer).unwrap();
    let f = NodeFiles::in_dir(dir, NodeId(node));
    std::fs::write(&f.cert, cert.pem()).unwrap();
    std::fs::write(&f.key, key.serialize_pem()).unwrap();
    f
}

fn start_with(id: u32, ca: &Path, cert: &Path, key: &Path) -> String {
    fails(
        worldmesh()
            .args([
                "node",
                "--id",
                &id.to_string(),
                "--founders",
                "4",
                "--listen",
                "127.0.0.1:0",
                "--duration",
                "1s",
            ])
            .arg("--ca")
            .arg(ca)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .output()
            .unwrap(),
    )
}

#[test]
fn bad_certificates_name_the_file_and_the_reason() {
    let dir = tmp("node-certs");
    let raw = dir.path().join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    let issuer = raw_ca(&raw);
    let old = expired_leaf(&raw, &issuer, 0);
    let err = start_with(0, &raw.join("ca.pem"), &old.cert, &old.key);
    assert!(
        err.contains(&old.cert.display().to_string()) && err.contains("certificate expired on 2001-06-30"),
        "{err}"
    );

    let a = dir.path().join("a");
    let b = dir.path().join("b");
    let (_, a_nodes) = pki::throwaway(&a, [NodeId(0), NodeId(3)]).unwrap();
    let (b_ca, _) = pki::throwaway(&b, [NodeId(0)]).unwrap();
    let err = start_with(0, &b_ca.cert, &a_nodes[0].cert, &a_nodes[0].key);
    assert!(
        err.contains(&a_nodes[0].cert.display().to_string()) && err.contains("not signed by the cluster CA"),
        "{err}"
    );
    let a_ca = a.join("ca.pem");
    let err = start_with(1, &a_ca, &a_nodes[1].cert, &a_nodes[1].key);
    assert!(
        err.contains(&a_nodes[1].cert.display().to_string())
            && err.contains("certificate names node-3.worldmesh, not node 1"),
        "{err}"
    );
    let err = start_with(0, &a_ca, &dir.path().join("missing.pem"), &a_nodes[0].key);
    assert!(err.contains("missing.pem: cannot read"), "{err}");
}

/// A node started on a damaged store refuses to start, naming the store file and what is
/// wrong, and never panics: a truncated file, and a file that is not a store at all.
#[test]
fn a_damaged_store_names_the_file_and_what_is_wrong() {
    let dir = tmp("node-store");
    let (ca, nodes) = pki::throwaway(&dir.path().join("pki"), [NodeId(0)]).unwrap();
    let data = dir.path().join("data");
    let start = |data: &Path| {
        fails(
            worldmesh()
                .args(["node", "--id", "0", "--listen", "127.0.0.1:0", "--duration", "1s"])
                .arg("--ca")
                .arg(&ca.cert)
                .arg("--cert")
                .arg(&nodes[0].cert)
                .arg("--key")
                .arg(&nodes[0].key)
                .arg("--data-dir")
                .arg(data)
                .output()
                .unwrap(),
        )
    };
    // A real store with a checkpoint marker, then cut in half.
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join(worldmesh_store::FILE_NAME);
    {
        let mut s = worldmesh_store::Store::open(&data).unwrap();
        let mut b = worldmesh_store::Batch::new();
        b.checkpoint(worldmesh_store::Checkpoint {
            frame: 1,
            time: worldmesh_core::Time::ZERO,
        });
        s.apply(&b).unwrap();
    }
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = start(&data);
    assert!(err.contains(&file.display().to_string()), "{err}");
    // Not a store at all.
    std::fs::write(&file, b"these are not the bytes you are looking for").unwrap();
    let err = start(&data);
    assert!(err.contains(&file.display().to_string()), "{err}");
}
