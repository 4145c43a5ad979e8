//! Certificates for the TLS unit tests, made in memory: a CA whose PEM a client trusts,
//! and a node's configuration presenting a leaf signed by it (or by a CA nobody trusts).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// A trusted CA and a node's server configuration.
pub(crate) struct Pki {
    /// The CA a correct client trusts, as PEM.
    pub(crate) ca_pem: String,
    /// What the node presents.
    pub(crate) server: Arc<ServerConfig>,
}

/// Which certificate the node presents.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Leaf {
    /// For `localhost` and `127.0.0.1`, signed by the trusted CA.
    Valid,
    /// For `wrong.example` only, signed by the trusted CA.
    OtherName,
    /// For `localhost` and `127.0.0.1`, signed by a CA that is not trusted.
    Untrusted,
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    // Named apart: a rogue CA under the trusted one's name would fail as a bad signature.
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

impl Pki {
    /// A node that speaks TLS 1.3 and 1.2.
    pub(crate) fn new(leaf: Leaf) -> Pki {
        Self::with_versions(leaf, rustls::DEFAULT_VERSIONS)
    }

    /// A node that speaks only `versions`.
    pub(crate) fn with_versions(
        leaf: Leaf,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Pki {
        let trusted = authority("trusted test CA");
        let rogue = authority("rogue test CA");
        let (names, issuer) = match leaf {
            Leaf::Valid => (vec!["localhost", "127.0.0.1"], &trusted),
            Leaf::OtherName => (vec!["wrong.example"], &trusted),
            Leaf::Untrusted => (vec!["localhost", "127.0.0.1"], &rogue),
        };
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let key = KeyPair::generate().unwrap();
        let certificate = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, issuer)
            .unwrap();
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certificate.der().clone()], private)
            .unwrap();
        Pki {
            ca_pem: trusted.pem(),
            server: Arc::new(server),
        }
    }

    /// Writes the CA to a file of its own (removed when the returned guard drops).
    pub(crate) fn ca_file(&self) -> TempFile {
        TempFile::new(self.ca_pem.as_bytes())
    }
}

/// A file under the system temp directory, removed on drop.
pub(crate) struct TempFile {
    pub(crate) path: PathBuf,
}

impl TempFile {
    pub(crate) fn new(contents: &[u8]) -> TempFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "iggy-route-mio-{}-{}.pem",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, contents).unwrap();
        TempFile { path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
