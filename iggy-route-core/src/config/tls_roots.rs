//! The certificate authorities of a CA file ([`TlsConfig::ca_file`]), as rustls takes them:
//! one rule for both adapters (only with the `rustls` feature). The adapter reads the
//! file; this judges its bytes.

use std::path::Path;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tracing::warn;

use super::tls::{TlsConfig, TlsError};

impl TlsConfig {
    /// The certificates of `pem`, the contents of the CA file at `path`. A file that is
    /// not PEM, or holds no certificate the verifier can use, is an error; certificates it
    /// cannot use beside usable ones are skipped with a warning, as a system bundle may
    /// hold a few. Other PEM sections (a key, say) are no certificates and are ignored.
    pub(crate) fn ca_roots(path: &Path, pem: &[u8]) -> Result<RootCertStore, TlsError> {
        let problem = |problem: String| TlsError::CaFile {
            path: path.to_owned(),
            problem,
        };
        let mut roots = RootCertStore::empty();
        let mut found = 0usize;
        let mut unusable = None;
        for certificate in CertificateDer::pem_slice_iter(pem) {
            let certificate = certificate.map_err(|error| problem(format!("bad PEM: {error}")))?;
            found += 1;
            if let Err(error) = roots.add(certificate) {
                unusable.get_or_insert(error);
            }
        }
        match (roots.is_empty(), unusable) {
            (true, None) => Err(problem("no PEM certificate in it".to_owned())),
            (true, Some(error)) => Err(problem(format!(
                "none of its {found} certificates is usable: {error}"
            ))),
            (false, Some(error)) => {
                let skipped = found - roots.len();
                warn!(path = %path.display(), skipped, %error, "CA file: unusable certificates skipped");
                Ok(roots)
            }
            (false, None) => Ok(roots),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{TlsConfig, TlsError};

    const BROKEN: &[u8] = b"-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";

    fn problem(pem: &[u8]) -> String {
        match TlsConfig::ca_roots(Path::new("/ca.pem"), pem) {
            Err(TlsError::CaFile { path, problem }) => {
                assert_eq!(path, Path::new("/ca.pem"));
                problem
            }
            other => panic!("expected a CA file error, got {other:?}"),
        }
    }

    #[test]
    fn nothing_text_or_a_key_alone_hold_no_certificate() {
        let key = b"-----BEGIN PRIVATE KEY-----\nAAECAwQF\n-----END PRIVATE KEY-----\n";
        for pem in [&b""[..], b"not a certificate at all\n", &[0xFF; 64], key] {
            assert_eq!(problem(pem), "no PEM certificate in it");
        }
    }

    #[test]
    fn only_unusable_certificates_is_an_error_counting_them() {
        let two = [BROKEN, BROKEN].concat();
        assert!(problem(&two).starts_with("none of its 2 certificates is usable"));
    }

    #[test]
    fn a_section_that_is_not_base64_is_bad_pem() {
        let bad = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        assert!(problem(bad).starts_with("bad PEM"), "{}", problem(bad));
    }
}
