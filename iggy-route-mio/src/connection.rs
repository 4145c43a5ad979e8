//! One link's socket and the bytes it still has to write.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use bytes::{Buf, Bytes};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

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
}

/// A non-blocking socket of one link.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) stream: TcpStream,
    pub(crate) connected: bool,
    /// Frames accepted from the router and not yet fully written, in order.
    unsent: VecDeque<Bytes>,
    /// The interest the socket is registered with now.
    pub(crate) registered: Interest,
    pub(crate) span: tracing::Span,
    /// Resolved addresses not tried yet. A name may resolve to several addresses (`localhost`
    /// to `::1` and `127.0.0.1`, say) of which only some listen: a failed connect moves on to
    /// the next one, and only when none is left does the router hear of a failure. The
    /// router's connect timeout bounds the whole walk.
    untried: VecDeque<SocketAddr>,
}

impl Connection {
    /// Starts a non-blocking connect to the first of `addrs` that takes one, registered
    /// under `token`. Fails with the last error when none does.
    pub(crate) fn dial(
        addrs: Vec<SocketAddr>,
        registry: &Registry,
        token: Token,
        span: tracing::Span,
    ) -> io::Result<Self> {
        let mut untried = VecDeque::from(addrs);
        let stream = start_connect(&mut untried, registry, token)?;
        Ok(Self {
            stream,
            connected: false,
            unsent: VecDeque::new(),
            registered: CONNECTING,
            span,
            untried,
        })
    }

    /// The connect in progress failed: starts one to the next address. `Ok(false)` when
    /// every address has been tried.
    pub(crate) fn dial_next(&mut self, registry: &Registry, token: Token) -> io::Result<bool> {
        if self.untried.is_empty() {
            return Ok(false);
        }
        let _ = registry.deregister(&mut self.stream);
        self.stream = start_connect(&mut self.untried, registry, token)?;
        self.registered = CONNECTING;
        Ok(true)
    }

    /// A non-blocking connect is finished when the socket first turns writable; whether it
    /// succeeded shows in `take_error` and `peer_addr`.
    pub(crate) fn check_connect(&mut self) -> ConnectState {
        match self.stream.take_error() {
            Ok(Some(error)) | Err(error) => return ConnectState::Failed(error),
            Ok(None) => {}
        }
        match self.stream.peer_addr() {
            Ok(_) => {
                self.connected = true;
                // Requests are small and lockstep: Nagle would only add latency.
                let _ = self.stream.set_nodelay(true);
                ConnectState::Connected
            }
            Err(error)
                if error.kind() == io::ErrorKind::NotConnected
                    || error.kind() == io::ErrorKind::WouldBlock =>
            {
                ConnectState::Pending
            }
            Err(error) => ConnectState::Failed(error),
        }
    }

    pub(crate) fn queue(&mut self, bytes: Bytes) {
        self.unsent.push_back(bytes);
    }

    /// Writes queued bytes until the socket would block or nothing is left.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if !self.connected {
            return Ok(());
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

    /// One read: `Ok(None)` when the socket would block.
    pub(crate) fn read(&mut self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
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
    /// then readable always and writable only while bytes wait.
    pub(crate) fn wanted_interest(&self) -> Interest {
        if !self.connected || !self.unsent.is_empty() {
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
        let mut connection = Connection::dial(addrs, poll.registry(), token, span).unwrap();
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
        assert!(Connection::dial(Vec::new(), poll.registry(), Token(1), span).is_err());
    }
}
