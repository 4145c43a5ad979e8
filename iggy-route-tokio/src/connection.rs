//! One TCP connection per link: a task that connects and then reads, and a writer task.
//! They only move bytes and report what the socket did; every decision is the router's.

use bytes::{Bytes, BytesMut};
use iggy_route_core::client::connect_error;
use iggy_route_core::{CloseReason, ConnectError, LinkId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::trace;

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

/// Connects `link` to `addr`, then forwards everything read until the socket ends. A send
/// to the driver fails only once the driver is gone, and then there is nobody to tell.
pub(crate) async fn run(link: LinkId, addr: String, events: mpsc::Sender<IoEvent>) {
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

async fn read_loop(link: LinkId, mut read: OwnedReadHalf, events: mpsc::Sender<IoEvent>) {
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

async fn write_loop(
    link: LinkId,
    mut write: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Bytes>,
    events: mpsc::Sender<IoEvent>,
) {
    while let Some(bytes) = queue.recv().await {
        if let Err(error) = write.write_all(&bytes).await {
            let reason = CloseReason::Io(error.to_string());
            let _ = events.send(IoEvent::Closed { link, reason }).await;
            return;
        }
    }
}
