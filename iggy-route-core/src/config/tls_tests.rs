use std::io;

use super::{TlsConfig, TlsError};

#[test]
fn the_name_checked_is_the_domain_else_each_address_host() {
    let own_hosts = TlsConfig::default();
    let cases = [
        ("localhost:8090", "localhost"),
        ("127.0.0.1:8090", "127.0.0.1"),
        ("[::1]:8090", "::1"),
        ("node.example", "node.example"),
        ("", ""),
        (":8090", ""),
        // Malformed: whatever is left, for the TLS library to refuse as a name.
        ("[::1", "[:"),
    ];
    for (addr, host) in cases {
        assert_eq!(own_hosts.server_name_for(addr), host, "{addr}");
    }
    let one_name = TlsConfig {
        domain: Some("cluster.example".to_owned()),
        ca_file: None,
    };
    for (addr, _) in cases {
        assert_eq!(one_name.server_name_for(addr), "cluster.example");
    }
}

#[test]
fn a_hang_up_during_the_handshake_is_not_tls_and_other_errors_keep_their_message() {
    for kind in [
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::ConnectionAborted,
        io::ErrorKind::BrokenPipe,
    ] {
        assert_eq!(
            TlsError::from_handshake_io(&io::Error::from(kind)),
            TlsError::NotTls,
            "{kind:?}"
        );
    }
    for kind in [
        io::ErrorKind::TimedOut,
        io::ErrorKind::WriteZero,
        io::ErrorKind::PermissionDenied,
        io::ErrorKind::InvalidData,
        io::ErrorKind::Other,
    ] {
        let error = io::Error::new(kind, "what the socket said");
        let classified = TlsError::from_handshake_io(&error);
        assert_eq!(classified, TlsError::Other(error.to_string()));
        assert!(!classified.is_fatal());
    }
}
