//! The cluster certificate authority and node identities (issue 13, item 2).
//!
//! A worldmesh cluster trusts exactly one certificate authority. `worldmesh ca init` makes
//! it ([`init_ca`]: `ca.pem`, a self-signed CA certificate, and `ca.key`, its private key,
//! mode 0600); `worldmesh ca issue --node ID` signs a node certificate with it
//! ([`issue_node`]: `node-<ID>.pem`, the leaf followed by the CA certificate, and
//! `node-<ID>.key`). The leaf names its node: subjectAltName DNS `node-<ID>.worldmesh`
//! (also the common name), usable for both TLS client and server authentication, so
//! every node can both dial and accept. Keys are ECDSA P-256.
//!
//! [`NodeIdentity::load`] reads a node's files and checks everything a peer will check,
//! up front, so that an operator learns at start-up — with the file and the reason —
//! that a certificate is expired, not yet valid, signed by another CA, names another
//! node, or does not belong to the key beside it. [`Authority`] does the same in memory:
//! `worldmesh cluster` and the tests make a throwaway CA per run ([`throwaway`]).
//!
//! Every file read is bounded ([`MAX_PEM_FILE`] bytes) and every failure is a typed
//! [`PkiError`] naming the file.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use worldmesh_core::NodeId;

/// File name of the CA certificate in a CA directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA private key in a CA directory.
pub const CA_KEY_FILE: &str = "ca.key";
/// The DNS zone node names live in: node 7 is `node-7.worldmesh`.
pub const NODE_NAME_ZONE: &str = "worldmesh";
/// Largest certificate or key file read (1 MiB): a PEM chain of a few certificates is a
/// few kilobytes.
pub const MAX_PEM_FILE: u64 = 1 << 20;
/// Default validity of a CA certificate, in days (10 years).
pub const DEFAULT_CA_DAYS: u32 = 3650;
/// Default validity of a node certificate, in days.
pub const DEFAULT_NODE_DAYS: u32 = 365;
/// Certificates are valid from an hour before they were issued, so that a peer whose clock
/// is a little behind accepts a certificate issued a moment ago.
const CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// The name a node's certificate carries: `node-<ID>.worldmesh`.
pub fn node_name(node: NodeId) -> String {
    format!("node-{}.{NODE_NAME_ZONE}", node.0)
}

/// The node a certificate name names (the inverse of [`node_name`]), if it is one.
pub fn node_of_name(name: &str) -> Option<NodeId> {
    let id = name
        .strip_prefix("node-")?
        .strip_suffix(NODE_NAME_ZONE)?
        .strip_suffix('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || (id.len() > 1 && id.starts_with('0')) {
        return None;
    }
    id.parse().ok().map(NodeId)
}

/// The certificate file name of `node`: `node-<ID>.pem`.
pub fn node_cert_file(node: NodeId) -> String {
    format!("node-{}.pem", node.0)
}

/// The key file name of `node`: `node-<ID>.key`.
pub fn node_key_file(node: NodeId) -> String {
    format!("node-{}.key", node.0)
}

/// Why a certificate or key could not be made, written or used. Every variant names the
/// file it is about.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// The file cannot be read (missing, permissions, a directory…).
    #[error("{}: cannot read: {io}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        io: std::io::Error,
    },
    /// The file is larger than [`MAX_PEM_FILE`].
    #[error("{}: {len} bytes is too large for a PEM certificate or key (limit {MAX_PEM_FILE})", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
    /// The file is not PEM text (no `-----BEGIN` line), or a PEM section is broken.
    #[error("{}: not a PEM file: {reason}", path.display())]
    NotPem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A PEM file without a `CERTIFICATE` section.
    #[error("{}: no certificate in it (expected a `-----BEGIN CERTIFICATE-----` section)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A PEM file without a private key section.
    #[error("{}: no private key in it (expected a `-----BEGIN PRIVATE KEY-----` section)", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// The certificate cannot be parsed or used (bad encoding, unsupported algorithm,
    /// wrong key usage…).
    #[error("{}: unusable certificate: {reason}", path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// What the verifier said.
        reason: String,
    },
    /// The private key cannot be parsed or used.
    #[error("{}: unusable private key: {reason}", path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// The certificate's validity ended.
    #[error("{}: certificate expired on {not_after} (it is now {now}); issue a new one with `worldmesh ca issue`", path.display())]
    Expired {
        /// The file.
        path: PathBuf,
        /// Its notAfter, UTC.
        not_after: String,
        /// The time it was checked at, UTC.
        now: String,
    },
    /// The certificate's validity has not started.
    #[error("{}: certificate not valid before {not_before} (it is now {now}); is this machine's clock right?", path.display())]
    NotYetValid {
        /// The file.
        path: PathBuf,
        /// Its notBefore, UTC.
        not_before: String,
        /// The time it was checked at, UTC.
        now: String,
    },
    /// The certificate does not chain to the cluster CA.
    #[error("{}: not signed by the cluster CA in {} ({reason})", path.display(), ca.display())]
    NotSignedByCa {
        /// The certificate file.
        path: PathBuf,
        /// The CA file it was checked against.
        ca: PathBuf,
        /// What the verifier said.
        reason: String,
    },
    /// The certificate is for another node.
    #[error("{}: certificate names {}, not node {} (expected {})", path.display(), names_list(.names), .expected.0, node_name(*.expected))]
    WrongNode {
        /// The file.
        path: PathBuf,
        /// The node it was loaded for.
        expected: NodeId,
        /// The DNS names the certificate carries.
        names: Vec<String>,
    },
    /// The private key is not the key of the certificate.
    #[error("{}: private key does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// Refused to overwrite an existing file.
    #[error("{}: already exists; refusing to overwrite it (pass --force to replace it)", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A file or directory could not be written.
    #[error("{}: cannot write: {io}", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        io: std::io::Error,
    },
    /// A CA name or validity the generator refused.
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
}

fn names_list(names: &[String]) -> String {
    if names.is_empty() {
        "no DNS name".into()
    } else {
        names.join(", ")
    }
}

/// What to do when an output file exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overwrite {
    /// Refuse with [`PkiError::Exists`] (the default of the CLI).
    Refuse,
    /// Replace the file.
    Replace,
}

/// Paths of a CA's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaFiles {
    /// `ca.pem`.
    pub cert: PathBuf,
    /// `ca.key`.
    pub key: PathBuf,
}

impl CaFiles {
    /// The files of the CA in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            cert: dir.join(CA_CERT_FILE),
            key: dir.join(CA_KEY_FILE),
        }
    }
}

/// Paths of a node's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFiles {
    /// The node.
    pub node: NodeId,
    /// `node-<ID>.pem` (leaf, then the CA certificate).
    pub cert: PathBuf,
    /// `node-<ID>.key`.
    pub key: PathBuf,
}

impl NodeFiles {
    /// The files of `node` in `dir`.
    pub fn in_dir(dir: &Path, node: NodeId) -> Self {
        Self {
            node,
            cert: dir.join(node_cert_file(node)),
            key: dir.join(node_key_file(node)),
        }
    }
}

/// A cluster certificate authority held in memory: its certificate and signing key.
pub struct Authority {
    cert: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// The parameters every worldmesh CA is made with (and rebuilt with when loaded: the
/// issuer of a leaf must match the CA's subject byte for byte).
fn ca_params(dn: DistinguishedName) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = dn;
    // Node certificates are signed directly by the CA: no intermediates.
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

fn validity(days: u32) -> Result<(time::OffsetDateTime, time::OffsetDateTime), PkiError> {
    if days == 0 {
        return Err(PkiError::Generate("validity must be at least 1 day".into()));
    }
    let now = time::OffsetDateTime::now_utc();
    let from = now - CLOCK_SKEW;
    let until = now
        .checked_add(time::Duration::days(i64::from(days)))
        .ok_or_else(|| PkiError::Generate(format!("validity of {days} days is out of range")))?;
    Ok((from, until))
}

impl Authority {
    /// A fresh CA named `name`, valid for `days` days.
    pub fn new(name: &str, days: u32) -> Result<Self, PkiError> {
        let name = name.trim();
        if name.is_empty() || name.len() > 64 {
            return Err(PkiError::Generate(format!(
                "CA name must be 1 to 64 characters, got {:?}",
                name
            )));
        }
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationName, "worldmesh cluster CA");
        let mut params = ca_params(dn);
        (params.not_before, params.not_after) = validity(days)?;
        let key = KeyPair::generate().map_err(|e| PkiError::Generate(e.to_string()))?;
        let cert = params
            .self_signed(&key)
            .map_err(|e| PkiError::Generate(e.to_string()))?;
        let key_pem = key.serialize_pem();
        Ok(Self {
            cert_pem: cert.pem(),
            cert: cert.der().clone(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads the CA in `dir` (`ca.pem`, `ca.key`), checking that the key is the
    /// certificate's.
    pub fn load(dir: &Path) -> Result<Self, PkiError> {
        let files = CaFiles::in_dir(dir);
        let cert_text = read_bounded(&files.cert)?;
        let cert = first_cert(&files.cert, &cert_text)?;
        let key_text = read_bounded(&files.key)?;
        let key_str = std::str::from_utf8(&key_text).map_err(|_| PkiError::NotPem {
            path: files.key.clone(),
            reason: "not UTF-8 text".into(),
        })?;
        check_pem(&files.key, &key_text)?;
        PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| key_pem_error(&files.key, e))?;
        let key = KeyPair::from_pem(key_str).map_err(|e| PkiError::BadKey {
            path: files.key.clone(),
            reason: e.to_string(),
        })?;
        let anchor = webpki::anchor_from_trusted_cert(&cert).map_err(|e| PkiError::BadCertificate {
            path: files.cert.clone(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
        if webpki::spki_for_anchor(&anchor).as_ref() != key.subject_public_key_info().as_slice() {
            return Err(PkiError::KeyMismatch {
                cert: files.cert,
                key: files.key,
            });
        }
        let dn = parse_subject(anchor.subject.as_ref()).map_err(|reason| PkiError::BadCertificate {
            path: files.cert.clone(),
            reason,
        })?;
        drop(anchor);
        let cert_pem = String::from_utf8_lossy(&cert_text).into_owned();
        Ok(Self {
            cert,
            cert_pem,
            key_pem: key_str.to_owned(),
            issuer: Issuer::new(ca_params(dn), key),
        })
    }

    /// The CA certificate (DER).
    pub fn cert(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The CA certificate as PEM text.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Writes `ca.pem` and `ca.key` (mode 0600) into `dir`, creating it.
    pub fn save(&self, dir: &Path, overwrite: Overwrite) -> Result<CaFiles, PkiError> {
        let files = CaFiles::in_dir(dir);
        create_dir(dir)?;
        refuse_existing(&[&files.cert, &files.key], overwrite)?;
        write_file(&files.key, self.key_pem.as_bytes(), true, overwrite)?;
        write_file(&files.cert, self.cert_pem.as_bytes(), false, overwrite)?;
        Ok(files)
    }

    /// Signs a certificate for `node` valid for `days` days, with a fresh key: returns
    /// (chain PEM: leaf then CA, key PEM).
    pub fn issue_pem(&self, node: NodeId, days: u32) -> Result<(String, String), PkiError> {
        let (leaf, key) = self.sign_leaf(node, days)?;
        Ok((format!("{}{}", leaf.pem(), self.cert_pem), key.serialize_pem()))
    }

    /// Signs a certificate for `node` valid for `days` days and returns it as a ready
    /// identity (for in-process clusters and tests).
    pub fn identity(&self, node: NodeId, days: u32) -> Result<NodeIdentity, PkiError> {
        let (leaf, key) = self.sign_leaf(node, days)?;
        Ok(NodeIdentity {
            node,
            chain: vec![leaf.der().clone()],
            key: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            ca: self.cert.clone(),
        })
    }

    /// Writes `node-<ID>.pem` and `node-<ID>.key` (mode 0600) for `node` into `out_dir`,
    /// and checks the written files load as that node's identity.
    pub fn write_node(
        &self,
        node: NodeId,
        out_dir: &Path,
        days: u32,
        overwrite: Overwrite,
    ) -> Result<NodeFiles, PkiError> {
        let files = NodeFiles::in_dir(out_dir, node);
        create_dir(out_dir)?;
        refuse_existing(&[&files.cert, &files.key], overwrite)?;
        let (chain, key) = self.issue_pem(node, days)?;
        write_file(&files.key, key.as_bytes(), true, overwrite)?;
        write_file(&files.cert, chain.as_bytes(), false, overwrite)?;
        // The issued chain must verify against this CA (catches a CA whose subject did
        // not round-trip through `load`).
        let chain = certs(&files.cert, chain.as_bytes())?;
        verify_leaf(
            &chain,
            &self.cert,
            node,
            UnixTime::now(),
            &files.cert,
            Path::new(CA_CERT_FILE),
        )?;
        Ok(files)
    }

    fn sign_leaf(&self, node: NodeId, days: u32) -> Result<(rcgen::Certificate, KeyPair), PkiError> {
        let name = node_name(node);
        let mut p =
            CertificateParams::new(vec![name.clone()]).map_err(|e| PkiError::Generate(e.to_string()))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        p.distinguished_name = dn;
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.use_authority_key_identifier_extension = true;
        (p.not_before, p.not_after) = validity(days)?;
        let key = KeyPair::generate().map_err(|e| PkiError::Generate(e.to_string()))?;
        let cert = p
            .signed_by(&key, &self.issuer)
            .map_err(|e| PkiError::Generate(e.to_string()))?;
        Ok((cert, key))
    }
}

/// `worldmesh ca init`: a new CA named `name`, valid `days` days, written to `dir`.
pub fn init_ca(dir: &Path, name: &str, days: u32, overwrite: Overwrite) -> Result<CaFiles, PkiError> {
    let files = CaFiles::in_dir(dir);
    refuse_existing(&[&files.cert, &files.key], overwrite)?;
    Authority::new(name, days)?.save(dir, overwrite)
}

/// `worldmesh ca issue`: a certificate for `node`, signed by the CA in `ca_dir`, valid
/// `days` days, written to `out_dir`.
pub fn issue_node(
    ca_dir: &Path,
    node: NodeId,
    out_dir: &Path,
    days: u32,
    overwrite: Overwrite,
) -> Result<NodeFiles, PkiError> {
    let files = NodeFiles::in_dir(out_dir, node);
    refuse_existing(&[&files.cert, &files.key], overwrite)?;
    Authority::load(ca_dir)?.write_node(node, out_dir, days, overwrite)
}

/// A throwaway CA and one identity per node, for a local `worldmesh cluster` run: writes
/// the CA and every node's files into `dir` (replacing old ones) and returns the CA's
/// files and the nodes'.
pub fn throwaway(
    dir: &Path,
    nodes: impl IntoIterator<Item = NodeId>,
) -> Result<(CaFiles, Vec<NodeFiles>), PkiError> {
    let ca = Authority::new("worldmesh throwaway CA", 7)?;
    let files = ca.save(dir, Overwrite::Replace)?;
    let nodes = nodes
        .into_iter()
        .map(|n| ca.write_node(n, dir, 7, Overwrite::Replace))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((files, nodes))
}

/// A node's proven identity: its certificate chain and key, checked against the cluster
/// CA and its node id.
pub struct NodeIdentity {
    node: NodeId,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    ca: CertificateDer<'static>,
}

impl Clone for NodeIdentity {
    fn clone(&self) -> Self {
        Self {
            node: self.node,
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            ca: self.ca.clone(),
        }
    }
}

impl fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("node", &self.node)
            .field("chain_len", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl NodeIdentity {
    /// Loads `cert_path` (PEM chain, leaf first), `key_path` (PEM private key) and
    /// `ca_path` (the cluster CA certificate), and checks that the leaf is valid now,
    /// chains to the CA, names `expected` (`node-<ID>.worldmesh`), allows both client and
    /// server authentication, and belongs to the key.
    pub fn load(
        cert_path: &Path,
        key_path: &Path,
        ca_path: &Path,
        expected: NodeId,
    ) -> Result<Self, PkiError> {
        let ca_text = read_bounded(ca_path)?;
        let ca = first_cert(ca_path, &ca_text)?;
        webpki::anchor_from_trusted_cert(&ca).map_err(|e| PkiError::BadCertificate {
            path: ca_path.to_owned(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
        let cert_text = read_bounded(cert_path)?;
        let mut chain = certs(cert_path, &cert_text)?;
        // The CA itself need not travel in the handshake: every peer has it.
        let leaf = chain.remove(0);
        chain.retain(|c| c.as_ref() != ca.as_ref());
        chain.insert(0, leaf);
        let key_text = read_bounded(key_path)?;
        check_pem(key_path, &key_text)?;
        let key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| key_pem_error(key_path, e))?;
        verify_leaf(&chain, &ca, expected, UnixTime::now(), cert_path, ca_path)?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| PkiError::BadKey {
            path: key_path.to_owned(),
            reason: e.to_string(),
        })?;
        let certified = rustls::sign::CertifiedKey::new(chain.clone(), signer);
        if let Err(e) = certified.keys_match() {
            return Err(match e {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    PkiError::KeyMismatch {
                        cert: cert_path.to_owned(),
                        key: key_path.to_owned(),
                    }
                }
                other => PkiError::BadKey {
                    path: key_path.to_owned(),
                    reason: other.to_string(),
                },
            });
        }
        Ok(Self {
            node: expected,
            chain,
            key,
            ca,
        })
    }

    /// Loads `node`'s files from `dir` (`node-<ID>.pem`, `node-<ID>.key`) with the CA
    /// certificate at `ca_path`.
    pub fn load_dir(dir: &Path, ca_path: &Path, node: NodeId) -> Result<Self, PkiError> {
        let f = NodeFiles::in_dir(dir, node);
        Self::load(&f.cert, &f.key, ca_path, node)
    }

    /// The node this identity proves.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The chain presented in handshakes (leaf first, without the CA).
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The private key.
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }

    /// The cluster CA certificate peers must chain to.
    pub fn ca(&self) -> &CertificateDer<'static> {
        &self.ca
    }
}

/// Checks a chain (leaf first) against the CA at time `now`: valid dates, signed by the
/// CA, both TLS usages, names `node`.
pub(crate) fn verify_leaf(
    chain: &[CertificateDer<'_>],
    ca: &CertificateDer<'_>,
    node: NodeId,
    now: UnixTime,
    cert_path: &Path,
    ca_path: &Path,
) -> Result<(), PkiError> {
    let bad = |reason: String| PkiError::BadCertificate {
        path: cert_path.to_owned(),
        reason,
    };
    let anchor = webpki::anchor_from_trusted_cert(ca).map_err(|e| PkiError::BadCertificate {
        path: ca_path.to_owned(),
        reason: format!("not a usable CA certificate: {e}"),
    })?;
    let leaf = chain.first().ok_or_else(|| PkiError::NoCertificate {
        path: cert_path.to_owned(),
    })?;
    let ee = webpki::EndEntityCert::try_from(leaf).map_err(|e| bad(e.to_string()))?;
    let anchors = [anchor];
    for usage in [webpki::KeyUsage::server_auth(), webpki::KeyUsage::client_auth()] {
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &chain[1..],
            now,
            usage,
            None,
            None,
        )
        .map_err(|e| match e {
            webpki::Error::CertExpired { time, not_after } => PkiError::Expired {
                path: cert_path.to_owned(),
                not_after: utc(not_after),
                now: utc(time),
            },
            webpki::Error::CertNotValidYet { time, not_before } => PkiError::NotYetValid {
                path: cert_path.to_owned(),
                not_before: utc(not_before),
                now: utc(time),
            },
            webpki::Error::UnknownIssuer
            | webpki::Error::InvalidSignatureForPublicKey
            | webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_)
            | webpki::Error::UnsupportedSignatureAlgorithmContext(_) => PkiError::NotSignedByCa {
                path: cert_path.to_owned(),
                ca: ca_path.to_owned(),
                reason: e.to_string(),
            },
            other => bad(other.to_string()),
        })?;
    }
    let name = ServerName::try_from(node_name(node)).map_err(|e| bad(e.to_string()))?;
    ee.verify_is_valid_for_subject_name(&name)
        .map_err(|_| PkiError::WrongNode {
            path: cert_path.to_owned(),
            expected: node,
            names: ee.valid_dns_names().map(str::to_owned).collect(),
        })
}

/// Formats a UNIX time as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc(t: UnixTime) -> String {
    let secs = t.as_secs();
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (the classic
/// era-of-400-years conversion).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Reads the cluster CA certificate (`ca.pem`) a player checks nodes against: bounded,
/// PEM, its first certificate.
pub fn load_ca_cert(path: &Path) -> Result<CertificateDer<'static>, PkiError> {
    first_cert(path, &read_bounded(path)?)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, PkiError> {
    use std::io::Read as _;
    let unreadable = |io| PkiError::Unreadable {
        path: path.to_owned(),
        io,
    };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let len = file.metadata().map_err(unreadable)?.len();
    if file.metadata().map_err(unreadable)?.is_dir() {
        return Err(unreadable(std::io::Error::other("is a directory")));
    }
    if len > MAX_PEM_FILE {
        return Err(PkiError::TooLarge {
            path: path.to_owned(),
            len,
        });
    }
    let mut buf = Vec::with_capacity(len as usize);
    file.take(MAX_PEM_FILE + 1)
        .read_to_end(&mut buf)
        .map_err(unreadable)?;
    if buf.len() as u64 > MAX_PEM_FILE {
        return Err(PkiError::TooLarge {
            path: path.to_owned(),
            len: buf.len() as u64,
        });
    }
    Ok(buf)
}

fn check_pem(path: &Path, text: &[u8]) -> Result<(), PkiError> {
    if !text.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(PkiError::NotPem {
            path: path.to_owned(),
            reason: "no `-----BEGIN …-----` line".into(),
        });
    }
    Ok(())
}

fn certs(path: &Path, text: &[u8]) -> Result<Vec<CertificateDer<'static>>, PkiError> {
    check_pem(path, text)?;
    let certs = CertificateDer::pem_slice_iter(text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PkiError::NotPem {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(PkiError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn first_cert(path: &Path, text: &[u8]) -> Result<CertificateDer<'static>, PkiError> {
    Ok(certs(path, text)?.swap_remove(0))
}

fn key_pem_error(path: &Path, e: rustls::pki_types::pem::Error) -> PkiError {
    match e {
        rustls::pki_types::pem::Error::NoItemsFound => PkiError::NoKey {
            path: path.to_owned(),
        },
        other => PkiError::NotPem {
            path: path.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// Parses the contents of an X.509 `Name` (a sequence of RDN sets, each of one
/// attribute) back into rcgen's form.
fn parse_subject(contents: &[u8]) -> Result<DistinguishedName, String> {
    // Re-wrap the contents in their SEQUENCE header so yasna can parse one element.
    let mut der = vec![0x30];
    let n = contents.len();
    match n {
        0..=127 => der.push(n as u8),
        128..=255 => der.extend([0x81, n as u8]),
        256..=65_535 => der.extend([0x82, (n >> 8) as u8, n as u8]),
        _ => return Err("subject name too long".into()),
    }
    der.extend_from_slice(contents);
    let entries = yasna::parse_der(&der, |r| {
        r.collect_sequence_of(|r| {
            let mut rdn = Vec::new();
            r.read_set_of(|r| {
                rdn.push(r.read_sequence(|r| {
                    let oid = r.next().read_oid()?;
                    let value = r.next().read_tagged_der()?;
                    Ok((oid, value))
                })?);
                Ok(())
            })?;
            Ok(rdn)
        })
    })
    .map_err(|e| format!("cannot parse the subject name: {e}"))?;
    let mut dn = DistinguishedName::new();
    for (oid, value) in entries.into_iter().flatten() {
        let ty = DnType::from_oid(oid.components());
        let text =
            String::from_utf8(value.value().to_vec()).map_err(|_| "subject name is not text".to_string())?;
        let v = match value.tag().tag_number {
            12 => DnValue::Utf8String(text),
            19 => DnValue::PrintableString(
                text.try_into()
                    .map_err(|_| "bad PrintableString in subject".to_string())?,
            ),
            22 => DnValue::Ia5String(
                text.try_into()
                    .map_err(|_| "bad IA5String in subject".to_string())?,
            ),
            t => {
                return Err(format!(
                    "subject name uses string type {t}, which this tool does not re-encode"
                ));
            }
        };
        dn.push(ty, v);
    }
    Ok(dn)
}

fn create_dir(dir: &Path) -> Result<(), PkiError> {
    std::fs::create_dir_all(dir).map_err(|io| PkiError::Unwritable {
        path: dir.to_owned(),
        io,
    })
}

fn refuse_existing(paths: &[&Path], overwrite: Overwrite) -> Result<(), PkiError> {
    match paths.iter().find(|p| p.exists()) {
        Some(p) if overwrite == Overwrite::Refuse => Err(PkiError::Exists {
            path: p.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

fn write_file(path: &Path, bytes: &[u8], secret: bool, overwrite: Overwrite) -> Result<(), PkiError> {
    let unwritable = |io| PkiError::Unwritable {
        path: path.to_owned(),
        io,
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    match overwrite {
        Overwrite::Refuse => opts.create_new(true),
        Overwrite::Replace => opts.create(true).truncate(true),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut f = opts.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            PkiError::Exists {
                path: path.to_owned(),
            }
        } else {
            unwritable(e)
        }
    })?;
    // A replaced file keeps its old mode: tighten a key's explicitly.
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt as _;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(unwritable)?;
    }
    f.write_all(bytes).map_err(unwritable)?;
    f.sync_all().map_err(unwritable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_dates() {
        assert_eq!(
            utc(UnixTime::since_unix_epoch(Duration::ZERO)),
            "1970-01-01 00:00:00 UTC"
        );
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.
        assert_eq!(
            utc(UnixTime::since_unix_epoch(Duration::from_secs(951_827_696))),
            "2000-02-29 12:34:56 UTC"
        );
        assert_eq!(
            utc(UnixTime::since_unix_epoch(Duration::from_secs(4_102_444_799))),
            "2099-12-31 23:59:59 UTC"
        );
    }

    #[test]
    fn a_node_name_parses_back_to_its_node_and_nothing_else_parses() {
        for n in [0, 7, 42, u32::MAX] {
            assert_eq!(node_of_name(&node_name(NodeId(n))), Some(NodeId(n)));
        }
        for bad in [
            "node-.worldmesh",
            "node-07.worldmesh",
            "node-+7.worldmesh",
            "node-7.worldmeshx",
            "node-7worldmesh",
            "node-7.other",
            "nodes-7.worldmesh",
            "node-4294967296.worldmesh",
            "node-7.worldmesh.",
            "",
        ] {
            assert_eq!(node_of_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn subject_round_trips_through_the_parser() {
        let ca = Authority::new("test CA", 1).unwrap();
        let anchor = webpki::anchor_from_trusted_cert(ca.cert()).unwrap();
        let dn = parse_subject(anchor.subject.as_ref()).unwrap();
        assert_eq!(
            dn.get(&DnType::CommonName),
            Some(&DnValue::Utf8String("test CA".into()))
        );
        assert_eq!(
            dn.get(&DnType::OrganizationName),
            Some(&DnValue::Utf8String("worldmesh cluster CA".into()))
        );
        assert!(parse_subject(&[0xff, 0x00]).is_err());
    }
}
