//! The whole blocking client against a minimal loopback node, with name lookups scripted:
//! a lookup that hangs must not hold up the I/O thread, and every address a name resolves
//! to is tried in turn. (The adversarial wire tests of both adapters live in the tests
//! crate; these need the lookup seam, which is internal.)
#![allow(clippy::unwrap_used)]

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
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
                        std::thread::spawn(move || serve(stream, addr, &stopping));
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

fn serve(mut stream: TcpStream, addr: SocketAddr, stop: &AtomicBool) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
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
            if stream.write_all(&reply).is_err() {
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
