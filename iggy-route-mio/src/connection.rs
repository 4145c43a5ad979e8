//! One link's socket and the bytes it still has to write, with its TLS session when the
//! client uses TLS (see [`crate::tls`]).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use bytes::{Buf, Bytes};
use iggy_route_core::{ConnectError, NodeId};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::tls::TlsSession;

/// What a socket waits for while it connects.
const CONNECTING: Interest = Interest::READABLE.add(Interest::WRITABLE);

/// What a socket became after it was ready.
#[derive(Debug)]
pub(crate) enum ConnectState {
    /// Still connecting (a spurious wake-up).
    Pending,
    /// The connection is up.
    Connected,
    /// The connection attempt failed.
    Failed(io::Error),
    /// TCP connected, but the TLS handshake failed: another address of the same name
    /// would not help (the router dials again after its backoff).
    Refused(ConnectError),
}

/// How far a link's connection has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The non-blocking TCP connect is in progress.
    Connecting,
    /// TCP is up and the TLS handshake in progress; the router has not been told yet.
    Handshaking,
    /// Up, and reported to the router: frames pass.
    Up,
}

/// A non-blocking socket of one link.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) stream: TcpStream,
    phase: Phase,
    /// The TLS session over `stream`, when the client uses TLS (boxed: rustls's state is
    /// large, and a plaintext link should not carry its room).
    tls: Option<Box<TlsSession>>,
    /// Frames accepted from the router and not yet fully written, in order.
    unsent: VecDeque<Bytes>,
    /// The interest the socket is registered with now.
    pub(crate) registered: Interest,
    pub(crate) span: tracing::Span,
    /// The node the link is to, for reporting its failures.
    pub(crate) node: NodeId,
    /// Resolved addresses not tried yet. A name may resolve to several addresses (`localhost`
    /// to `::1` and `127.0.0.1`, say) of which only some listen: a failed connect moves on to
    /// the next one, and only when none is left does the router hear of a failure. The
    /// router's connect timeout bounds the whole walk.
    untried: VecDeque<SocketAddr>,
}

impl Connection {
    /// Starts a non-blocking connect to the first of `addrs` that takes one, registered
    /// under `token`, for a link to `node`; `tls` then runs its handshake over it. Fails
    /// with the last error when no connect starts.
    pub(crate) fn dial(
        addrs: Vec<SocketAddr>,
        registry: &Registry,
        token: Token,
        node: NodeId,
        span: tracing::Span,
        tls: Option<Box<TlsSession>>,
    ) -> io::Result<Self> {
        let mut untried = VecDeque::from(addrs);
        let stream = start_connect(&mut untried, registry, token)?;
        Ok(Self {
            stream,
            phase: Phase::Connecting,
            tls,
            unsent: VecDeque::new(),
            registered: CONNECTING,
            span,
            node,
            untried,
        })
    }

    /// Whether the link is up and reported to the router.
    pub(crate) fn is_up(&self) -> bool {
        self.phase == Phase::Up
    }

    /// Whether TCP is up and the TLS handshake still in progress.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.phase == Phase::Handshaking
    }

    /// Whether the link runs TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The connect in progress failed: starts one to the next address. `Ok(false)` when
    /// every address has been tried. (A TLS session has written nothing yet: it goes on
    /// to the next address as it is.)
    pub(crate) fn dial_next(&mut self, registry: &Registry, token: Token) -> io::Result<bool> {
        if self.untried.is_empty() {
            return Ok(false);
        }
        let _ = registry.deregister(&mut self.stream);
        self.stream = start_connect(&mut self.untried, registry, token)?;
        self.registered = CONNECTING;
        Ok(true)
    }

    /// Moves a link that is not up yet along on a readiness event. A non-blocking connect
    /// is finished when the socket first turns writable; whether it succeeded shows in
    /// `take_error` and `peer_addr`. Over TLS, the handshake then runs as far as the
    /// socket allows on each event, and the link is connected once it is complete.
    pub(crate) fn check_connect(&mut self) -> ConnectState {
        if self.phase == Phase::Connecting {
            match self.stream.take_error() {
                Ok(Some(error)) | Err(error) => return ConnectState::Failed(error),
                Ok(None) => {}
            }
            match self.stream.peer_addr() {
                Ok(_) => {
                    // Requests are small and lockstep: Nagle would only add latency.
                    let _ = self.stream.set_nodelay(true);
                    self.phase = Phase::Handshaking;
                }
                Err(error)
                    if error.kind() == io::ErrorKind::NotConnected
                        || error.kind() == io::ErrorKind::WouldBlock =>
                {
                    return ConnectState::Pending;
                }
                Err(error) => return ConnectState::Failed(error),
            }
        }
        let done = match &mut self.tls {
            None => true,
            Some(tls) => match tls.handshake(&mut self.stream) {
                Ok(done) => done,
                Err(reason) => return ConnectState::Refused(reason),
            },
        };
        if done {
            self.phase = Phase::Up;
            ConnectState::Connected
        } else {
            ConnectState::Pending
        }
    }

    pub(crate) fn queue(&mut self, bytes: Bytes) {
        self.unsent.push_back(bytes);
    }

    /// Writes queued bytes until the socket would block or nothing is left.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.phase != Phase::Up {
            return Ok(());
        }
        if let Some(tls) = &mut self.tls {
            return tls.flush(&mut self.stream, &mut self.unsent);
        }
        while let Some(front) = self.unsent.front_mut() {
            match self.stream.write(front) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    front.advance(written);
                    if front.is_empty() {
                        self.unsent.pop_front();
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// One read (of plaintext, over TLS): `Ok(None)` when the socket would block.
    pub(crate) fn read(&mut self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
        if let Some(tls) = &mut self.tls {
            return tls.read(&mut self.stream, buffer);
        }
        loop {
            match self.stream.read(buffer) {
                Ok(read) => return Ok(Some(read)),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// What the socket should wait for, worked out from state: the connect's completion,
    /// then readable always and writable only while bytes wait (frames not yet handed to
    /// TLS, or records TLS has to write: the handshake's own among them).
    pub(crate) fn wanted_interest(&self) -> Interest {
        let writing = !self.unsent.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write());
        if self.phase == Phase::Connecting || writing {
            CONNECTING
        } else {
            Interest::READABLE
        }
    }
}

/// Connects to addresses taken from the front of `untried` until a connect starts (a
/// non-blocking connect fails at once only for local reasons, such as an address family
/// the host cannot reach); the socket is registered under `token`.
fn start_connect(
    untried: &mut VecDeque<SocketAddr>,
    registry: &Registry,
    token: Token,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to");
    while let Some(addr) = untried.pop_front() {
        match TcpStream::connect(addr) {
            Ok(mut stream) => {
                registry.register(&mut stream, token, CONNECTING)?;
                return Ok(stream);
            }
            Err(error) => last = error,
        }
    }
    Err(last)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};
    use std::time::{Duration, Instant};

    use mio::{Events, Poll};

    use super::*;

    /// A loopback port nothing listens on (bound, then released).
    fn closed_port() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.local_addr().unwrap()
    }

    #[test]
    fn a_refused_address_moves_the_connect_on_to_the_next() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let good = listener.local_addr().unwrap();
        let addrs = vec![closed_port(), closed_port(), good];
        let mut poll = Poll::new().unwrap();
        let token = Token(1);
        let span = tracing::Span::none();
        let mut connection =
            Connection::dial(addrs, poll.registry(), token, NodeId(0), span, None).unwrap();
        let mut events = Events::with_capacity(8);
        let until = Instant::now() + Duration::from_secs(3);
        let mut redials = 0;
        loop {
            assert!(Instant::now() < until, "never connected");
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            if events.is_empty() {
                continue;
            }
            match connection.check_connect() {
                ConnectState::Pending => {}
                ConnectState::Connected => break,
                ConnectState::Refused(reason) => panic!("{reason}"),
                ConnectState::Failed(_) => {
                    assert!(connection.dial_next(poll.registry(), token).unwrap());
                    redials += 1;
                }
            }
        }
        assert_eq!(redials, 2);
        assert_eq!(connection.stream.peer_addr().unwrap(), good);
        assert!(!connection.dial_next(poll.registry(), token).unwrap());
    }

    #[test]
    fn dialling_no_address_fails() {
        let poll = Poll::new().unwrap();
        let span = tracing::Span::none();
        let (registry, node) = (poll.registry(), NodeId(0));
        assert!(Connection::dial(Vec::new(), registry, Token(1), node, span, None).is_err());
    }
}
