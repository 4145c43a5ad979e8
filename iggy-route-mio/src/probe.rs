//! The plaintext probe's I/O: a second connection to a node whose TLS handshake has had
//! no result for a while. What it sends, what the answer means and when it starts are the
//! core's (`iggy_route_core::client::probe_request` and its siblings: see there why a
//! plaintext Iggy node has to be asked).
//!
//! The probe is a non-blocking socket of the loop like any other, under its link's token
//! with [`PROBE_BIT`] set.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

pub(crate) use iggy_route_core::client::probe_delay;
use iggy_route_core::client::{PROBE_LEN, ProbeVerdict, probe_request, probe_verdict};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

/// Set in a probe's token; the rest is its link's id. (Link ids never come near it: they
/// count up from 1 per connect.)
pub(crate) const PROBE_BIT: usize = 1 << (usize::BITS - 2);

/// A plaintext `PING` on its own connection, and the answer read back.
#[derive(Debug)]
pub(crate) struct Probe {
    pub(crate) stream: TcpStream,
    connected: bool,
    ping: [u8; PROBE_LEN],
    sent: usize,
    answer: [u8; PROBE_LEN],
    received: usize,
}

impl Probe {
    /// Starts a non-blocking connect to `peer`, registered under `token`.
    pub(crate) fn start(peer: SocketAddr, registry: &Registry, token: Token) -> io::Result<Self> {
        let mut stream = TcpStream::connect(peer)?;
        registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        // Any client id but 0 will do for a ping before sign-in; the core sees to that.
        let ping = probe_request(getrandom::u64().unwrap_or(1));
        Ok(Self {
            stream,
            connected: false,
            ping,
            sent: 0,
            answer: [0; PROBE_LEN],
            received: 0,
        })
    }

    /// Connects, writes the ping and reads the answer's header as far as the socket
    /// allows.
    pub(crate) fn advance(&mut self) -> ProbeVerdict {
        if !self.connected {
            if let Ok(Some(_)) | Err(_) = self.stream.take_error() {
                return ProbeVerdict::Unknown;
            }
            match self.stream.peer_addr() {
                Ok(_) => self.connected = true,
                Err(error) if still_connecting(&error) => return ProbeVerdict::Pending,
                Err(_) => return ProbeVerdict::Unknown,
            }
        }
        while self.sent < PROBE_LEN {
            match self.stream.write(&self.ping[self.sent..]) {
                Ok(0) => return ProbeVerdict::Unknown,
                Ok(written) => self.sent += written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return ProbeVerdict::Pending;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ProbeVerdict::Unknown,
            }
        }
        while self.received < PROBE_LEN {
            match self.stream.read(&mut self.answer[self.received..]) {
                Ok(0) => return ProbeVerdict::Unknown,
                Ok(read) => self.received += read,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return ProbeVerdict::Pending;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ProbeVerdict::Unknown,
            }
        }
        probe_verdict(&self.answer)
    }
}

fn still_connecting(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotConnected | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::net::{Ipv4Addr, TcpListener};
    use std::time::{Duration, Instant};

    use bytes::BytesMut;
    use iggy_route_core::wire::{ReplyHeader, RequestHeader, code};
    use mio::{Events, Poll};

    use super::*;

    /// Runs a probe of `peer` to its verdict (bounded).
    fn probe(peer: SocketAddr) -> ProbeVerdict {
        let mut poll = Poll::new().unwrap();
        let Ok(mut probe) = Probe::start(peer, poll.registry(), Token(PROBE_BIT | 1)) else {
            return ProbeVerdict::Unknown;
        };
        let mut events = Events::with_capacity(4);
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            assert!(Instant::now() < until, "no verdict");
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .unwrap();
            let verdict = probe.advance();
            if verdict != ProbeVerdict::Pending {
                return verdict;
            }
        }
    }

    /// A node on a thread that reads one 256-byte header and answers with `answer`.
    fn node(answer: impl FnOnce(&[u8]) -> Vec<u8> + Send + 'static) -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut header = [0u8; PROBE_LEN];
            if stream.read_exact(&mut header).is_ok() {
                let _ = stream.write_all(&answer(&header));
            }
        });
        addr
    }

    #[test]
    fn a_node_that_answers_the_ping_in_iggy_speaks_plaintext() {
        let addr = node(|header| {
            let request = RequestHeader::decode(header).unwrap();
            assert_eq!(request.command_code(), Some(code::PING));
            assert_ne!(request.client, 0);
            let mut reply = BytesMut::new();
            ReplyHeader::for_request(&request, 0, 1, 0).encode(&mut reply);
            reply.to_vec()
        });
        assert_eq!(probe(addr), ProbeVerdict::PlaintextIggy);
    }

    #[test]
    fn an_alert_a_hang_up_or_no_node_proves_nothing() {
        // What a TLS node answers to plaintext: an alert record, then it closes.
        let alert = node(|_| vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]);
        assert_eq!(probe(alert), ProbeVerdict::Unknown);
        let garbage = node(|_| vec![0xAB; PROBE_LEN]);
        assert_eq!(probe(garbage), ProbeVerdict::Unknown);
        let gone = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        assert_eq!(probe(addr), ProbeVerdict::Unknown);
    }
}
