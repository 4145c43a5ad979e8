//! TLS on every link, driven by the I/O thread itself.
//!
//! rustls's [`ClientConnection`] does no I/O of its own: it takes the bytes read from the
//! socket (`read_tls`, then `process_new_packets`), hands out the records to write
//! (`write_tls`), and turns plaintext into records and back (`writer`, `reader`). So the
//! mio loop drives it exactly as it drives a plain socket: every call here goes as far as
//! the non-blocking socket allows and returns at `WouldBlock`, and the loop waits for the
//! socket's next readiness (WRITABLE only while [`TlsSession::wants_write`]). No thread,
//! no blocking call, and the plaintext path does not go through any of this.
//!
//! One [`TlsSettings`] is built when the client connects, from
//! [`TlsConfig`](iggy_route_core::TlsConfig), by the core's `TlsClient`: a bad CA file or
//! server name fails `connect` before any socket is opened. Its configuration is shared by
//! every link, which also shares rustls's session cache: a data link resumes the session of
//! an earlier link to its node instead of a full handshake.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use iggy_route_core::{ConnectError, TlsClient, TlsConfig, TlsError};
use rustls::ClientConnection;

/// What every link's session is made from, built once per client: the core's
/// [`TlsClient`] (versions, provider, trusted roots, names).
#[derive(Debug, Clone)]
pub(crate) struct TlsSettings(TlsClient);

impl TlsSettings {
    /// Reads the CA file (or takes the bundled web PKI roots) and checks the server names
    /// the links will use: `tls.domain`, or else the host of every seed. Called before any
    /// I/O, so that a configuration to fix fails `connect` at once.
    pub(crate) fn new(tls: &TlsConfig, seeds: &[String]) -> Result<Self, TlsError> {
        TlsClient::new(tls, seeds, |path| std::fs::read(path)).map(Self)
    }

    /// A new session for a link to `addr` (`host:port`), its handshake not started.
    pub(crate) fn session(&self, addr: &str) -> Result<TlsSession, TlsError> {
        let name = self.0.server_name(addr)?;
        let shown = name.to_str().into_owned();
        let connection = ClientConnection::new(Arc::clone(self.0.config()), name)
            .map_err(|error| TlsError::Other(error.to_string()))?;
        Ok(TlsSession {
            connection,
            name: shown,
        })
    }
}

/// One link's TLS session: rustls's state, driven over the link's non-blocking socket.
#[derive(Debug)]
pub(crate) struct TlsSession {
    connection: ClientConnection,
    /// The name checked, for a name mismatch's error.
    name: String,
}

impl TlsSession {
    /// Whether rustls holds records to write: the handshake's, an alert, or encrypted
    /// plaintext. The socket waits for WRITABLE only while this holds (or plaintext waits).
    pub(crate) fn wants_write(&self) -> bool {
        self.connection.wants_write()
    }

    /// Moves the handshake on as far as the socket allows: writes what it has to say,
    /// reads and processes what the node said, until the socket would block (`Ok(false)`)
    /// or the handshake is complete (`Ok(true)`; the last flight may still wait in
    /// [`wants_write`](Self::wants_write), written when the socket turns writable).
    pub(crate) fn handshake(&mut self, io: &mut (impl Read + Write)) -> Result<bool, ConnectError> {
        loop {
            while self.connection.wants_write() {
                match self.connection.write_tls(io) {
                    Ok(0) => return Err(self.handshake_io(io::ErrorKind::WriteZero.into())),
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(self.handshake_io(error)),
                }
            }
            if !self.connection.is_handshaking() {
                return Ok(true);
            }
            match self.connection.read_tls(io) {
                // The node hung up on our hello: what a server that does not speak TLS
                // does when it cannot make sense of it.
                Ok(0) => return Err(ConnectError::Tls(TlsError::NotTls)),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(self.handshake_io(error)),
            }
            if let Err(error) = self.connection.process_new_packets() {
                // rustls queued an alert saying why; the node may log it. Best effort: the
                // link is dropped either way.
                let _ = self.connection.write_tls(io);
                return Err(ConnectError::Tls(self.classify(error)));
            }
        }
    }

    /// An I/O error during the handshake, as the core classifies it.
    fn handshake_io(&self, error: io::Error) -> ConnectError {
        ConnectError::Tls(TlsError::from_handshake_io(&error))
    }

    /// The typed failure of a handshake that rustls gave up on.
    fn classify(&self, error: rustls::Error) -> TlsError {
        TlsError::from_rustls(&error, &self.name)
    }

    /// Encrypts queued plaintext frames and writes the records until the socket would
    /// block or nothing is left. rustls holds at most 64 KiB of records: a larger frame
    /// is taken in pieces, each written out before the next is encrypted, so memory stays
    /// bounded whatever the frame's size.
    pub(crate) fn flush(
        &mut self,
        io: &mut impl Write,
        unsent: &mut VecDeque<Bytes>,
    ) -> io::Result<()> {
        loop {
            while let Some(front) = unsent.front_mut() {
                let taken = self.connection.writer().write(front)?;
                front.advance(taken);
                if front.is_empty() {
                    unsent.pop_front();
                } else if taken == 0 {
                    break;
                }
            }
            if !self.connection.wants_write() {
                return Ok(());
            }
            match self.connection.write_tls(io) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// One chunk of plaintext into `buffer`, as a plain socket's read gives it: `Ok(None)`
    /// when the socket would block, `Ok(Some(0))` when the node closed (with or without
    /// `close_notify`). A record that fails to decrypt or parse is an error: the link is
    /// closed, as after any I/O error.
    pub(crate) fn read(
        &mut self,
        io: &mut (impl Read + Write),
        buffer: &mut [u8],
    ) -> io::Result<Option<usize>> {
        loop {
            // Plaintext rustls already holds comes first: it also keeps rustls's receive
            // buffer from filling, which would make `read_tls` refuse to read.
            match self.connection.reader().read(buffer) {
                Ok(read) => return Ok(Some(read)),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(Some(0)),
                Err(error) => return Err(error),
            }
            match self.connection.read_tls(io) {
                // At EOF rustls remembers it; the reader reports it above.
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            }
            if let Err(error) = self.connection.process_new_packets() {
                let _ = self.connection.write_tls(io);
                return Err(io::Error::new(io::ErrorKind::InvalidData, error));
            }
        }
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
