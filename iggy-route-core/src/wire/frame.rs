//! Splitting a byte stream into frames (§1.1).

use bytes::Bytes;

use super::eviction::EvictionHeader;
use super::header::{
    COMMAND_EVICTION, COMMAND_REPLY, COMMAND_REQUEST, ReplyHeader, RequestHeader, command_byte,
    size_field,
};
use super::{HEADER_SIZE, WireError};

/// One decoded frame. `Debug` shows bodies by length only: a login request carries the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub enum Frame {
    /// A client request (command 5).
    Request {
        /// The header.
        header: RequestHeader,
        /// The body, `header.size - 256` bytes.
        body: Bytes,
    },
    /// A server reply (command 8).
    Reply {
        /// The header.
        header: ReplyHeader,
        /// The body, `header.size - 256` bytes.
        body: Bytes,
    },
    /// A session-terminal eviction (command 13, header only).
    Eviction(EvictionHeader),
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Request { header, body } => f
                .debug_struct("Request")
                .field("header", header)
                .field("body_len", &body.len())
                .finish(),
            Self::Reply { header, body } => f
                .debug_struct("Reply")
                .field("header", header)
                .field("body_len", &body.len())
                .finish(),
            Self::Eviction(header) => f.debug_tuple("Eviction").field(header).finish(),
        }
    }
}

/// Incremental frame decoder.
///
/// Feed it whatever bytes arrive; it consumes from the input only what the current
/// frame still needs, so it never buffers more than one frame and never allocates
/// more than `max_frame_size` bytes. `Debug` shows how much is buffered, never the bytes.
pub struct FrameDecoder {
    max_frame_size: u32,
    buf: Vec<u8>,
    /// The total size of the frame being read, once its header is complete.
    size: Option<usize>,
    poisoned: Option<WireError>,
}

impl std::fmt::Debug for FrameDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameDecoder")
            .field("max_frame_size", &self.max_frame_size)
            .field("buffered", &self.buf.len())
            .field("size", &self.size)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames larger than `max_frame_size` bytes.
    pub fn new(max_frame_size: u32) -> Self {
        Self {
            max_frame_size,
            buf: Vec::new(),
            size: None,
            poisoned: None,
        }
    }

    /// Bytes held for the frame in progress.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether a size error has made the stream unusable.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// Consume bytes from the front of `input` and return the next complete frame.
    ///
    /// `Ok(None)` means all of `input` was consumed and more bytes are needed. A
    /// size outside `256..=max_frame_size` returns [`WireError::FrameTooSmall`] or
    /// [`WireError::FrameTooLarge`] and poisons the decoder, which then keeps
    /// returning that error. A complete frame whose header is bad (unknown command
    /// or operation) is consumed and returned as an error, without poisoning.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Frame>, WireError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        let size = match self.size {
            Some(size) => size,
            None => {
                self.take(input, HEADER_SIZE);
                if self.buf.len() < HEADER_SIZE {
                    return Ok(None);
                }
                let size = size_field(&self.buf).unwrap_or(0);
                let err = if (size as usize) < HEADER_SIZE {
                    Some(WireError::FrameTooSmall { size })
                } else if size > self.max_frame_size {
                    Some(WireError::FrameTooLarge {
                        size,
                        max: self.max_frame_size,
                    })
                } else {
                    None
                };
                if let Some(err) = err {
                    self.poisoned = Some(err.clone());
                    self.buf = Vec::new();
                    return Err(err);
                }
                self.size = Some(size as usize);
                size as usize
            }
        };
        self.take(input, size);
        if self.buf.len() < size {
            return Ok(None);
        }
        self.size = None;
        let bytes = Bytes::from(std::mem::take(&mut self.buf));
        frame_from(bytes).map(Some)
    }

    /// Move up to `target - buffered` bytes from `input` into the buffer, growing it
    /// geometrically but never beyond `target`.
    fn take(&mut self, input: &mut &[u8], target: usize) {
        let want = target.saturating_sub(self.buf.len()).min(input.len());
        if want == 0 {
            return;
        }
        let needed = self.buf.len() + want;
        if needed > self.buf.capacity() {
            let grown = self
                .buf
                .capacity()
                .saturating_mul(2)
                .max(needed)
                .min(target);
            self.buf.reserve_exact(grown - self.buf.len());
        }
        let (head, tail) = input.split_at(want);
        self.buf.extend_from_slice(head);
        *input = tail;
    }
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(super::DEFAULT_MAX_FRAME_SIZE)
    }
}

/// Type a complete frame (header plus exactly `size - 256` body bytes).
fn frame_from(bytes: Bytes) -> Result<Frame, WireError> {
    let body = bytes.slice(HEADER_SIZE.min(bytes.len())..);
    match command_byte(&bytes) {
        Some(COMMAND_REQUEST) => Ok(Frame::Request {
            header: RequestHeader::decode(&bytes)?,
            body,
        }),
        Some(COMMAND_REPLY) => Ok(Frame::Reply {
            header: ReplyHeader::decode(&bytes)?,
            body,
        }),
        Some(COMMAND_EVICTION) => {
            if !body.is_empty() {
                return Err(WireError::InvalidLength {
                    field: "eviction body",
                    len: body.len(),
                });
            }
            Ok(Frame::Eviction(EvictionHeader::decode(&bytes)?))
        }
        Some(byte) => Err(WireError::UnknownCommand { byte }),
        None => Err(WireError::Truncated {
            offset: 0,
            need: HEADER_SIZE,
            have: bytes.len(),
        }),
    }
}

/// Decode `bytes` as exactly one whole frame.
#[cfg(feature = "server")]
pub fn decode_one(bytes: &[u8]) -> Result<Frame, WireError> {
    let size = size_field(bytes)
        .filter(|_| bytes.len() >= HEADER_SIZE)
        .ok_or(WireError::Truncated {
            offset: 0,
            need: HEADER_SIZE,
            have: bytes.len(),
        })?;
    if (size as usize) < HEADER_SIZE {
        return Err(WireError::FrameTooSmall { size });
    }
    match bytes.len().cmp(&(size as usize)) {
        std::cmp::Ordering::Less => Err(WireError::Truncated {
            offset: 0,
            need: size as usize,
            have: bytes.len(),
        }),
        std::cmp::Ordering::Greater => Err(WireError::TrailingBytes {
            field: "frame",
            count: bytes.len() - size as usize,
        }),
        std::cmp::Ordering::Equal => frame_from(Bytes::copy_from_slice(bytes)),
    }
}

#[cfg(feature = "server")]
impl Frame {
    /// Append the frame's bytes (header with `size` as stored, then the body).
    pub fn encode(&self, out: &mut bytes::BytesMut) {
        match self {
            Frame::Request { header, body } => {
                header.encode(out);
                out.extend_from_slice(body);
            }
            Frame::Reply { header, body } => {
                header.encode(out);
                out.extend_from_slice(body);
            }
            Frame::Eviction(header) => header.encode(out),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::{Operation, encode_request};
    use bytes::BytesMut;

    fn ping(request: u64, body: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        let header = RequestHeader::new(Operation::NonReplicated, 1, 5, 1, request, 0);
        encode_request(&header, body, &mut out);
        out
    }

    #[test]
    fn byte_at_a_time_yields_the_same_frames() {
        let mut stream = ping(1, b"abc");
        stream.extend_from_slice(&ping(2, b""));
        let mut decoder = FrameDecoder::new(1024);
        let mut frames = Vec::new();
        for byte in stream.iter() {
            let mut input: &[u8] = std::slice::from_ref(byte);
            while let Some(frame) = decoder.decode(&mut input).unwrap() {
                frames.push(frame);
            }
            assert!(input.is_empty());
        }
        assert_eq!(frames.len(), 2);
        assert!(
            matches!(&frames[0], Frame::Request { body, header } if &body[..] == b"abc" && header.request == 1)
        );
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn decoder_consumes_only_one_frame_at_a_time() {
        let mut stream = ping(1, b"xy");
        stream.extend_from_slice(&ping(2, b"z"));
        let mut input: &[u8] = &stream;
        let mut decoder = FrameDecoder::new(1024);
        assert!(decoder.decode(&mut input).unwrap().is_some());
        assert_eq!(input.len(), 257);
        assert!(decoder.decode(&mut input).unwrap().is_some());
        assert!(decoder.decode(&mut input).unwrap().is_none());
    }

    #[test]
    fn size_below_header_poisons_with_frame_too_small() {
        let mut frame = ping(1, b"");
        frame[48..52].copy_from_slice(&255u32.to_le_bytes());
        let mut decoder = FrameDecoder::new(1024);
        let mut input: &[u8] = &frame;
        assert_eq!(
            decoder.decode(&mut input),
            Err(WireError::FrameTooSmall { size: 255 })
        );
        let mut more: &[u8] = &ping(2, b"");
        assert_eq!(
            decoder.decode(&mut more),
            Err(WireError::FrameTooSmall { size: 255 })
        );
        assert!(decoder.is_poisoned());
    }

    #[test]
    fn size_above_max_poisons_with_frame_too_large() {
        let frame = ping(1, &[0u8; 100]);
        let mut decoder = FrameDecoder::new(300);
        let mut input: &[u8] = &frame;
        assert_eq!(
            decoder.decode(&mut input),
            Err(WireError::FrameTooLarge {
                size: 356,
                max: 300
            })
        );
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn bad_command_is_consumed_without_poisoning() {
        let mut stream = ping(1, b"q");
        stream[60] = 6;
        stream.extend_from_slice(&ping(2, b""));
        let mut decoder = FrameDecoder::new(1024);
        let mut input: &[u8] = &stream;
        assert_eq!(
            decoder.decode(&mut input),
            Err(WireError::UnknownCommand { byte: 6 })
        );
        assert!(matches!(
            decoder.decode(&mut input),
            Ok(Some(Frame::Request { .. }))
        ));
    }

    #[test]
    fn decode_one_requires_exactly_one_frame() {
        let frame = ping(1, b"abc");
        assert!(decode_one(&frame).is_ok());
        assert!(matches!(
            decode_one(&frame[..258]),
            Err(WireError::Truncated { .. })
        ));
        let mut long = frame.clone();
        long.extend_from_slice(b"!");
        assert_eq!(
            decode_one(&long),
            Err(WireError::TrailingBytes {
                field: "frame",
                count: 1
            })
        );
    }
}
