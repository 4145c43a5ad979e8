//! What the routing layer knows of a request and of its answer: typed facts, never the
//! payload. The link layer keeps the request (and the reply it decodes) and hands these
//! over, so a decision can be made, tested and model-checked without a byte of the batch.

use crate::ids::TopicKey;
use crate::partitioning::{Partitioning, hash_key};
use crate::request::{AdminRequest, Plane, Reply, Request};
use crate::wire::{Identifier, Message, Name};

/// Everything routing needs of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFacts {
    /// What kind of request it is.
    pub kind: RequestKind,
    /// The topic it belongs to (sends, polls, offset writes), if any.
    pub topic: Option<TopicKey>,
    /// How its partition is chosen once the topic's partition count is known.
    pub choice: PartitionChoice,
    /// A send's size, by which sends queued for one partition are merged into one frame
    /// (`None` for every other request).
    pub batch: Option<BatchSize>,
}

/// How much a send adds to a frame it is merged into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    /// Its messages.
    pub messages: u32,
    /// Its messages' encoded bytes (headers, payloads, user headers).
    pub bytes: usize,
}

/// The kinds of request, as far as routing tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKind {
    /// A batch for one partition: admitted only by the partition's primary.
    Send,
    /// A consumer offset write: on the partition's primary.
    StoreOffset,
    /// A poll; an auto-commit poll writes an offset, so only the primary may serve it.
    Poll {
        /// Whether it commits the consumer offset.
        auto_commit: bool,
    },
    /// A metadata read (`GET_STREAM`, `GET_TOPIC`): the metadata leader serves it, or the
    /// coordinator while the leader cannot be reached.
    MetadataRead,
    /// A metadata write, on the metadata leader; what it teaches us once it succeeds.
    MetadataWrite(OwnWrite),
    /// A read about the session itself (`PING`, `GET_ME`): the coordinator holds it.
    SessionRead,
    /// A command on one partition's plane other than sends, polls and offset stores
    /// (offset reads and deletes, flushes, segment deletes): on the partition's primary.
    PartitionCommand {
        /// Whether it changes state on the server.
        write: bool,
    },
}

/// One of our own metadata writes, as far as its success teaches routing something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnWrite {
    /// `CREATE_STREAM`.
    CreateStream,
    /// `CREATE_TOPIC` in this stream (as the caller named it).
    CreateTopic {
        /// The stream.
        stream: Identifier,
    },
    /// `CREATE_PARTITIONS`: `count` partitions added to `topic`.
    CreatePartitions {
        /// The topic.
        topic: TopicKey,
        /// How many were added.
        count: u32,
    },
    /// Any other metadata write (updates, deletes, purges, users, tokens): it teaches
    /// routing nothing beyond the watermark its reply moves.
    Other,
}

/// How a request's partition is chosen (0.11.0 SDK rules, protocol §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionChoice {
    /// The caller named it.
    Explicit(u32),
    /// Round-robin over the topic's partitions, per topic.
    Balanced,
    /// The key's xxHash32, modulo the partition count.
    Keyed {
        /// The key's hash.
        hash: u32,
    },
    /// None: the request is not bound to a partition.
    None,
}

impl PartitionChoice {
    /// The partition chosen when the topic has `count` partitions and its round-robin
    /// cursor stands at `cursor`; `None` where nothing can be chosen (no partitions).
    pub fn resolve(self, count: u32, cursor: u32) -> Option<u32> {
        match self {
            Self::Explicit(partition) => Some(partition),
            Self::Balanced => cursor.checked_rem(count),
            Self::Keyed { hash } => hash.checked_rem(count),
            Self::None => None,
        }
    }
}

impl RequestKind {
    /// Whether a request of this kind changes state on the server, so that an attempt
    /// whose outcome is unknown cannot simply be written again.
    pub fn is_write(&self) -> bool {
        match self {
            Self::Send | Self::StoreOffset | Self::MetadataWrite(_) => true,
            Self::Poll { auto_commit } => *auto_commit,
            Self::PartitionCommand { write } => *write,
            Self::MetadataRead | Self::SessionRead => false,
        }
    }
}

impl Request {
    /// The facts routing decides this request by.
    pub fn facts(&self) -> RequestFacts {
        let topic = |stream: &Identifier, topic: &Identifier| {
            Some(TopicKey {
                stream: stream.clone(),
                topic: topic.clone(),
            })
        };
        match self {
            Request::Send(send) => RequestFacts {
                kind: RequestKind::Send,
                topic: topic(&send.stream, &send.topic),
                choice: match &send.partitioning {
                    Partitioning::PartitionId(partition) => PartitionChoice::Explicit(*partition),
                    Partitioning::Balanced => PartitionChoice::Balanced,
                    Partitioning::MessagesKey(key) => PartitionChoice::Keyed {
                        hash: hash_key(key),
                    },
                },
                batch: Some(BatchSize {
                    messages: u32::try_from(send.messages.len()).unwrap_or(u32::MAX),
                    bytes: send.messages.iter().map(Message::frame_len).sum(),
                }),
            },
            Request::StoreOffset(store) => RequestFacts {
                kind: RequestKind::StoreOffset,
                topic: topic(&store.stream, &store.topic),
                choice: PartitionChoice::Explicit(store.partition_id),
                batch: None,
            },
            Request::Poll(poll) => RequestFacts {
                kind: RequestKind::Poll {
                    auto_commit: poll.auto_commit,
                },
                topic: topic(&poll.stream, &poll.topic),
                choice: poll
                    .partition_id
                    .map_or(PartitionChoice::None, PartitionChoice::Explicit),
                batch: None,
            },
            Request::Admin(admin) => RequestFacts {
                kind: admin_kind(admin),
                topic: None,
                choice: PartitionChoice::None,
                batch: None,
            },
            Request::Command(command) => command_facts(&command.plane),
        }
    }
}

fn admin_kind(admin: &AdminRequest) -> RequestKind {
    match admin {
        AdminRequest::CreateStream { .. } => RequestKind::MetadataWrite(OwnWrite::CreateStream),
        AdminRequest::CreateTopic { stream, .. } => {
            RequestKind::MetadataWrite(OwnWrite::CreateTopic {
                stream: stream.clone(),
            })
        }
        AdminRequest::CreatePartitions {
            stream,
            topic,
            partitions_count,
        } => RequestKind::MetadataWrite(OwnWrite::CreatePartitions {
            topic: TopicKey {
                stream: stream.clone(),
                topic: topic.clone(),
            },
            count: *partitions_count,
        }),
        AdminRequest::GetStream { .. } | AdminRequest::GetTopic { .. } => RequestKind::MetadataRead,
    }
}

fn command_facts(plane: &Plane) -> RequestFacts {
    let (kind, topic, choice) = match plane {
        Plane::MetadataRead => (RequestKind::MetadataRead, None, PartitionChoice::None),
        Plane::MetadataWrite => (
            RequestKind::MetadataWrite(OwnWrite::Other),
            None,
            PartitionChoice::None,
        ),
        Plane::Session => (RequestKind::SessionRead, None, PartitionChoice::None),
        Plane::Partition {
            stream,
            topic,
            partition,
            write,
        } => (
            RequestKind::PartitionCommand { write: *write },
            Some(TopicKey {
                stream: stream.clone(),
                topic: topic.clone(),
            }),
            PartitionChoice::Explicit(*partition),
        ),
    };
    RequestFacts {
        kind,
        topic,
        choice,
        batch: None,
    }
}

impl From<&Request> for RequestFacts {
    fn from(request: &Request) -> Self {
        request.facts()
    }
}

impl From<Request> for RequestFacts {
    fn from(request: Request) -> Self {
        request.facts()
    }
}

/// What a served attempt's answer says, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// An answer routing learns nothing from beyond "admitted".
    Plain,
    /// A stream or topic read (or create) answered "no such thing".
    Absent,
    /// A consumer group's sync, sent as a member we are, answered as to a stranger (no
    /// assignment): from a node that has not applied our join yet, shortly after it, or
    /// because the membership has ended.
    Stranger,
    /// A topic's details: its id, name and partition count (after our own `CREATE_TOPIC`,
    /// the topic is known at once under both its names).
    Topic {
        /// Its numeric id.
        id: u32,
        /// Its name.
        name: Name,
        /// Its partition count.
        partitions_count: u32,
    },
}

impl Reply {
    /// What routing learns from this reply.
    pub fn served(&self) -> Served {
        match self {
            Reply::Stream(None) | Reply::Topic(None) => Served::Absent,
            Reply::Topic(Some(details)) => Served::Topic {
                id: details.summary.id,
                name: details.summary.name.clone(),
                partitions_count: details.summary.partitions_count,
            },
            Reply::Sent(_)
            | Reply::Polled(_)
            | Reply::OffsetStored
            | Reply::Stream(Some(_))
            | Reply::PartitionsCreated
            | Reply::Payload(_) => Served::Plain,
        }
    }
}

impl From<&Reply> for Served {
    fn from(reply: &Reply) -> Self {
        reply.served()
    }
}

impl From<Reply> for Served {
    fn from(reply: Reply) -> Self {
        reply.served()
    }
}
