//! `MessageClient` and `ConsumerOffsetClient`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use iggy_common::{
    Consumer, ConsumerKind, ConsumerOffsetClient, ConsumerOffsetInfo, Identifier, IggyError,
    IggyMessage, MessageClient, Partitioning, PartitioningKind, PolledMessages, PollingStrategy,
    SendMessagesConfirmationResponse, SendMessagesResponse,
};
use iggy_route_core::client::Call;
use iggy_route_core::wire;
use iggy_route_core::{PollRequest, SendReceipt};

use super::IntoIggyError;
use super::convert_admin::sdk_consumer_offset;
use super::convert_messages::{
    route_consumer, route_identifier, route_messages, route_partitioning, route_strategy,
    sdk_polled,
};
use super::encryption::{open_polled, seal_messages};
use super::session::Needs;
use crate::Client;

/// The numeric ids of the streams and topics this client sent to by name: a send's receipt
/// names its partition and offset, and the SDK's confirmation also names the stream and
/// topic by number. Read once per stream and topic (`GET_STREAM` after the first send) and
/// forgotten whenever this client renames or deletes a stream or topic.
#[derive(Debug, Default)]
pub(super) struct TopicIds {
    known: Mutex<HashMap<TopicKey, Known>>,
}

/// A stream and topic, as a send named them.
type TopicKey = (wire::Identifier, wire::Identifier);

#[derive(Debug, Clone, Copy)]
enum Known {
    Ids(u32, u32),
    /// The user may send but not read the stream: asking again on every send would only
    /// cost a refused read each time.
    Unreadable,
}

impl TopicIds {
    fn lock(&self) -> MutexGuard<'_, HashMap<TopicKey, Known>> {
        // A panic elsewhere must not stop the sends: the map is valid whatever it held.
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn clear(&self) {
        self.lock().clear();
    }
}

impl Client {
    /// The numeric stream and topic ids a confirmation names: as given, or read from the
    /// stream (once). `None` when they cannot be read (the stream or topic is gone, the
    /// read failed or is not allowed): the confirmation is then left out, never made up.
    async fn numeric_ids(
        &self,
        stream: &wire::Identifier,
        topic: &wire::Identifier,
    ) -> Option<(u32, u32)> {
        if let (wire::Identifier::Numeric(stream), wire::Identifier::Numeric(topic)) =
            (stream, topic)
        {
            return Some((*stream, *topic));
        }
        let ids = &self.sdk_state().topic_ids;
        let key = (stream.clone(), topic.clone());
        let known = ids.lock().get(&key).copied();
        match known {
            Some(Known::Ids(stream_id, topic_id)) => return Some((stream_id, topic_id)),
            Some(Known::Unreadable) => return None,
            None => {}
        }
        let details = match Client::get_stream(self, stream.clone()).await {
            Ok(details) => details?,
            Err(error) => {
                if matches!(error.into_iggy_error(), IggyError::Unauthorized) {
                    ids.lock().insert(key, Known::Unreadable);
                }
                return None;
            }
        };
        let topic_id = details
            .topics
            .iter()
            .find(|summary| match topic {
                wire::Identifier::Numeric(id) => summary.id == *id,
                wire::Identifier::Named(name) => summary.name == *name,
            })?
            .id;
        ids.lock().insert(key, Known::Ids(details.id, topic_id));
        Some((details.id, topic_id))
    }

    /// The SDK's answer to a send: the batch's confirmation, or none when the server
    /// reported no offset (a batch it recognised as a duplicate) or the ids cannot be read.
    async fn send_response(
        &self,
        stream: &wire::Identifier,
        topic: &wire::Identifier,
        receipt: SendReceipt,
    ) -> SendMessagesResponse {
        let confirmation = match receipt.base_offset {
            Some(base_offset) => {
                self.numeric_ids(stream, topic)
                    .await
                    .map(|(stream_id, topic_id)| SendMessagesConfirmationResponse {
                        stream_id,
                        topic_id,
                        partition_id: receipt.partition_id,
                        base_offset,
                    })
            }
            None => None,
        };
        SendMessagesResponse {
            confirmations: confirmation.into_iter().collect(),
        }
    }
}

#[async_trait]
impl MessageClient for Client {
    async fn poll_messages(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: Option<u32>,
        consumer: &Consumer,
        strategy: &PollingStrategy,
        count: u32,
        auto_commit: bool,
    ) -> Result<PolledMessages, IggyError> {
        let strategy = *strategy;
        self.poll_messages_with_strategy_for(
            stream_id,
            topic_id,
            partition_id,
            consumer,
            &move |_| strategy,
            count,
            auto_commit,
        )
        .await
    }

    /// The native `poll_request` (`auto_commit` included: such a poll goes to the
    /// partition's primary). A group poll without a partition polls the member's own
    /// partitions in turn, as the SDK does (see `groups`).
    async fn poll_messages_with_strategy_for(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: Option<u32>,
        consumer: &Consumer,
        strategy_for: &(dyn Fn(u32) -> PollingStrategy + Send + Sync),
        count: u32,
        auto_commit: bool,
    ) -> Result<PolledMessages, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic, routed_consumer) = self.as_joined(
            route_identifier(stream_id)?,
            route_identifier(topic_id)?,
            route_consumer(consumer)?,
        );
        let mut polled = if consumer.kind == ConsumerKind::ConsumerGroup && partition_id.is_none() {
            let key = (stream, topic, routed_consumer.id.clone());
            self.poll_group(key, routed_consumer, strategy_for, count, auto_commit)
                .await?
        } else {
            let request = PollRequest {
                consumer: routed_consumer,
                stream,
                topic,
                partition_id,
                strategy: route_strategy(&strategy_for(partition_id.unwrap_or(0))),
                count,
                auto_commit,
            };
            let polled = Client::poll_request(self, request)
                .await
                .map_err(IntoIggyError::into_iggy_error)?;
            sdk_polled(polled)
        };
        if let Some(encryptor) = self.encryptor() {
            open_polled(encryptor, &mut polled)?;
        }
        Ok(polled)
    }

    /// The native `send`, on the partition's primary. Messages without an id get one,
    /// written back into `messages` as the SDK does; with an encryptor, so are the sealed
    /// payloads and headers.
    async fn send_messages(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partitioning: &Partitioning,
        messages: &mut [IggyMessage],
    ) -> Result<SendMessagesResponse, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let stream = route_identifier(stream_id)?;
        let topic = route_identifier(topic_id)?;
        let to_named_partition = partitioning.kind == PartitioningKind::PartitionId;
        let partitioning = route_partitioning(partitioning)?;
        if let Some(encryptor) = self.encryptor() {
            if messages.is_empty() {
                return Err(IggyError::InvalidMessagesCount);
            }
            seal_messages(encryptor, messages)?;
        }
        let routed = route_messages(messages)?;
        // As given: an origin timestamp of 0 is stored as 0, as the SDK stores it.
        let call =
            Call::send(stream.clone(), topic.clone(), partitioning, routed).map_err(|error| {
                super::errors::send_error(error, (&stream, &topic), to_named_partition)
            })?;
        let receipt = self.run_as_given(call).await.map_err(|error| {
            super::errors::send_error(error, (&stream, &topic), to_named_partition)
        })?;
        Ok(self.send_response(&stream, &topic, receipt).await)
    }

    async fn flush_unsaved_buffer(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: u32,
        fsync: bool,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        Client::flush_unsaved_buffer(self, stream, topic, partition_id, fsync)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}

#[async_trait]
impl ConsumerOffsetClient for Client {
    /// The native `store_offset`, on the partition's primary. Without a partition it is
    /// refused as the 0.11.0 server refuses it (`ResourceNotFound`), nothing sent: an
    /// offset is stored on one partition's primary, which a missing id cannot name.
    async fn store_consumer_offset(
        &self,
        consumer: &Consumer,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: Option<u32>,
        offset: u64,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic, consumer) = self.as_joined(
            route_identifier(stream_id)?,
            route_identifier(topic_id)?,
            route_consumer(consumer)?,
        );
        let Some(partition_id) = partition_id else {
            return Err(IggyError::ResourceNotFound(
                "a consumer offset without a partition id".to_owned(),
            ));
        };
        Client::store_offset(self, consumer, stream, topic, partition_id, offset)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    async fn get_consumer_offset(
        &self,
        consumer: &Consumer,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: Option<u32>,
    ) -> Result<Option<ConsumerOffsetInfo>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic, consumer) = self.as_joined(
            route_identifier(stream_id)?,
            route_identifier(topic_id)?,
            route_consumer(consumer)?,
        );
        let offset = Client::get_consumer_offset(self, consumer, stream, topic, partition_id)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(offset.map(sdk_consumer_offset))
    }

    async fn delete_consumer_offset(
        &self,
        consumer: &Consumer,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: Option<u32>,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic, consumer) = self.as_joined(
            route_identifier(stream_id)?,
            route_identifier(topic_id)?,
            route_consumer(consumer)?,
        );
        Client::delete_consumer_offset(self, consumer, stream, topic, partition_id)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}
