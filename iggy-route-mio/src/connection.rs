//! One link's socket and the bytes it still has to write.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use bytes::{Buf, Bytes};
use mio::Interest;
use mio::net::TcpStream;

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
}

impl Connection {
    pub(crate) fn new(stream: TcpStream, registered: Interest, span: tracing::Span) -> Self {
        Self {
            stream,
            connected: false,
            unsent: VecDeque::new(),
            registered,
            span,
        }
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
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        }
    }
}
