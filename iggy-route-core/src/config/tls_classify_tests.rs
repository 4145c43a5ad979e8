use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{
    AlertDescription, CertRevocationListError, CertificateError, ContentType,
    EncryptedClientHelloError, Error, HandshakeType, InconsistentKeys, InvalidMessage, OtherError,
    PeerIncompatible, PeerMisbehaved,
};

use super::TlsError;

const NAME: &str = "node.example";

fn classify(error: &Error) -> TlsError {
    TlsError::from_rustls(error, NAME)
}

fn other_error() -> OtherError {
    OtherError(Arc::new(std::io::Error::other("a provider's own failure")))
}

#[test]
fn a_certificate_for_another_name_is_a_name_mismatch_naming_what_was_checked() {
    let plain = Error::InvalidCertificate(CertificateError::NotValidForName);
    let detailed = Error::InvalidCertificate(CertificateError::NotValidForNameContext {
        expected: ServerName::try_from("node.example").expect("a DNS name"),
        presented: vec!["elsewhere.example".to_owned()],
    });
    for error in [plain, detailed] {
        let classified = classify(&error);
        assert_eq!(
            classified,
            TlsError::NameMismatch {
                name: NAME.to_owned()
            }
        );
        assert!(classified.is_fatal());
    }
}

#[test]
fn every_other_certificate_problem_is_a_rejection_and_fatal() {
    let problems = [
        CertificateError::BadEncoding,
        CertificateError::Expired,
        CertificateError::NotValidYet,
        CertificateError::Revoked,
        CertificateError::UnhandledCriticalExtension,
        CertificateError::UnknownIssuer,
        CertificateError::UnknownRevocationStatus,
        CertificateError::ExpiredRevocationList,
        CertificateError::BadSignature,
        CertificateError::InvalidPurpose,
        CertificateError::InvalidOcspResponse,
        CertificateError::ApplicationVerificationFailure,
        CertificateError::Other(other_error()),
    ];
    for problem in problems {
        let reason = problem.to_string();
        let classified = classify(&Error::InvalidCertificate(problem));
        assert_eq!(classified, TlsError::CertificateRejected { reason });
        assert!(classified.is_fatal(), "{classified}");
    }
}

#[test]
fn no_certificate_or_an_unusable_revocation_list_is_a_rejection() {
    let errors = [
        Error::NoCertificatesPresented,
        Error::InvalidCertRevocationList(CertRevocationListError::BadSignature),
        Error::InvalidCertRevocationList(CertRevocationListError::InvalidCrlNumber),
        Error::InvalidCertRevocationList(CertRevocationListError::IssuerInvalidForCrl),
        Error::InvalidCertRevocationList(CertRevocationListError::Other(other_error())),
    ];
    for error in errors {
        let reason = error.to_string();
        let classified = classify(&error);
        assert_eq!(classified, TlsError::CertificateRejected { reason });
        assert!(classified.is_fatal());
    }
}

#[test]
fn bytes_that_do_not_frame_as_tls_are_not_tls_and_not_fatal() {
    let errors = [
        Error::InvalidMessage(InvalidMessage::InvalidContentType),
        Error::InvalidMessage(InvalidMessage::UnknownProtocolVersion),
        Error::InvalidMessage(InvalidMessage::MessageTooLarge),
        Error::InvalidMessage(InvalidMessage::HandshakePayloadTooLarge),
        Error::PeerSentOversizedRecord,
    ];
    for error in errors {
        let classified = classify(&error);
        assert_eq!(classified, TlsError::NotTls, "{error}");
        assert!(!classified.is_fatal());
    }
}

#[test]
fn a_tls_server_that_will_not_talk_is_some_other_failure_said_as_rustls_says_it() {
    let errors = [
        Error::InappropriateMessage {
            expect_types: vec![ContentType::Handshake],
            got_type: ContentType::ApplicationData,
        },
        Error::InappropriateHandshakeMessage {
            expect_types: vec![HandshakeType::ServerHello],
            got_type: HandshakeType::Finished,
        },
        Error::InvalidEncryptedClientHello(EncryptedClientHelloError::InvalidConfigList),
        Error::UnsupportedNameType,
        Error::DecryptError,
        Error::EncryptError,
        Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
        Error::PeerMisbehaved(PeerMisbehaved::AttemptedDowngradeToTls12WhenTls13IsSupported),
        Error::AlertReceived(AlertDescription::HandshakeFailure),
        Error::AlertReceived(AlertDescription::BadCertificate),
        Error::AlertReceived(AlertDescription::Unknown(250)),
        Error::General("something".to_owned()),
        Error::General(String::new()),
        Error::FailedToGetCurrentTime,
        Error::FailedToGetRandomBytes,
        Error::HandshakeNotComplete,
        Error::NoApplicationProtocol,
        Error::BadMaxFragmentSize,
        Error::InconsistentKeys(InconsistentKeys::KeyMismatch),
        Error::InconsistentKeys(InconsistentKeys::Unknown),
        Error::Other(other_error()),
    ];
    for error in errors {
        let classified = classify(&error);
        assert_eq!(classified, TlsError::Other(error.to_string()));
        assert!(!classified.is_fatal(), "{classified}");
    }
}

#[test]
fn the_name_checked_is_reported_as_given_even_an_odd_one() {
    let error = Error::InvalidCertificate(CertificateError::NotValidForName);
    for checked in ["", "::1", "127.0.0.1", "ünïcode"] {
        assert_eq!(
            TlsError::from_rustls(&error, checked),
            TlsError::NameMismatch {
                name: checked.to_owned()
            }
        );
    }
}
