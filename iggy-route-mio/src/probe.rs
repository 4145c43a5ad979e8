//! Telling a plaintext Iggy node from a slow TLS one.
//!
//! A plaintext Iggy 0.11.0 node reads a whole 256-byte header before it judges anything,
//! and rustls's ClientHello is shorter: such a node waits for the rest in silence, and the
//! handshake would only time out, exactly as with a TLS node that hangs. A TLS node answers
//! a ClientHello within a round trip. So when a handshake has had no result for
//! [`probe_delay`], the loop opens a second, plaintext connection to the same address and
//! sends a `PING` header, as the SDK's heartbeat may before signing in (no credentials go
//! out). Only a node that answers with an Iggy header is taken for a plaintext one
//! (`TlsError::NotTls`); a TLS node answers with an alert or hangs up, which proves
//! nothing, and the handshake runs on to its deadline.
//!
//! The probe is a non-blocking socket of the loop like any other, under its link's token
//! with [`PROBE_BIT`] set.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use iggy_route_core::wire::{
    EvictionHeader, HEADER_SIZE, Operation, ReplyHeader, RequestHeader, code,
};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

/// Set in a probe's token; the rest is its link's id. (Link ids never come near it: they
/// count up from 1 per connect.)
pub(crate) const PROBE_BIT: usize = 1 << (usize::BITS - 2);

/// The probe never waits longer than this, whatever the connect timeout: a TLS node that
/// takes a second to answer a ClientHello is already unusually slow.
const PROBE_DELAY_MAX: Duration = Duration::from_secs(1);

/// How long a handshake may go without a result before its node is probed: a quarter of
/// the connect timeout, at most a second.
pub(crate) fn probe_delay(connect_timeout: Duration) -> Duration {
    (connect_timeout / 4).min(PROBE_DELAY_MAX)
}

/// What a probe has found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not yet: wait for the socket's next readiness.
    Pending,
    /// The node answered the plaintext `PING` in Iggy.
    PlaintextIggy,
    /// Nothing learned (an alert, a hang-up, no connection): the handshake decides.
    Unknown,
}

/// A plaintext `PING` on its own connection, and the answer read back.
#[derive(Debug)]
pub(crate) struct Probe {
    pub(crate) stream: TcpStream,
    connected: bool,
    ping: [u8; HEADER_SIZE],
    sent: usize,
    answer: [u8; HEADER_SIZE],
    received: usize,
}

impl Probe {
    /// Starts a non-blocking connect to `peer`, registered under `token`.
    pub(crate) fn start(peer: SocketAddr, registry: &Registry, token: Token) -> io::Result<Self> {
        let mut stream = TcpStream::connect(peer)?;
        registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        // The server drops a request from client 0 without a word; any other id will do
        // for a ping before sign-in.
        let client = getrandom::u64().map_or(1, |random| random.max(1));
        let header = RequestHeader::new(
            Operation::NonReplicated,
            code::PING,
            u128::from(client),
            0,
            1,
            0,
        );
        let mut ping = [0u8; HEADER_SIZE];
        header.encode(&mut ping.as_mut_slice());
        Ok(Self {
            stream,
            connected: false,
            ping,
            sent: 0,
            answer: [0; HEADER_SIZE],
            received: 0,
        })
    }

    /// Connects, writes the ping and reads the answer's header as far as the socket
    /// allows.
    pub(crate) fn advance(&mut self) -> Verdict {
        if !self.connected {
            if let Ok(Some(_)) | Err(_) = self.stream.take_error() {
                return Verdict::Unknown;
            }
            match self.stream.peer_addr() {
                Ok(_) => self.connected = true,
                Err(error) if still_connecting(&error) => return Verdict::Pending,
                Err(_) => return Verdict::Unknown,
            }
        }
        while self.sent < HEADER_SIZE {
            match self.stream.write(&self.ping[self.sent..]) {
                Ok(0) => return Verdict::Unknown,
                Ok(written) => self.sent += written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Verdict::Pending,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Verdict::Unknown,
            }
        }
        while self.received < HEADER_SIZE {
            match self.stream.read(&mut self.answer[self.received..]) {
                Ok(0) => return Verdict::Unknown,
                Ok(read) => self.received += read,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Verdict::Pending,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Verdict::Unknown,
            }
        }
        let iggy = ReplyHeader::decode(&self.answer).is_ok()
            || EvictionHeader::decode(&self.answer).is_ok();
        if iggy {
            Verdict::PlaintextIggy
        } else {
            Verdict::Unknown
        }
    }
}

fn still_connecting(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotConnected | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};
    use std::time::Instant;

    use bytes::BytesMut;
    use mio::{Events, Poll};

    use super::*;

    /// Runs a probe of `peer` to its verdict (bounded).
    fn probe(peer: SocketAddr) -> Verdict {
        let mut poll = Poll::new().unwrap();
        let Ok(mut probe) = Probe::start(peer, poll.registry(), Token(PROBE_BIT | 1)) else {
            return Verdict::Unknown;
        };
        let mut events = Events::with_capacity(4);
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            assert!(Instant::now() < until, "no verdict");
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .unwrap();
            let verdict = probe.advance();
            if verdict != Verdict::Pending {
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
            let mut header = [0u8; HEADER_SIZE];
            if stream.read_exact(&mut header).is_ok() {
                let _ = stream.write_all(&answer(&header));
            }
        });
        addr
    }

    #[test]
    fn the_probe_waits_a_quarter_of_the_connect_timeout_at_most_a_second() {
        assert_eq!(
            probe_delay(Duration::from_millis(400)),
            Duration::from_millis(100)
        );
        assert_eq!(probe_delay(Duration::from_secs(30)), PROBE_DELAY_MAX);
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
        assert_eq!(probe(addr), Verdict::PlaintextIggy);
    }

    #[test]
    fn an_alert_a_hang_up_or_no_node_proves_nothing() {
        // What a TLS node answers to plaintext: an alert record, then it closes.
        let alert = node(|_| vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]);
        assert_eq!(probe(alert), Verdict::Unknown);
        let garbage = node(|_| vec![0xAB; HEADER_SIZE]);
        assert_eq!(probe(garbage), Verdict::Unknown);
        let gone = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        assert_eq!(probe(addr), Verdict::Unknown);
    }
}
