//! The driving code against a rustls server session in memory: the bytes between them
//! pass through a pipe that hands them over a few at a time and says `WouldBlock` when it
//! has nothing (or no room), as a non-blocking socket does.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;

use bytes::Bytes;
use iggy_route_core::{ConnectError, TlsConfig, TlsError};
use rustls::ServerConnection;

use super::{TlsSession, TlsSettings};
use crate::test_pki::{Leaf, Pki, TempFile};

/// Both directions of a connection, in memory.
#[derive(Default)]
struct Wire {
    to_client: VecDeque<u8>,
    to_server: VecDeque<u8>,
    /// The server hung up: once drained, the client reads EOF.
    server_closed: bool,
    /// Bytes the client may still write before the pipe is "full"; `None`: no limit.
    client_room: Option<usize>,
}

/// One end of the wire: reads and writes at most `chunk` bytes per call.
struct End {
    wire: Rc<RefCell<Wire>>,
    client: bool,
    chunk: usize,
}

impl Read for End {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let mut wire = self.wire.borrow_mut();
        let closed = wire.server_closed;
        let inbox = if self.client {
            &mut wire.to_client
        } else {
            &mut wire.to_server
        };
        if inbox.is_empty() {
            return if self.client && closed {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let count = buffer.len().min(self.chunk).min(inbox.len());
        for (slot, byte) in buffer.iter_mut().zip(inbox.drain(..count)) {
            *slot = byte;
        }
        Ok(count)
    }
}

impl Write for End {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut wire = self.wire.borrow_mut();
        let mut count = bytes.len().min(self.chunk);
        if self.client {
            if let Some(room) = wire.client_room {
                if room == 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                count = count.min(room);
                wire.client_room = Some(room - count);
            }
            wire.to_server.extend(&bytes[..count]);
        } else {
            wire.to_client.extend(&bytes[..count]);
        }
        Ok(count)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn pipe(chunk: usize) -> (End, End) {
    let wire = Rc::new(RefCell::new(Wire::default()));
    let client = End {
        wire: Rc::clone(&wire),
        client: true,
        chunk,
    };
    let server = End {
        wire,
        client: false,
        chunk,
    };
    (client, server)
}

/// The server's side of one exchange: reads all it was sent (its plaintext appended to
/// `received`), writes all it has.
fn pump_server(
    server: &mut ServerConnection,
    io: &mut End,
    received: &mut Vec<u8>,
) -> Result<(), rustls::Error> {
    let mut buffer = [0u8; 4096];
    loop {
        match server.read_tls(io) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
            Err(error) => panic!("{error}"),
        }
        server.process_new_packets()?;
        loop {
            match server.reader().read(&mut buffer) {
                Ok(read) => received.extend_from_slice(&buffer[..read]),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) => panic!("{error}"),
            }
        }
    }
    while server.wants_write() {
        server.write_tls(io).unwrap();
    }
    Ok(())
}

fn settings(pki: &Pki, domain: Option<&str>) -> (TlsSettings, TempFile) {
    let ca = pki.ca_file();
    let config = TlsConfig {
        domain: domain.map(str::to_owned),
        ca_file: Some(ca.path.clone()),
    };
    (TlsSettings::new(&config, &[]).unwrap(), ca)
}

/// Runs the handshake to its end either way, counting the times the client would block.
fn handshake(
    client: &mut TlsSession,
    client_io: &mut End,
    server: &mut ServerConnection,
    server_io: &mut End,
) -> Result<usize, ConnectError> {
    for blocked in 0..10_000 {
        if client.handshake(client_io)? {
            return Ok(blocked);
        }
        // A server that fails has queued its alert: the client reads it next.
        let _ = pump_server(server, server_io, &mut Vec::new());
    }
    panic!("the handshake never finished");
}

fn connected(
    leaf: Leaf,
    domain: Option<&str>,
    chunk: usize,
) -> (TlsSession, End, ServerConnection, End) {
    let pki = Pki::new(leaf);
    let (settings, _ca) = settings(&pki, domain);
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, mut server_io) = pipe(chunk);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap();
    (client, client_io, server, server_io)
}

#[test]
fn a_handshake_fed_a_few_bytes_at_a_time_completes_and_frames_pass_both_ways() {
    let pki = Pki::new(Leaf::Valid);
    let (settings, _ca) = settings(&pki, Some("localhost"));
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    // Before anything is written, the hello waits: the socket must ask for WRITABLE.
    assert!(client.wants_write());
    let (mut client_io, mut server_io) = pipe(7);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    let blocked = handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap();
    assert!(
        blocked >= 1,
        "the client waited for the server at least once"
    );
    assert_eq!(
        server.server_name(),
        Some("localhost"),
        "the domain is sent as SNI"
    );

    // Frames larger than rustls's 64 KiB of buffered records go in pieces (a packet's
    // worth per call now, to keep a debug build quick).
    client_io.chunk = 1500;
    server_io.chunk = 1500;
    let big: Vec<u8> = (0..300_000u32).map(|n| (n % 251) as u8).collect();
    let mut unsent: VecDeque<Bytes> =
        [Bytes::from_static(b"small"), Bytes::from(big.clone())].into();
    let mut received = Vec::new();
    let mut buffer = vec![0u8; 4096];
    for _ in 0..1_000_000 {
        client.flush(&mut client_io, &mut unsent).unwrap();
        pump_server(&mut server, &mut server_io, &mut received).unwrap();
        if unsent.is_empty() && !client.wants_write() && received.len() == 5 + big.len() {
            break;
        }
    }
    assert_eq!(&received[..5], b"small");
    assert!(
        received[5..] == big[..],
        "the frames arrive whole and in order"
    );

    // And back: the reader hands out plaintext a chunk at a time, then would block.
    let reply: Vec<u8> = (0..70_000u32).map(|n| (n % 13) as u8).collect();
    let mut answer = Vec::new();
    let mut written = 0;
    while answer.len() < reply.len() {
        // The server too buffers at most 64 KiB of records: it writes as the client reads.
        written += server.writer().write(&reply[written..]).unwrap();
        pump_server(&mut server, &mut server_io, &mut Vec::new()).unwrap();
        loop {
            match client.read(&mut client_io, &mut buffer).unwrap() {
                Some(0) => panic!("closed"),
                Some(read) => answer.extend_from_slice(&buffer[..read]),
                None => break,
            }
        }
    }
    assert!(answer == reply);
}

#[test]
fn a_node_that_speaks_only_tls_1_2_is_reached_too() {
    let pki = Pki::with_versions(Leaf::Valid, &[&rustls::version::TLS12]);
    let (settings, _ca) = settings(&pki, Some("localhost"));
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, mut server_io) = pipe(3);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap();
    assert_eq!(
        client.connection.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    let mut unsent: VecDeque<Bytes> = [Bytes::from_static(b"ping")].into();
    let mut received = Vec::new();
    while received.len() < 4 {
        client.flush(&mut client_io, &mut unsent).unwrap();
        pump_server(&mut server, &mut server_io, &mut received).unwrap();
    }
    assert_eq!(received, b"ping");
}

#[test]
fn the_handshake_asks_for_writable_only_while_it_has_something_to_write() {
    let pki = Pki::new(Leaf::Valid);
    let (settings, _ca) = settings(&pki, None);
    let mut client = settings.session("localhost:8090").unwrap();
    let (mut client_io, _server_io) = pipe(usize::MAX);
    // A full socket: the hello stays queued, and the handshake waits for WRITABLE.
    client_io.wire.borrow_mut().client_room = Some(0);
    assert!(!client.handshake(&mut client_io).unwrap());
    assert!(client.wants_write());
    // Room again: the hello is written, and only READABLE is wanted while the node answers.
    client_io.wire.borrow_mut().client_room = None;
    assert!(!client.handshake(&mut client_io).unwrap());
    assert!(!client.wants_write());
}

#[test]
fn a_certificate_for_another_name_is_a_name_mismatch() {
    let pki = Pki::new(Leaf::OtherName);
    let (settings, _ca) = settings(&pki, Some("localhost"));
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, mut server_io) = pipe(100);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    let error = handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap_err();
    let expected = TlsError::NameMismatch {
        name: "localhost".to_owned(),
    };
    assert_eq!(error, ConnectError::Tls(expected));
}

#[test]
fn without_a_domain_the_address_host_is_checked() {
    let pki = Pki::new(Leaf::OtherName);
    let (settings, _ca) = settings(&pki, None);
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, mut server_io) = pipe(100);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    let error = handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap_err();
    let expected = TlsError::NameMismatch {
        name: "127.0.0.1".to_owned(),
    };
    assert_eq!(error, ConnectError::Tls(expected));
    // And with the right certificate, an IP address's name is accepted.
    connected(Leaf::Valid, None, 100);
}

#[test]
fn a_certificate_from_an_unknown_authority_is_rejected() {
    let pki = Pki::new(Leaf::Untrusted);
    let (settings, _ca) = settings(&pki, Some("localhost"));
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, mut server_io) = pipe(100);
    let mut server = ServerConnection::new(pki.server.clone()).unwrap();
    let error = handshake(&mut client, &mut client_io, &mut server, &mut server_io).unwrap_err();
    let ConnectError::Tls(TlsError::CertificateRejected { reason }) = &error else {
        panic!("{error:?}");
    };
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    assert!(
        TlsError::CertificateRejected {
            reason: reason.clone()
        }
        .is_fatal()
    );
}

#[test]
fn a_node_that_answers_in_plaintext_or_hangs_up_does_not_speak_tls() {
    let pki = Pki::new(Leaf::Valid);
    let (settings, _ca) = settings(&pki, Some("localhost"));
    // A plaintext reply: a 256-byte Iggy header, whatever its contents.
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, _server_io) = pipe(usize::MAX);
    assert!(!client.handshake(&mut client_io).unwrap());
    let mut header = vec![0u8; 256];
    header[48..52].copy_from_slice(&256u32.to_le_bytes());
    client_io.wire.borrow_mut().to_client.extend(header);
    assert_eq!(
        client.handshake(&mut client_io),
        Err(ConnectError::Tls(TlsError::NotTls))
    );
    // A node that reads the hello and hangs up.
    let mut client = settings.session("127.0.0.1:8090").unwrap();
    let (mut client_io, _server_io) = pipe(usize::MAX);
    assert!(!client.handshake(&mut client_io).unwrap());
    client_io.wire.borrow_mut().server_closed = true;
    assert_eq!(
        client.handshake(&mut client_io),
        Err(ConnectError::Tls(TlsError::NotTls))
    );
}

#[test]
fn once_up_a_close_notify_or_a_hang_up_is_a_close_and_a_bad_record_an_error() {
    let (mut client, mut client_io, mut server, mut server_io) = connected(Leaf::Valid, None, 50);
    let mut buffer = vec![0u8; 1024];
    assert_eq!(client.read(&mut client_io, &mut buffer).unwrap(), None);
    server.send_close_notify();
    pump_server(&mut server, &mut server_io, &mut Vec::new()).unwrap();
    assert_eq!(client.read(&mut client_io, &mut buffer).unwrap(), Some(0));

    let (mut client, mut client_io, _server, _server_io) = connected(Leaf::Valid, None, 50);
    client_io.wire.borrow_mut().server_closed = true;
    assert_eq!(client.read(&mut client_io, &mut buffer).unwrap(), Some(0));

    let (mut client, mut client_io, _server, _server_io) = connected(Leaf::Valid, None, 50);
    // An application-data record whose contents do not decrypt.
    let record = [[0x17, 0x03, 0x03, 0x00, 0x20].as_slice(), &[0xAB; 32]].concat();
    client_io.wire.borrow_mut().to_client.extend(record);
    let error = client.read(&mut client_io, &mut buffer).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
}

#[test]
fn the_ca_file_is_read_at_once_and_must_hold_a_certificate() {
    let missing = std::env::temp_dir().join("iggy-route-mio-no-such-ca.pem");
    let config = |path: &std::path::Path| TlsConfig {
        domain: None,
        ca_file: Some(path.to_owned()),
    };
    let error = TlsSettings::new(&config(&missing), &[]).unwrap_err();
    assert!(
        matches!(&error, TlsError::CaFile { path, .. } if *path == missing),
        "{error:?}"
    );

    let garbage = TempFile::new(b"not a certificate at all\n");
    let error = TlsSettings::new(&config(&garbage.path), &[]).unwrap_err();
    assert!(matches!(error, TlsError::CaFile { .. }), "{error:?}");

    let broken = TempFile::new(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    let error = TlsSettings::new(&config(&broken.path), &[]).unwrap_err();
    assert!(matches!(error, TlsError::CaFile { .. }), "{error:?}");
    assert!(error.is_fatal());
}

#[test]
fn server_names_are_checked_before_any_connect() {
    let bad = TlsConfig {
        domain: Some("not a name!".to_owned()),
        ca_file: None,
    };
    assert_eq!(
        TlsSettings::new(&bad, &[]).unwrap_err(),
        TlsError::InvalidServerName {
            name: "not a name!".to_owned()
        }
    );
    // Without a domain, every seed's host is a name to check; the web PKI roots serve.
    let seeds = vec![
        "node-1.example:8090".to_owned(),
        "bad_host!:8090".to_owned(),
    ];
    assert_eq!(
        TlsSettings::new(&TlsConfig::default(), &seeds).unwrap_err(),
        TlsError::InvalidServerName {
            name: "bad_host!".to_owned()
        }
    );
    let settings = TlsSettings::new(&TlsConfig::default(), &seeds[..1]).unwrap();
    assert_eq!(settings.session("[::1]:8090").unwrap().name, "::1");
}
