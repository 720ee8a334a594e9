//! The cluster CA and node identities: good files load; every bad file is refused with
//! an error that names the file and the reason. Bad certificates are made with rcgen here.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use tempfile::TempDir;
use worldmesh_core::NodeId;
use worldmesh_net::pki::{
    Authority, CaFiles, NodeFiles, NodeIdentity, Overwrite, PkiError, init_ca, issue_node, throwaway,
};

/// A fresh folder `wm-pki-<name>-…` under the system's temporary directory, removed when
/// the returned guard is dropped: hold it for the whole test (it goes also on a panic).
fn tmp(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("wm-pki-{name}-"))
        .tempdir()
        .unwrap()
}

fn load(files: &NodeFiles, ca: &Path, node: u32) -> Result<NodeIdentity, PkiError> {
    NodeIdentity::load(&files.cert, &files.key, ca, NodeId(node))
}

#[test]
fn a_ca_issues_node_certificates_that_load() {
    let dir = tmp("good");
    let ca = init_ca(dir.path(), "test cluster", 30, Overwrite::Refuse).unwrap();
    assert_eq!(ca, CaFiles::in_dir(dir.path()));
    let n7 = issue_node(
        dir.path(),
        NodeId(7),
        &dir.path().join("nodes"),
        10,
        Overwrite::Refuse,
    )
    .unwrap();
    assert_eq!(n7.cert, dir.path().join("nodes/node-7.pem"));
    let id = load(&n7, &ca.cert, 7).unwrap();
    assert_eq!(id.node(), NodeId(7));
    // The chain presented in handshakes is the leaf alone: the CA is not re-sent.
    assert_eq!(id.chain().len(), 1);
    assert_eq!(
        id.ca().as_ref(),
        Authority::load(dir.path()).unwrap().cert().as_ref()
    );
    // The file holds leaf + CA.
    let text = std::fs::read_to_string(&n7.cert).unwrap();
    assert_eq!(text.matches("BEGIN CERTIFICATE").count(), 2);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for key in [&ca.key, &n7.key] {
            let mode = std::fs::metadata(key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
        }
    }
}

#[test]
fn existing_files_are_not_overwritten_unless_asked() {
    let dir = tmp("overwrite");
    init_ca(dir.path(), "a", 30, Overwrite::Refuse).unwrap();
    let first = std::fs::read(dir.path().join("ca.pem")).unwrap();
    let e = init_ca(dir.path(), "b", 30, Overwrite::Refuse).unwrap_err();
    assert!(
        matches!(&e, PkiError::Exists { path } if path.ends_with("ca.pem")),
        "{e}"
    );
    assert!(
        e.to_string().contains("ca.pem") && e.to_string().contains("already exists"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("ca.pem")).unwrap(),
        first,
        "untouched"
    );
    issue_node(dir.path(), NodeId(1), dir.path(), 1, Overwrite::Refuse).unwrap();
    let e = issue_node(dir.path(), NodeId(1), dir.path(), 1, Overwrite::Refuse).unwrap_err();
    assert!(e.to_string().contains("node-1.pem"), "{e}");
    // Asked: replaced, and the old node certificate no longer verifies against the new CA.
    init_ca(dir.path(), "b", 30, Overwrite::Replace).unwrap();
    assert_ne!(std::fs::read(dir.path().join("ca.pem")).unwrap(), first);
    let e = load(
        &NodeFiles::in_dir(dir.path(), NodeId(1)),
        &dir.path().join("ca.pem"),
        1,
    )
    .unwrap_err();
    assert!(matches!(e, PkiError::NotSignedByCa { .. }), "{e}");
}

#[test]
fn missing_unreadable_and_non_pem_files_are_named() {
    let dir = tmp("missing");
    let ca = init_ca(dir.path(), "c", 30, Overwrite::Refuse).unwrap();
    let n = issue_node(dir.path(), NodeId(2), dir.path(), 10, Overwrite::Refuse).unwrap();
    let missing = dir.path().join("nope.pem");
    let e = NodeIdentity::load(&missing, &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(
        matches!(&e, PkiError::Unreadable { path, .. } if *path == missing),
        "{e}"
    );
    assert!(
        e.to_string().contains("nope.pem") && e.to_string().contains("cannot read"),
        "{e}"
    );
    let e = NodeIdentity::load(&n.cert, &n.key, &dir.path().join("no-ca.pem"), NodeId(2)).unwrap_err();
    assert!(e.to_string().contains("no-ca.pem"), "{e}");

    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "hello, I am not a certificate\n").unwrap();
    let e = NodeIdentity::load(&junk, &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(
        matches!(&e, PkiError::NotPem { path, .. } if *path == junk),
        "{e}"
    );
    // A key file given as the certificate: PEM, but no certificate in it.
    let e = NodeIdentity::load(&n.key, &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(
        matches!(&e, PkiError::NoCertificate { path } if *path == n.key),
        "{e}"
    );
    // A certificate given as the key.
    let e = NodeIdentity::load(&n.cert, &n.cert, &ca.cert, NodeId(2)).unwrap_err();
    assert!(matches!(&e, PkiError::NoKey { path } if *path == n.cert), "{e}");
    // A broken PEM section.
    let broken = dir.path().join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let e = NodeIdentity::load(&broken, &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(matches!(&e, PkiError::NotPem { .. }), "{e}");
    // Oversize files are refused before they are read whole.
    let big = dir.path().join("big.pem");
    std::fs::write(&big, vec![b'A'; 2 << 20]).unwrap();
    let e = NodeIdentity::load(&big, &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(matches!(e, PkiError::TooLarge { .. }), "{e}");
    // A directory.
    let e = NodeIdentity::load(dir.path(), &n.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(matches!(e, PkiError::Unreadable { .. }), "{e}");
}

#[test]
fn a_certificate_for_another_node_is_refused_with_the_names_it_carries() {
    let dir = tmp("wrong-node");
    let ca = init_ca(dir.path(), "c", 30, Overwrite::Refuse).unwrap();
    let n2 = issue_node(dir.path(), NodeId(2), dir.path(), 10, Overwrite::Refuse).unwrap();
    let e = load(&n2, &ca.cert, 5).unwrap_err();
    match &e {
        PkiError::WrongNode {
            path,
            expected,
            names,
        } => {
            assert_eq!(path, &n2.cert);
            assert_eq!(*expected, NodeId(5));
            assert_eq!(names, &vec!["node-2.worldmesh".to_string()]);
        }
        other => panic!("expected WrongNode, got {other}"),
    }
    assert!(
        e.to_string().contains("node-2.worldmesh") && e.to_string().contains("node 5"),
        "{e}"
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let dir = tmp("mismatch");
    let ca = init_ca(dir.path(), "c", 30, Overwrite::Refuse).unwrap();
    let n2 = issue_node(dir.path(), NodeId(2), dir.path(), 10, Overwrite::Refuse).unwrap();
    let n3 = issue_node(dir.path(), NodeId(3), dir.path(), 10, Overwrite::Refuse).unwrap();
    let e = NodeIdentity::load(&n2.cert, &n3.key, &ca.cert, NodeId(2)).unwrap_err();
    assert!(
        matches!(&e, PkiError::KeyMismatch { cert, key } if *cert == n2.cert && *key == n3.key),
        "{e}"
    );
    assert!(
        e.to_string().contains("node-3.key") && e.to_string().contains("does not match"),
        "{e}"
    );
    // Same for a CA whose key is not its certificate's.
    let other = tmp("mismatch-other");
    init_ca(other.path(), "o", 30, Overwrite::Refuse).unwrap();
    std::fs::copy(other.path().join("ca.key"), dir.path().join("ca.key")).unwrap();
    let e = issue_node(dir.path(), NodeId(4), dir.path(), 10, Overwrite::Refuse).unwrap_err();
    assert!(matches!(e, PkiError::KeyMismatch { .. }), "{e}");
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let a = tmp("ca-a");
    let b = tmp("ca-b");
    let ca_a = init_ca(a.path(), "a", 30, Overwrite::Refuse).unwrap();
    init_ca(b.path(), "b", 30, Overwrite::Refuse).unwrap();
    let from_b = issue_node(b.path(), NodeId(1), b.path(), 10, Overwrite::Refuse).unwrap();
    let e = load(&from_b, &ca_a.cert, 1).unwrap_err();
    match &e {
        PkiError::NotSignedByCa { path, ca, .. } => {
            assert_eq!(path, &from_b.cert);
            assert_eq!(ca, &ca_a.cert);
        }
        other => panic!("expected NotSignedByCa, got {other}"),
    }
    assert!(e.to_string().contains("not signed by the cluster CA"), "{e}");
}

/// A CA made with rcgen directly (so that the test controls validity dates), written as
/// `ca.pem`; returns its issuer.
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

fn raw_leaf(
    dir: &Path,
    issuer: &Issuer<'static, KeyPair>,
    node: u32,
    from: time::OffsetDateTime,
    until: time::OffsetDateTime,
) -> NodeFiles {
    let name = format!("node-{node}.worldmesh");
    let mut p = CertificateParams::new(vec![name]).unwrap();
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.not_before = from;
    p.not_after = until;
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, issuer).unwrap();
    let f = NodeFiles::in_dir(dir, NodeId(node));
    std::fs::write(&f.cert, cert.pem()).unwrap();
    std::fs::write(&f.key, key.serialize_pem()).unwrap();
    f
}

#[test]
fn expired_and_not_yet_valid_certificates_say_their_dates() {
    let dir = tmp("dates");
    let issuer = raw_ca(dir.path());
    let ca = dir.path().join("ca.pem");
    let ymd = rcgen::date_time_ymd;
    let good = raw_leaf(dir.path(), &issuer, 1, ymd(2020, 1, 1), ymd(2090, 1, 1));
    load(&good, &ca, 1).expect("a valid raw leaf loads (the harness itself is right)");

    let old = raw_leaf(dir.path(), &issuer, 2, ymd(2000, 1, 1), ymd(2001, 6, 30));
    let e = load(&old, &ca, 2).unwrap_err();
    match &e {
        PkiError::Expired { path, not_after, .. } => {
            assert_eq!(path, &old.cert);
            assert_eq!(not_after, "2001-06-30 00:00:00 UTC");
        }
        other => panic!("expected Expired, got {other}"),
    }
    assert!(e.to_string().contains("expired on 2001-06-30"), "{e}");

    let future = raw_leaf(dir.path(), &issuer, 3, ymd(2090, 1, 1), ymd(2091, 1, 1));
    let e = load(&future, &ca, 3).unwrap_err();
    assert!(
        matches!(&e, PkiError::NotYetValid { not_before, .. } if not_before == "2090-01-01 00:00:00 UTC"),
        "{e}"
    );
    assert!(e.to_string().contains("node-3.pem"), "{e}");
}

#[test]
fn a_leaf_without_client_authentication_is_refused() {
    let dir = tmp("eku");
    let issuer = raw_ca(dir.path());
    let mut p = CertificateParams::new(vec!["node-1.worldmesh".to_string()]).unwrap();
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &issuer).unwrap();
    let f = NodeFiles::in_dir(dir.path(), NodeId(1));
    std::fs::write(&f.cert, cert.pem()).unwrap();
    std::fs::write(&f.key, key.serialize_pem()).unwrap();
    let e = load(&f, &dir.path().join("ca.pem"), 1).unwrap_err();
    assert!(matches!(e, PkiError::BadCertificate { .. }), "{e}");
}

#[test]
fn a_throwaway_ca_writes_loadable_identities_for_every_node() {
    let dir = tmp("throwaway");
    let (ca, nodes) = throwaway(dir.path(), (0..4).map(NodeId)).unwrap();
    assert_eq!(nodes.len(), 4);
    for f in &nodes {
        let id = NodeIdentity::load(&f.cert, &f.key, &ca.cert, f.node).unwrap();
        assert_eq!(id.node(), f.node);
    }
    // Run twice in the same place: replaced, still consistent.
    let (ca2, nodes2) = throwaway(dir.path(), [NodeId(0)]).unwrap();
    NodeIdentity::load(&nodes2[0].cert, &nodes2[0].key, &ca2.cert, NodeId(0)).unwrap();
    // In memory: an identity per node, no files.
    let mem = Authority::new("mem", 1).unwrap();
    assert_eq!(mem.identity(NodeId(9), 1).unwrap().node(), NodeId(9));
    assert!(Authority::new("", 1).is_err());
    assert!(Authority::new("x", 0).is_err());
}
