//! The whole blocking client against a minimal loopback node, with name lookups scripted:
//! a lookup that hangs must not hold up the I/O thread, and every address a name resolves
//! to is tried in turn. (The adversarial wire tests of both adapters live in the tests
//! crate; these need the lookup seam, which is internal.)
#![allow(clippy::unwrap_used)]

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use iggy_route_core::wire::{
    ClusterMetadata, ClusterNode, Frame, FrameDecoder, LoginRegisterReply, Name, NodeRole,
    NodeStatus, Operation, PROTOCOL_VERSION, ReplyHeader, code, put_result_ok,
};
use iggy_route_core::{Config, Credentials};

use crate::Client;
use crate::resolve::Lookup;

/// A node that signs every login in and names only itself in its roster.
struct MiniNode {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl MiniNode {
    fn start() -> MiniNode {
        Self::serving(None)
    }

    /// A node that serves TLS only, presenting `server`'s certificate.
    fn start_tls(server: Arc<rustls::ServerConfig>) -> MiniNode {
        Self::serving(Some(server))
    }

    fn serving(tls: Option<Arc<rustls::ServerConfig>>) -> MiniNode {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let stopping = Arc::clone(&stopping);
                        let tls = tls.clone();
                        std::thread::spawn(move || {
                            stream.set_nonblocking(false).unwrap();
                            stream
                                .set_read_timeout(Some(Duration::from_millis(20)))
                                .unwrap();
                            match tls {
                                None => serve(stream, addr, &stopping),
                                Some(config) => {
                                    let session = rustls::ServerConnection::new(config).unwrap();
                                    let stream = rustls::StreamOwned::new(session, stream);
                                    serve(stream, addr, &stopping);
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        MiniNode {
            addr,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for MiniNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Answers requests on `stream` (a socket with a short read timeout, or TLS over one) until
/// the client hangs up or the node stops.
fn serve(mut stream: impl Read + Write, addr: SocketAddr, stop: &AtomicBool) {
    let mut decoder = FrameDecoder::default();
    let mut buffer = vec![0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        let read = match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) if error.kind() == io::ErrorKind::TimedOut => continue,
            Err(_) => return,
        };
        let mut input = &buffer[..read];
        while let Ok(Some(Frame::Request { header, .. })) = decoder.decode(&mut input) {
            let mut body = BytesMut::new();
            let status = if header.operation == Operation::Register {
                put_result_ok(&mut body);
                LoginRegisterReply {
                    user_id: 1,
                    session: 7,
                    server_protocol_version: PROTOCOL_VERSION,
                    server_version: Name::new("0.11.0").unwrap(),
                }
                .encode(&mut body);
                0
            } else if header.code == code::GET_CLUSTER_METADATA {
                let node = ClusterNode {
                    name: "mini".to_owned(),
                    ip: addr.ip().to_string(),
                    tcp_port: addr.port(),
                    quic_port: 0,
                    http_port: 0,
                    websocket_port: 0,
                    role: NodeRole::Leader,
                    status: NodeStatus::Healthy,
                };
                ClusterMetadata {
                    name: "mini".to_owned(),
                    nodes: vec![node],
                }
                .encode(&mut body);
                0
            } else {
                0
            };
            let mut reply = BytesMut::new();
            ReplyHeader::for_request(&header, status, 1, body.len()).encode(&mut reply);
            reply.extend_from_slice(&body);
            if stream.write_all(&reply).is_err() || stream.flush().is_err() {
                return;
            }
        }
    }
}

fn config(seeds: Vec<String>) -> Config {
    let mut config = Config::new(seeds, Credentials::user("iggy", "iggy").unwrap());
    config.connect_timeout = Duration::from_millis(300);
    config.reconnect_backoff_initial = Duration::from_millis(10);
    config
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap()
}

#[test]
fn a_hanging_lookup_does_not_hold_up_the_io_thread() {
    let node = MiniNode::start();
    // The first seed's lookup takes 3 s. Resolved on the I/O thread, it would stall every
    // timer: the 300 ms connect timeout could not fire, and `connect` (a 900 ms budget)
    // would fail. Off the thread, the router gives the seed up at 300 ms and signs in on
    // the second one.
    let lookup: Lookup = Arc::new(|addr: &str| {
        if addr == "hanging.test:8090" {
            std::thread::sleep(Duration::from_secs(3));
            return Err(io::Error::other("resolver timed out"));
        }
        Err(io::Error::other("unexpected lookup"))
    });
    let started = Instant::now();
    let seeds = vec!["hanging.test:8090".to_owned(), node.addr.to_string()];
    let client = Client::start(config(seeds), lookup).unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // The loop stays responsive while the lookup thread still sleeps: a shutdown is quick.
    let stopping = Instant::now();
    client.shutdown();
    assert!(stopping.elapsed() < Duration::from_millis(500));
}

#[test]
fn every_address_a_name_resolves_to_is_tried_in_turn() {
    let node = MiniNode::start();
    let good = node.addr;
    let (first, second) = (closed_port(), closed_port());
    // Like `localhost` resolving to `::1` and `127.0.0.1` where only one of them listens.
    let lookup: Lookup = Arc::new(move |addr: &str| {
        if addr == "several.test:8090" {
            return Ok(vec![first, second, good]);
        }
        Err(io::Error::other("unexpected lookup"))
    });
    let client = Client::start(config(vec!["several.test:8090".to_owned()]), lookup).unwrap();
    assert_eq!(client.stats().reconnects, 0);
    client.shutdown();
}

#[test]
fn a_name_that_resolves_to_nothing_moves_on_to_the_next_seed() {
    let node = MiniNode::start();
    let lookup: Lookup = Arc::new(|_: &str| Ok(Vec::new()));
    let seeds = vec!["nothing.test:8090".to_owned(), node.addr.to_string()];
    let started = Instant::now();
    let client = Client::start(config(seeds), lookup).unwrap();
    assert!(started.elapsed() < Duration::from_millis(900));
    client.shutdown();
}

mod tls {
    //! The whole client over TLS against the minimal node, and each way TLS can fail
    //! `connect`, with the time it takes.

    use std::net::TcpListener;

    use iggy_route_core::client::ClientError;
    use iggy_route_core::{TlsConfig, TlsError};

    use super::*;
    use crate::resolve::system_lookup;
    use crate::test_pki::{Leaf, Pki, TempFile};

    /// `config` for `node` over TLS, checking `localhost` against the CA in `ca`.
    fn tls_config(node: SocketAddr, ca: &TempFile) -> Config {
        let mut config = config(vec![node.to_string()]);
        config.tls = Some(TlsConfig {
            domain: Some("localhost".to_owned()),
            ca_file: Some(ca.path.clone()),
        });
        config
    }

    /// How `connect` fails against a node presenting `leaf`, and how long it took.
    fn refused(leaf: Leaf) -> (ClientError, Duration) {
        let pki = Pki::new(leaf);
        let node = MiniNode::start_tls(Arc::clone(&pki.server));
        let ca = pki.ca_file();
        let started = Instant::now();
        let error = Client::start(tls_config(node.addr, &ca), system_lookup()).unwrap_err();
        (error, started.elapsed())
    }

    #[test]
    fn over_tls_the_session_signs_in_and_requests_pass() {
        let pki = Pki::new(Leaf::Valid);
        let node = MiniNode::start_tls(Arc::clone(&pki.server));
        let ca = pki.ca_file();
        let client = Client::start(tls_config(node.addr, &ca), system_lookup()).unwrap();
        for _ in 0..20 {
            let metadata = client.get_cluster_metadata().unwrap();
            assert_eq!(metadata.nodes.len(), 1);
        }
        assert_eq!(client.stats().reconnects, 0);
        client.shutdown();
    }

    #[test]
    fn a_certificate_for_another_name_fails_connect_at_once() {
        let (error, took) = refused(Leaf::OtherName);
        let expected = TlsError::NameMismatch {
            name: "localhost".to_owned(),
        };
        assert!(
            matches!(&error, ClientError::Tls(e) if *e == expected),
            "{error:?}"
        );
        assert!(took < Duration::from_millis(600), "{took:?}");
    }

    #[test]
    fn a_certificate_from_an_unknown_authority_fails_connect_at_once() {
        let (error, took) = refused(Leaf::Untrusted);
        assert!(
            matches!(
                &error,
                ClientError::Tls(TlsError::CertificateRejected { .. })
            ),
            "{error:?}"
        );
        assert!(took < Duration::from_millis(600), "{took:?}");
    }

    #[test]
    fn a_plaintext_node_fails_connect_with_not_tls_long_before_the_budget() {
        // The node waits in silence for the rest of a 256-byte header that the hello does
        // not fill: only the probe (a quarter of the 300 ms connect timeout) tells.
        let node = MiniNode::start();
        let ca = Pki::new(Leaf::Valid).ca_file();
        let started = Instant::now();
        let error = Client::start(tls_config(node.addr, &ca), system_lookup()).unwrap_err();
        assert!(
            matches!(error, ClientError::Tls(TlsError::NotTls)),
            "{error:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_node_that_never_answers_fails_connect_with_handshake_timed_out() {
        // Accepts, reads nothing, says nothing: neither the handshake nor the probe ends.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let (done, stop) = std::sync::mpsc::channel::<()>();
        let held = std::thread::spawn(move || {
            let mut streams = Vec::new();
            listener.set_nonblocking(true).unwrap();
            while stop.try_recv().is_err() {
                if let Ok((stream, _)) = listener.accept() {
                    streams.push(stream);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let ca = Pki::new(Leaf::Valid).ca_file();
        let started = Instant::now();
        let error = Client::start(tls_config(addr, &ca), system_lookup()).unwrap_err();
        assert!(
            matches!(error, ClientError::Tls(TlsError::HandshakeTimedOut)),
            "{error:?}"
        );
        // The connect budget: three connect timeouts.
        assert!(started.elapsed() >= Duration::from_millis(900));
        done.send(()).unwrap();
        held.join().unwrap();
    }

    #[test]
    fn a_bad_ca_file_or_server_name_fails_connect_before_any_io() {
        let garbage = TempFile::new(b"no certificate here");
        // Nothing listens there: an attempt to dial would show as a timeout instead.
        let mut config = tls_config(closed_port(), &garbage);
        let started = Instant::now();
        let error = Client::start(config.clone(), system_lookup()).unwrap_err();
        assert!(
            matches!(error, ClientError::Tls(TlsError::CaFile { .. })),
            "{error:?}"
        );
        config.tls = Some(TlsConfig {
            domain: Some("two words".to_owned()),
            ca_file: None,
        });
        let error = Client::start(config, system_lookup()).unwrap_err();
        assert!(
            matches!(error, ClientError::Tls(TlsError::InvalidServerName { .. })),
            "{error:?}"
        );
        assert!(started.elapsed() < Duration::from_millis(100));
    }
}
