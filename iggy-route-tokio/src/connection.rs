//! One TCP connection per link: a task that connects and then reads, and a writer task.
//! They only move bytes and report what the socket did; every decision is the router's.
//!
//! With TLS the task also runs the handshake before it reports the link connected, and the
//! read and write loops then run over the TLS stream's halves. The loops are generic over
//! the stream, so plain TCP runs its own halves directly: no boxing, no extra copy.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use iggy_route_core::client::connect_error;
use iggy_route_core::{CloseReason, ConnectError, LinkId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tracing::trace;

use crate::probe;
use crate::tls::Tls;

/// Frames waiting to be written on one link. The protocol is lockstep (one request in
/// flight per link, plus a heartbeat), so this never fills unless the peer stops reading.
pub(crate) const WRITE_QUEUE_LEN: usize = 64;

/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

/// What the transport reports to the driver, in the order it happened on each link.
#[derive(Debug)]
pub(crate) enum IoEvent {
    Connected {
        link: LinkId,
        writer: mpsc::Sender<Bytes>,
        writer_task: JoinHandle<()>,
    },
    /// TCP is up and the TLS handshake under way: should the router's connect timeout
    /// close the link now, it was the handshake that did not finish in time.
    Handshaking {
        link: LinkId,
    },
    ConnectFailed {
        link: LinkId,
        reason: ConnectError,
    },
    Read {
        link: LinkId,
        bytes: BytesMut,
    },
    Closed {
        link: LinkId,
        reason: CloseReason,
    },
}

/// Connects `link` to `addr` (with TLS when `tls` is given), then forwards everything read
/// until the socket ends. A send to the driver fails only once the driver is gone, and then
/// there is nobody to tell.
pub(crate) async fn run(
    link: LinkId,
    addr: String,
    tls: Option<Arc<Tls>>,
    events: mpsc::Sender<IoEvent>,
) {
    match tls {
        None => {
            let stream = match connect(&addr).await {
                Ok(stream) => stream,
                Err(reason) => {
                    let _ = events.send(IoEvent::ConnectFailed { link, reason }).await;
                    return;
                }
            };
            // Requests are small and lockstep: Nagle would only add latency.
            let _ = stream.set_nodelay(true);
            let (read, write) = stream.into_split();
            serve(link, read, write, events).await;
        }
        Some(tls) => {
            let stream = match connect_tls(link, &addr, &tls, &events).await {
                Ok(stream) => stream,
                Err(reason) => {
                    let _ = events.send(IoEvent::ConnectFailed { link, reason }).await;
                    return;
                }
            };
            let (read, write) = tokio::io::split(stream);
            serve(link, read, write, events).await;
        }
    }
}

/// TCP connect, then the handshake, together within `Config::connect_timeout` (the router
/// closes a link that takes longer anyway; this bound only makes the task end by itself).
async fn connect_tls(
    link: LinkId,
    addr: &str,
    tls: &Tls,
    events: &mpsc::Sender<IoEvent>,
) -> Result<TlsStream<TcpStream>, ConnectError> {
    let deadline = tokio::time::Instant::now() + tls.connect_timeout();
    // Before dialling: an address that is no valid name cannot be verified.
    let name = tls.server_name(addr).map_err(ConnectError::Tls)?;
    let stream = connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let _ = events.send(IoEvent::Handshaking { link }).await;
    let peer = stream.peer_addr();
    let handshake = tls.handshake(name, stream, deadline);
    let secured = match peer {
        // A plaintext Iggy node waits silently on a ClientHello: see `probe`.
        Ok(peer) => {
            let delay = probe::probe_delay(tls.connect_timeout());
            probe::unless_plaintext(handshake, peer, delay).await
        }
        Err(_) => handshake.await,
    };
    secured.map_err(ConnectError::Tls)
}

/// Reports the link connected, with a writer task on `write`, and reads until it ends.
async fn serve<R, W>(link: LinkId, read: R, write: W, events: mpsc::Sender<IoEvent>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (writer, queue) = mpsc::channel(WRITE_QUEUE_LEN);
    let writer_task = tokio::spawn(write_loop(link, write, queue, events.clone()));
    let connected = IoEvent::Connected {
        link,
        writer,
        writer_task,
    };
    if events.send(connected).await.is_ok() {
        read_loop(link, read, events).await;
    }
}

async fn connect(addr: &str) -> Result<TcpStream, ConnectError> {
    let resolved = tokio::net::lookup_host(addr)
        .await
        .map_err(|_| ConnectError::Resolve)?;
    let mut last = ConnectError::Resolve;
    for candidate in resolved {
        match TcpStream::connect(candidate).await {
            Ok(stream) => return Ok(stream),
            Err(error) => last = connect_error(&error),
        }
    }
    Err(last)
}

async fn read_loop<R>(link: LinkId, mut read: R, events: mpsc::Sender<IoEvent>)
where
    R: AsyncRead + Unpin,
{
    // One buffer for the link's life: each read's bytes are split off it, and its room is
    // topped up only when it runs low (in place once the driver has dropped the earlier
    // reads), so a peer that trickles bytes does not cost an allocation per read.
    let mut buffer = BytesMut::with_capacity(READ_CHUNK);
    loop {
        if buffer.capacity() < READ_CHUNK / 4 {
            buffer.reserve(READ_CHUNK);
        }
        let reason = match read.read_buf(&mut buffer).await {
            Ok(0) => CloseReason::Peer,
            Ok(len) => {
                trace!(%link, len, "read");
                // The bounded channel is the backpressure: a busy driver slows the reader.
                if events
                    .send(IoEvent::Read {
                        link,
                        bytes: buffer.split(),
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Err(error) => CloseReason::Io(error.to_string()),
        };
        let _ = events.send(IoEvent::Closed { link, reason }).await;
        return;
    }
}

async fn write_loop<W>(
    link: LinkId,
    mut write: W,
    mut queue: mpsc::Receiver<Bytes>,
    events: mpsc::Sender<IoEvent>,
) where
    W: AsyncWrite + Unpin,
{
    while let Some(bytes) = queue.recv().await {
        // TLS may keep the last records of a frame buffered until flushed; flushing a TCP
        // half is a no-op that returns at once.
        let written = match write.write_all(&bytes).await {
            Ok(()) => write.flush().await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            let reason = CloseReason::Io(error.to_string());
            let _ = events.send(IoEvent::Closed { link, reason }).await;
            return;
        }
    }
}
