//! `StreamClient`, `TopicClient`, `PartitionClient` and `SegmentClient`.

use async_trait::async_trait;
use iggy_common::{
    CompressionAlgorithm as SdkCompression, DEFAULT_PARTITIONS_COUNT, Identifier, IggyError,
    PartitionClient, SegmentClient, Stream, StreamClient, StreamDetails, StreamUpdateOptions,
    Topic, TopicClient, TopicCreateOptions, TopicDetails, TopicUpdateOptions,
};
use iggy_route_core::wire::{self, CompressionAlgorithm, Name};

use super::IntoIggyError;
use super::bodies;
use super::convert_admin::{sdk_stream_details, sdk_streams, sdk_topic_details, sdk_topics};
use super::convert_messages::route_identifier;
use super::session::Needs;
use crate::Client;

/// A name as the wire carries it: 1..=255 bytes, else `InvalidFormat`, as with the SDK.
fn wire_name(name: &str) -> Result<Name, IggyError> {
    Name::new(name).map_err(|_| IggyError::InvalidFormat)
}

/// The settings iggy-route's own `update_topic` carries, byte for byte as the SDK encodes
/// them; `None` when the options hold `raw` keys, which only the SDK's encoder writes.
fn native_update_options(options: &TopicUpdateOptions) -> Option<wire::TopicUpdateOptions> {
    if !options.raw.is_empty() {
        return None;
    }
    Some(wire::TopicUpdateOptions {
        compression_algorithm: options
            .compression_algorithm
            .map(|compression| match compression {
                SdkCompression::None => CompressionAlgorithm::None,
                SdkCompression::Gzip => CompressionAlgorithm::Gzip,
            }),
        message_expiry: options.message_expiry.map(u64::from),
        max_topic_size: options.max_topic_size.map(u64::from),
    })
}

#[async_trait]
impl StreamClient for Client {
    async fn get_stream(&self, stream_id: &Identifier) -> Result<Option<StreamDetails>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let stream = Client::get_stream(self, route_identifier(stream_id)?)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        stream.map(sdk_stream_details).transpose()
    }

    async fn get_streams(&self) -> Result<Vec<Stream>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let streams = Client::get_streams(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_streams(streams))
    }

    async fn create_stream(&self, name: &str) -> Result<StreamDetails, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let stream = Client::create_stream(self, wire_name(name)?.as_str())
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        sdk_stream_details(stream)
    }

    /// The native `update_stream`; with options set, the same command carrying the SDK's
    /// options block (the 0.11.0 server refuses every stream option key by name:
    /// `UnsupportedOptionKey`).
    async fn update_stream(
        &self,
        stream_id: &Identifier,
        name: &str,
        options: &StreamUpdateOptions,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let stream = route_identifier(stream_id)?;
        let name = wire_name(name)?;
        let renamed = if options.raw.is_empty() {
            Client::update_stream(self, stream, name.as_str()).await
        } else {
            let block = options.to_wire()?.into_bytes();
            self.run(bodies::update_stream(&stream, &name, &block))
                .await
        };
        self.sdk_state().topic_ids.clear();
        if renamed.is_ok() {
            self.renamed_for_groups().await;
        }
        renamed.map_err(IntoIggyError::into_iggy_error)
    }

    async fn delete_stream(&self, stream_id: &Identifier) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let deleted = Client::delete_stream(self, route_identifier(stream_id)?).await;
        self.sdk_state().topic_ids.clear();
        deleted.map_err(IntoIggyError::into_iggy_error)
    }

    async fn purge_stream(&self, stream_id: &Identifier) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        Client::purge_stream(self, route_identifier(stream_id)?)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}

#[async_trait]
impl TopicClient for Client {
    async fn get_topic(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
    ) -> Result<Option<TopicDetails>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        let details = Client::get_topic(self, stream, topic)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        details.map(sdk_topic_details).transpose()
    }

    async fn get_topics(&self, stream_id: &Identifier) -> Result<Vec<Topic>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let topics = Client::get_topics(self, route_identifier(stream_id)?)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        sdk_topics(topics)
    }

    /// `CREATE_TOPIC` to the metadata leader, as the native `create_topic` sends it, but
    /// carrying the SDK's options block (every option set, and the durabilities the SDK
    /// always sends), which the native call cannot carry.
    async fn create_topic(
        &self,
        stream_id: &Identifier,
        name: &str,
        options: &TopicCreateOptions,
    ) -> Result<TopicDetails, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let stream = route_identifier(stream_id)?;
        let name = wire_name(name)?;
        let block = options.to_wire()?.into_bytes();
        let partitions_count = options.partitions_count.unwrap_or(DEFAULT_PARTITIONS_COUNT);
        let call = bodies::create_topic(&stream, &name, partitions_count, &block);
        let details = self
            .run(call)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        sdk_topic_details(details)
    }

    /// The native `update_topic` for the typed settings; with `raw` keys, the same command
    /// carrying the SDK's options block.
    async fn update_topic(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        name: &str,
        options: &TopicUpdateOptions,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        let name = wire_name(name)?;
        let updated = match native_update_options(options) {
            Some(native) => Client::update_topic(self, stream, topic, name.as_str(), native).await,
            None => {
                let block = options.to_wire()?.into_bytes();
                self.run(bodies::update_topic(&stream, &topic, &name, &block))
                    .await
            }
        };
        self.sdk_state().topic_ids.clear();
        if updated.is_ok() {
            self.renamed_for_groups().await;
        }
        updated.map_err(IntoIggyError::into_iggy_error)
    }

    async fn delete_topic(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        let deleted = Client::delete_topic(self, stream, topic).await;
        self.sdk_state().topic_ids.clear();
        deleted.map_err(IntoIggyError::into_iggy_error)
    }

    async fn purge_topic(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        Client::purge_topic(self, stream, topic)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}

#[async_trait]
impl PartitionClient for Client {
    async fn create_partitions(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partitions_count: u32,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        Client::create_partitions(self, stream, topic, partitions_count)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    async fn delete_partitions(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partitions_count: u32,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        Client::delete_partitions(self, stream, topic, partitions_count)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}

#[async_trait]
impl SegmentClient for Client {
    async fn delete_segments(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        partition_id: u32,
        segments_count: u32,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        Client::delete_segments(self, stream, topic, partition_id, segments_count)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }
}
