//! A raw client for the driver's tests: one request, then the one frame that answers it,
//! over any byte stream (plain TCP or TLS), with no router in between, so that a test sees
//! exactly what a node writes.

#![allow(clippy::unwrap_used)]

use std::io;

use bytes::{Bytes, BytesMut};
use iggy_route_core::wire::{
    Frame, LoginRegisterRequest, Name, Operation, PROTOCOL_VERSION, Password, RequestHeader,
    SDK_NAME, SDK_VERSION, code, decode_one,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Sends one request and reads the one frame that answers it.
pub(super) async fn exchange<S>(
    stream: &mut S,
    header: RequestHeader,
    body: &[u8],
) -> io::Result<Frame>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut out = BytesMut::new();
    header.encode(&mut out);
    out.extend_from_slice(body);
    stream.write_all(&out).await?;
    // A TLS stream holds what it was given until flushed; plain TCP has nothing to flush.
    stream.flush().await?;
    let mut frame = vec![0u8; 256];
    stream.read_exact(&mut frame).await?;
    let size = u32::from_le_bytes(frame[48..52].try_into().unwrap()) as usize;
    frame.resize(size, 0);
    stream.read_exact(&mut frame[256..]).await?;
    Ok(decode_one(&frame).unwrap())
}

/// Pings; an error means the connection is gone.
pub(super) async fn ping<S>(stream: &mut S) -> io::Result<Frame>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let header = RequestHeader::new(Operation::NonReplicated, code::PING, 1, 0, 1, 0);
    exchange(stream, header, &[]).await
}

/// Signs in as the root user with transport id `client`.
pub(super) async fn login<S>(stream: &mut S, client: u128) -> Frame
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let request = LoginRegisterRequest {
        protocol_version: PROTOCOL_VERSION,
        sdk_name: Name::new(SDK_NAME).unwrap(),
        sdk_version: Name::new(SDK_VERSION).unwrap(),
        username: Name::new("iggy").unwrap(),
        password: Password::new("iggy").unwrap(),
        context: Bytes::new(),
    };
    let mut body = BytesMut::new();
    request.encode(&mut body);
    let header = RequestHeader::new(Operation::Register, 0, client, 0, 0, body.len());
    exchange(stream, header, &body).await.unwrap()
}
