//! rustls's handshake errors as the typed [`TlsError`], one mapping for both adapters
//! (only with the `rustls` feature: the core itself never touches TLS).
//!
//! What decides each class is what the caller can do about it: a certificate or a name is
//! a configuration to fix or a node to look at ([`TlsError::is_fatal`]), bytes that do not
//! frame as TLS are a node that speaks something else, and the rest is a TLS server that
//! would not talk to us this time, described as rustls puts it.

use rustls::{CertificateError, Error};

use super::tls::TlsError;

impl TlsError {
    /// The typed failure of a handshake rustls gave up on, for a node whose certificate was
    /// checked against `checked` (the server name sent).
    #[doc(hidden)]
    pub fn from_rustls(error: &Error, checked: &str) -> Self {
        match error {
            Error::InvalidCertificate(problem) => Self::from_certificate(problem, checked),
            // No certificate, or a revocation list that cannot be used: no node passes the
            // same check by being dialled again.
            Error::NoCertificatesPresented | Error::InvalidCertRevocationList(_) => {
                Self::CertificateRejected {
                    reason: error.to_string(),
                }
            }
            // What bytes that are not TLS produce: a record header whose type, version or
            // length makes no sense.
            Error::InvalidMessage(_) | Error::PeerSentOversizedRecord => Self::NotTls,
            Error::InappropriateMessage { .. }
            | Error::InappropriateHandshakeMessage { .. }
            | Error::InvalidEncryptedClientHello(_)
            | Error::UnsupportedNameType
            | Error::DecryptError
            | Error::EncryptError
            | Error::PeerIncompatible(_)
            | Error::PeerMisbehaved(_)
            | Error::AlertReceived(_)
            | Error::General(_)
            | Error::FailedToGetCurrentTime
            | Error::FailedToGetRandomBytes
            | Error::HandshakeNotComplete
            | Error::NoApplicationProtocol
            | Error::BadMaxFragmentSize
            | Error::InconsistentKeys(_)
            | Error::Other(_) => Self::Other(error.to_string()),
            // `rustls::Error` is non-exhaustive: a kind added later is some other failure.
            other => Self::Other(other.to_string()),
        }
    }

    /// A certificate the verifier refused: for another name, or not acceptable at all (an
    /// unknown issuer, expired, revoked, badly signed: every other kind rustls has or
    /// adds).
    fn from_certificate(problem: &CertificateError, checked: &str) -> Self {
        let mismatch = matches!(
            problem,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        );
        if mismatch {
            Self::NameMismatch {
                name: checked.to_owned(),
            }
        } else {
            Self::CertificateRejected {
                reason: problem.to_string(),
            }
        }
    }
}

#[cfg(test)]
#[path = "tls_classify_tests.rs"]
mod tests;
