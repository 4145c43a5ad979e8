//! `ConsumerGroupClient`: the native calls. A join or a leave changes the member's
//! assignment, so the one kept for group polls without a partition is read again at the
//! next such poll, as the SDK drops its own. A group this client joined is written as its
//! join named it, however a later call names it (see `group_names`).

use async_trait::async_trait;
use iggy_common::{
    ConsumerGroup, ConsumerGroupClient, ConsumerGroupDetails, Identifier, IggyError,
};

use iggy_route_core::client::ClientError;

use super::IntoIggyError;
use super::convert_admin::{sdk_consumer_group_details, sdk_consumer_groups};
use super::convert_messages::route_identifier;
use super::group_names::names_nothing;
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

impl Client {
    /// The group the identifiers name, as this client's join of it named it.
    fn joined_key(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<GroupKey, IggyError> {
        let key = group_key(stream_id, topic_id, group_id)?;
        Ok(self.sdk_state().joined_groups.as_joined(key))
    }

    /// A leave or a delete of `key`'s group ended with `outcome`: the assignment kept for
    /// it is read again, and one that succeeded ends what is known of the membership.
    fn membership_ended(
        &self,
        key: &GroupKey,
        outcome: Result<(), ClientError>,
    ) -> Result<(), IggyError> {
        let state = self.sdk_state();
        state.groups.forget(key);
        if outcome.is_ok() {
            state.joined_groups.forget(key);
        }
        outcome.map_err(IntoIggyError::into_iggy_error)
    }
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
        let key = self.joined_key(stream_id, topic_id, group_id)?;
        let (stream, topic, group) = key.clone();
        let deleted = Client::delete_consumer_group(self, stream, topic, group).await;
        self.membership_ended(&key, deleted)
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
        let state = self.sdk_state();
        let as_named = group_key(stream_id, topic_id, group_id)?;
        let mut key = state.joined_groups.as_joined(as_named.clone());
        let mut fresh = None;
        if key == as_named {
            fresh = self.resolve_group(&as_named).await;
            key = fresh.as_ref().map_or(key, |group| group.key().clone());
        }
        let (stream, topic, group) = key.clone();
        let mut joined = Client::join_consumer_group(self, stream, topic, group).await;
        if let Err(error) = &joined
            && fresh.is_none()
            && key != as_named
            && names_nothing(error)
        {
            // The group joined before is gone (another client deleted it): the one the
            // caller names now is resolved and joined.
            state.joined_groups.forget(&key);
            state.groups.forget(&key);
            fresh = self.resolve_group(&as_named).await;
            key = fresh.as_ref().map_or(as_named, |group| group.key().clone());
            let (stream, topic, group) = key.clone();
            joined = Client::join_consumer_group(self, stream, topic, group).await;
        }
        state.groups.forget(&key);
        if joined.is_ok()
            && let Some(group) = fresh
        {
            state.joined_groups.keep(group);
        }
        joined.map_err(IntoIggyError::into_iggy_error)
    }

    async fn leave_consumer_group(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
        group_id: &Identifier,
    ) -> Result<(), IggyError> {
        self.admit(Needs::SignedIn).await?;
        let as_named = group_key(stream_id, topic_id, group_id)?;
        let key = self.sdk_state().joined_groups.as_joined(as_named.clone());
        let (stream, topic, group) = key.clone();
        let left = Client::leave_consumer_group(self, stream, topic, group).await;
        if let Err(error) = &left
            && key != as_named
            && names_nothing(error)
        {
            // The group joined before is gone (another client deleted it), and the
            // membership with it. The caller leaves the group its identifiers name now:
            // asked as named, the server gives its own answer, as the SDK's does.
            self.membership_ended(&key, Ok(()))?;
            let (stream, topic, group) = as_named.clone();
            let left = Client::leave_consumer_group(self, stream, topic, group).await;
            return self.membership_ended(&as_named, left);
        }
        self.membership_ended(&key, left)
    }
}
