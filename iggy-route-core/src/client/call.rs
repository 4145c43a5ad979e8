//! Each client operation as a [`Call`]: the [`Request`] to submit, paired with the one reply
//! kind that answers it. Pairing them here keeps both adapters from reading a reply as the
//! wrong operation's, and leaves each adapter method a single line, which
//! [`for_each_operation!`](crate::for_each_operation) writes for both.

use std::fmt;

use bytes::Bytes;

use super::{ClientError, identifier, stamp_origin_timestamps};
use crate::partitioning::Partitioning;
use crate::wire::{
    Consumer, Identifier, Message, Name, PollMessagesReply, PollingStrategy, StreamDetails,
    TopicDetails, WireError,
};
use crate::{
    AdminRequest, CommandRequest, Plane, PollRequest, Reply, ReplyPayload, Request, RequestError,
    SendReceipt, SendRequest, StoreOffsetRequest,
};

/// A request and how to read its reply as `T`. An adapter submits `request` over its
/// transport and hands what comes back to `reply`.
#[derive(Debug)]
#[must_use = "a call does nothing until its request is submitted"]
pub struct Call<T> {
    /// What to submit to the router.
    pub request: Request,
    /// How to read the reply the router completes it with.
    pub reply: ExpectedReply<T>,
}

/// The reply kind an operation expects, and the value it carries.
#[must_use]
pub struct ExpectedReply<T> {
    operation: &'static str,
    extract: Extract<T>,
}

/// How a reply becomes the operation's value.
enum Extract<T> {
    /// From a typed reply the router decoded (sends, polls, the creates routing learns from).
    Typed(fn(Reply) -> Option<T>),
    /// From the payload of a [`Request::Command`], decoded here.
    Payload(fn(&[u8]) -> Result<T, WireError>),
}

impl<T> ExpectedReply<T> {
    /// The value of `reply`: `UnexpectedReply` when it is of another kind, `Malformed`
    /// when a command's payload does not decode as its reply.
    pub fn extract(self, reply: Reply) -> Result<T, ClientError> {
        let unexpected = ClientError::UnexpectedReply {
            operation: self.operation,
        };
        match (self.extract, reply) {
            (Extract::Typed(extract), reply) => extract(reply).ok_or(unexpected),
            (Extract::Payload(decode), Reply::Payload(ReplyPayload(payload))) => decode(&payload)
                .map_err(|error| ClientError::Request(RequestError::Malformed(error))),
            (Extract::Payload(_), _) => Err(unexpected),
        }
    }

    /// The operation's name, as errors show it.
    pub fn operation(&self) -> &'static str {
        self.operation
    }
}

// By hand: a derive would ask `T: Debug`, and the function pointer says nothing useful.
impl<T> fmt::Debug for ExpectedReply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpectedReply")
            .field("operation", &self.operation)
            .finish_non_exhaustive()
    }
}

impl<T> Call<T> {
    fn new(request: Request, operation: &'static str, extract: fn(Reply) -> Option<T>) -> Self {
        Self {
            request,
            reply: ExpectedReply {
                operation,
                extract: Extract::Typed(extract),
            },
        }
    }

    /// A command the router carries as it is: `body` is sent under `code` to the node
    /// `plane` names, and the reply's payload is read with `decode`. Every operation beyond
    /// sends, polls, offset stores and the creates routing learns from is built this way.
    pub fn command(
        operation: &'static str,
        code: u32,
        body: Bytes,
        plane: Plane,
        decode: fn(&[u8]) -> Result<T, WireError>,
    ) -> Self {
        Self {
            request: Request::Command(CommandRequest { code, body, plane }),
            reply: ExpectedReply {
                operation,
                extract: Extract::Payload(decode),
            },
        }
    }

    /// Gives the messages of a send that have no producer timestamp `now_micros` (µs since
    /// the Unix epoch; see [`stamp_origin_timestamps`]). Other requests carry no timestamps
    /// and are left as they are, so an adapter can stamp every call it submits.
    pub fn stamp_origin_timestamps(&mut self, now_micros: u64) {
        if let Request::Send(send) = &mut self.request {
            stamp_origin_timestamps(&mut send.messages, now_micros);
        }
    }
}

impl Call<SendReceipt> {
    /// Appends `messages` to the partition `partitioning` picks. Stamp the call before
    /// submitting it ([`Call::stamp_origin_timestamps`]): the time is the adapter's to read.
    pub fn send(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitioning: Partitioning,
        messages: Vec<Message>,
    ) -> Result<Self, ClientError> {
        let request = Request::Send(SendRequest {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partitioning,
            messages,
        });
        Ok(Self::new(request, "send", |reply| {
            if let Reply::Sent(receipt) = reply {
                Some(receipt)
            } else {
                None
            }
        }))
    }
}

impl Call<PollMessagesReply> {
    /// Reads up to `count` messages without committing the consumer offset.
    pub fn poll(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: Option<u32>,
        consumer: Consumer,
        strategy: PollingStrategy,
        count: u32,
    ) -> Result<Self, ClientError> {
        Ok(Self::poll_request(PollRequest {
            consumer,
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
            strategy,
            count,
            auto_commit: false,
        }))
    }

    /// A poll with every field given, including `auto_commit`.
    pub fn poll_request(request: PollRequest) -> Self {
        Self::new(Request::Poll(request), "poll", |reply| {
            if let Reply::Polled(polled) = reply {
                Some(polled)
            } else {
                None
            }
        })
    }
}

impl Call<()> {
    /// Stores `consumer`'s offset on the partition's primary.
    pub fn store_offset(
        consumer: Consumer,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partition_id: u32,
        offset: u64,
    ) -> Result<Self, ClientError> {
        let request = Request::StoreOffset(StoreOffsetRequest {
            consumer,
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partition_id,
            offset,
        });
        Ok(Self::new(request, "store offset", |reply| {
            matches!(reply, Reply::OffsetStored).then_some(())
        }))
    }

    /// Adds `partitions_count` partitions to a topic.
    pub fn create_partitions(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
        partitions_count: u32,
    ) -> Result<Self, ClientError> {
        let request = AdminRequest::CreatePartitions {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
            partitions_count,
        };
        Ok(Self::new(
            Request::Admin(request),
            "create partitions",
            |reply| matches!(reply, Reply::PartitionsCreated).then_some(()),
        ))
    }
}

impl Call<StreamDetails> {
    /// Creates a stream.
    pub fn create_stream(name: &str) -> Result<Self, ClientError> {
        let request = AdminRequest::CreateStream {
            name: Name::new(name)?,
        };
        Ok(Self::new(
            Request::Admin(request),
            "create stream",
            |reply| {
                if let Reply::Stream(Some(details)) = reply {
                    Some(details)
                } else {
                    None
                }
            },
        ))
    }
}

impl Call<TopicDetails> {
    /// Creates a topic with `partitions_count` partitions.
    pub fn create_topic(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        name: &str,
        partitions_count: u32,
    ) -> Result<Self, ClientError> {
        let request = AdminRequest::CreateTopic {
            stream: identifier(stream)?,
            name: Name::new(name)?,
            partitions_count,
        };
        Ok(Self::new(
            Request::Admin(request),
            "create topic",
            |reply| {
                if let Reply::Topic(Some(details)) = reply {
                    Some(details)
                } else {
                    None
                }
            },
        ))
    }
}

impl Call<Option<StreamDetails>> {
    /// A stream's details, or `None` when there is no such stream.
    pub fn get_stream(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = AdminRequest::GetStream {
            stream: identifier(stream)?,
        };
        Ok(Self::new(Request::Admin(request), "get stream", |reply| {
            if let Reply::Stream(details) = reply {
                Some(details)
            } else {
                None
            }
        }))
    }
}

impl Call<Option<TopicDetails>> {
    /// A topic's details, or `None` when there is no such topic.
    pub fn get_topic(
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        let request = AdminRequest::GetTopic {
            stream: identifier(stream)?,
            topic: identifier(topic)?,
        };
        Ok(Self::new(Request::Admin(request), "get topic", |reply| {
            if let Reply::Topic(details) = reply {
                Some(details)
            } else {
                None
            }
        }))
    }
}
