//! `ConsumerGroupClient`: the native calls. A join or a leave changes the member's
//! assignment, so the one kept for group polls without a partition is read again at the
//! next such poll, as the SDK drops its own.

use async_trait::async_trait;
use iggy_common::{
    ConsumerGroup, ConsumerGroupClient, ConsumerGroupDetails, Identifier, IggyError,
};

use super::IntoIggyError;
use super::convert_admin::{sdk_consumer_group_details, sdk_consumer_groups};
use super::convert_messages::route_identifier;
use super::groups::GroupKey;
use super::session::Needs;
use crate::Client;

fn group_key(
    stream_id: &Identifier,
    topic_id: &Identifier,
    group_id: &Identifier,
) -> Result<GroupKey, IggyError> {
    Ok((
        route_identifier(stream_id)?,
        route_identifier(topic_id)?,
        route_identifier(group_id)?,
    ))
}

#[async_trait]
impl ConsumerGroupClient for Client {
    async fn get_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<Option<ConsumerGroupDetails>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic, group) = group_key(stream_id, topic_id, group_id)?;
        let details = Client::get_consumer_group(self, stream, topic, group)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(details.map(sdk_consumer_group_details))
    }

    async fn get_consumer_groups(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
    ) -> Result<Vec<ConsumerGroup>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        let groups = Client::get_consumer_groups(self, stream, topic)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_consumer_groups(groups))
    }

    async fn create_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        name: &str,
    ) -> Result<ConsumerGroupDetails, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let (stream, topic) = (route_identifier(stream_id)?, route_identifier(topic_id)?);
        let details = Client::create_consumer_group(self, stream, topic, name)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_consumer_group_details(details))
    }

    async fn delete_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let key = group_key(stream_id, topic_id, group_id)?;
        let (stream, topic, group) = key.clone();
        let deleted = Client::delete_consumer_group(self, stream, topic, group).await;
        self.sdk_state().groups.forget(&key);
        deleted.map_err(IntoIggyError::into_iggy_error)
    }

    /// The native `join_consumer_group`: the membership lives on its own link to the
    /// metadata leader, kept open while the membership lasts.
    async fn join_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let key = group_key(stream_id, topic_id, group_id)?;
        let (stream, topic, group) = key.clone();
        let joined = Client::join_consumer_group(self, stream, topic, group).await;
        self.sdk_state().groups.forget(&key);
        joined.map_err(IntoIggyError::into_iggy_error)
    }

    async fn leave_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let key = group_key(stream_id, topic_id, group_id)?;
        let (stream, topic, group) = key.clone();
        let left = Client::leave_consumer_group(self, stream, topic, group).await;
        self.sdk_state().groups.forget(&key);
        left.map_err(IntoIggyError::into_iggy_error)
    }
}
