//! What a request names and carries, between the SDK's types and iggy-route's:
//! identifiers, consumers, polling strategies, partitioning, and messages both ways, their
//! user headers kept byte for byte.

use iggy_common::{
    Consumer as SdkConsumer, ConsumerKind as SdkConsumerKind, IdKind, Identifier as SdkIdentifier,
    IggyError, IggyMessage, IggyMessageHeader, MAX_PAYLOAD_SIZE, Partitioning as SdkPartitioning,
    PartitioningKind, PolledMessages, PollingKind, PollingStrategy as SdkPollingStrategy,
};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    Consumer, ConsumerKind, Identifier, Message, PollMessagesReply, PolledMessage, PollingStrategy,
};

/// An SDK identifier as iggy-route names a stream, topic, group or user. Bytes that do not
/// make one (a numeric value that is not 4 bytes, an empty or over-long name) are
/// `InvalidIdentifier`, as the SDK's own conversion says.
pub(super) fn route_identifier(id: &SdkIdentifier) -> Result<Identifier, IggyError> {
    match id.kind {
        IdKind::Numeric => {
            let bytes = <[u8; 4]>::try_from(id.value.as_slice())
                .map_err(|_| IggyError::InvalidIdentifier)?;
            Ok(Identifier::Numeric(u32::from_le_bytes(bytes)))
        }
        IdKind::String => {
            // As the SDK reads a named identifier before it encodes it: lossy UTF-8.
            let name = String::from_utf8_lossy(&id.value);
            Identifier::try_from(name.as_ref()).map_err(|_| IggyError::InvalidIdentifier)
        }
    }
}

/// An iggy-route identifier as the SDK's.
pub(crate) fn sdk_identifier(id: &Identifier) -> SdkIdentifier {
    let converted = match id {
        Identifier::Numeric(id) => SdkIdentifier::numeric(*id),
        Identifier::Named(name) => SdkIdentifier::named(name.as_str()),
    };
    // Cannot fail: a name iggy-route holds is 1..=255 bytes, as the SDK requires.
    converted.unwrap_or_default()
}

pub(super) fn route_consumer(consumer: &SdkConsumer) -> Result<Consumer, IggyError> {
    let kind = match consumer.kind {
        SdkConsumerKind::Consumer => ConsumerKind::Consumer,
        SdkConsumerKind::ConsumerGroup => ConsumerKind::ConsumerGroup,
    };
    Ok(Consumer {
        kind,
        id: route_identifier(&consumer.id)?,
    })
}

/// The strategy's kind and value. `First`, `Last` and `Next` go with the value 0, which the
/// server ignores for them.
pub(super) fn route_strategy(strategy: &SdkPollingStrategy) -> PollingStrategy {
    match strategy.kind {
        PollingKind::Offset => PollingStrategy::Offset(strategy.value),
        PollingKind::Timestamp => PollingStrategy::Timestamp(strategy.value),
        PollingKind::First => PollingStrategy::First,
        PollingKind::Last => PollingStrategy::Last,
        PollingKind::Next => PollingStrategy::Next,
    }
}

/// The SDK's partitioning, resolved by iggy-route's router by the SDK's rules (round robin
/// per topic, or the key's xxHash32 modulo the partition count). A partition id that is not
/// 4 bytes, or a key that is not 1..=255 bytes, is `InvalidCommand`, as with the SDK.
pub(super) fn route_partitioning(
    partitioning: &SdkPartitioning,
) -> Result<Partitioning, IggyError> {
    match partitioning.kind {
        PartitioningKind::Balanced => Ok(Partitioning::Balanced),
        PartitioningKind::PartitionId => {
            let id = partitioning
                .value
                .get(..4)
                .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok())
                .ok_or(IggyError::InvalidCommand)?;
            Ok(Partitioning::PartitionId(u32::from_le_bytes(id)))
        }
        // The SDK hashes the key's bytes as they are, whatever their length (its length
        // byte is not read): an empty key, or one longer than its own constructor allows,
        // goes to the partition its hash picks, so the same here.
        PartitioningKind::MessagesKey => Ok(Partitioning::MessagesKey(bytes::Bytes::from(
            partitioning.value.clone(),
        ))),
    }
}

/// The messages of a send, as iggy-route sends them: id, origin timestamp, payload and the
/// raw user-header block, untouched. A message with id 0 gets a fresh UUID here and keeps
/// it in the caller's slice, as the SDK mints it; the origin timestamp goes out as given.
pub(super) fn route_messages(messages: &mut [IggyMessage]) -> Result<Vec<Message>, IggyError> {
    messages
        .iter_mut()
        .map(|message| {
            if message.header.id == 0 {
                message.header.id = iggy_common::random_id::get_uuid();
            }
            // The SDK's own payload limit, with its own error, before iggy-route's checks
            // (which would only say the request is invalid). A header block of any size
            // goes out, as the SDK's `send_messages` sends it.
            if message.payload.len() > MAX_PAYLOAD_SIZE as usize {
                return Err(IggyError::TooBigMessagePayload);
            }
            let user_headers = message.user_headers.clone().unwrap_or_default();
            Ok(Message {
                id: message.header.id,
                origin_timestamp: message.header.origin_timestamp,
                payload: message.payload.clone(),
                user_headers,
            })
        })
        .collect()
}

/// A poll's reply as the SDK's: every message with its offset, id, timestamps, payload and
/// raw user-header block (`None` when empty, as the SDK reads it). iggy-route checks a
/// polled batch's layout but does not keep each frame's checksum, so `header.checksum` is 0.
pub(super) fn sdk_polled(reply: PollMessagesReply) -> PolledMessages {
    let messages: Vec<IggyMessage> = reply.messages.into_iter().map(sdk_message).collect();
    PolledMessages {
        partition_id: reply.partition_id,
        current_offset: reply.current_offset,
        count: len_u32(messages.len()),
        messages,
    }
}

fn sdk_message(message: PolledMessage) -> IggyMessage {
    let header = IggyMessageHeader {
        checksum: 0,
        id: message.id,
        offset: message.offset,
        timestamp: message.timestamp,
        origin_timestamp: message.origin_timestamp,
        user_headers_length: len_u32(message.user_headers.len()),
        payload_length: len_u32(message.payload.len()),
        reserved: 0,
    };
    let user_headers = (!message.user_headers.is_empty()).then_some(message.user_headers);
    IggyMessage {
        header,
        payload: message.payload,
        user_headers,
    }
}

/// A length as a wire count (a decoded frame's lengths fit in u32: they were u32 on the wire).
pub(super) fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::str::FromStr;

    use bytes::Bytes;
    use iggy_common::{HeaderKey, HeaderValue};

    use super::*;

    #[test]
    fn identifiers_convert_both_ways_and_bad_bytes_are_typed() {
        for id in [
            Identifier::Numeric(0),
            Identifier::try_from("orders").unwrap(),
        ] {
            assert_eq!(route_identifier(&sdk_identifier(&id)).unwrap(), id);
        }
        let short = SdkIdentifier {
            kind: IdKind::Numeric,
            length: 4,
            value: vec![1, 2],
        };
        assert!(matches!(
            route_identifier(&short),
            Err(IggyError::InvalidIdentifier)
        ));
        let empty = SdkIdentifier {
            kind: IdKind::String,
            length: 0,
            value: Vec::new(),
        };
        assert!(route_identifier(&empty).is_err());
    }

    #[test]
    fn partitioning_keeps_its_kind_and_refuses_what_the_sdk_refuses() {
        let id = route_partitioning(&SdkPartitioning::partition_id(7)).unwrap();
        assert_eq!(id, Partitioning::PartitionId(7));
        let key = SdkPartitioning::messages_key(b"customer-7").unwrap();
        assert_eq!(
            route_partitioning(&key).unwrap(),
            Partitioning::messages_key(&b"customer-7"[..]).unwrap()
        );
        let broken = SdkPartitioning {
            value: vec![1],
            ..SdkPartitioning::partition_id(1)
        };
        assert!(matches!(
            route_partitioning(&broken),
            Err(IggyError::InvalidCommand)
        ));
    }

    #[test]
    fn a_message_goes_out_and_comes_back_with_its_user_headers_byte_for_byte() {
        let headers = BTreeMap::from([(
            HeaderKey::from_str("trace").unwrap(),
            HeaderValue::from_str("abc").unwrap(),
        )]);
        let mut sent = [IggyMessage::builder()
            .payload(Bytes::from_static(b"hello"))
            .user_headers(headers)
            .build()
            .unwrap()];
        let block = sent[0].user_headers.clone().unwrap();
        let routed = route_messages(&mut sent).unwrap();
        assert_ne!(sent[0].header.id, 0, "minted and written back");
        assert_eq!(routed[0].id, sent[0].header.id);
        assert_eq!(routed[0].user_headers, block);
        let polled = PolledMessage {
            offset: 9,
            id: routed[0].id,
            timestamp: 5,
            origin_timestamp: routed[0].origin_timestamp,
            payload: routed[0].payload.clone(),
            user_headers: routed[0].user_headers.clone(),
        };
        let reply = PollMessagesReply {
            partition_id: 2,
            current_offset: 9,
            messages: vec![polled],
        };
        let back = sdk_polled(reply);
        assert_eq!((back.partition_id, back.count), (2, 1));
        let message = &back.messages[0];
        assert_eq!(message.user_headers.as_deref(), Some(&block[..]));
        assert_eq!(message.header.user_headers_length, len_u32(block.len()));
        assert_eq!(message.header.offset, 9);
        assert_eq!(
            message.user_headers_map().unwrap(),
            sent[0].user_headers_map().unwrap()
        );
    }
}
