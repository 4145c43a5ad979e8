//! `ClusterClient` and `SystemClient`.

use async_trait::async_trait;
use iggy_common::{
    ClientInfo, ClientInfoDetails, ClusterClient, ClusterMetadata, IggyError, NonZeroIggyDuration,
    OptionSpec, OptionsScope, Snapshot, SnapshotCompression, Stats, SystemClient,
    SystemSnapshotType,
};
use tracing::warn;

use super::IntoIggyError;
use super::bodies;
use super::convert_admin::sdk_cluster_metadata;
use super::convert_users::{sdk_client_details, sdk_clients, sdk_stats};
use super::session::Needs;
use crate::Client;

#[async_trait]
impl ClusterClient for Client {
    /// The native `get_cluster_metadata`: the node holding the session answers.
    async fn get_cluster_metadata(&self) -> Result<ClusterMetadata, IggyError> {
        self.admit(Needs::Server).await?;
        let metadata = Client::get_cluster_metadata(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        sdk_cluster_metadata(metadata)
    }
}

#[async_trait]
impl SystemClient for Client {
    async fn get_stats(&self) -> Result<Stats, IggyError> {
        self.admit(Needs::Server).await?;
        let stats = Client::get_stats(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_stats(stats))
    }

    async fn get_me(&self) -> Result<ClientInfoDetails, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let me = Client::get_me(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_client_details(me))
    }

    async fn get_client(&self, client_id: u32) -> Result<Option<ClientInfoDetails>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let client = Client::get_client(self, client_id)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(client.map(sdk_client_details))
    }

    async fn get_clients(&self) -> Result<Vec<ClientInfo>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let clients = Client::get_clients(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(sdk_clients(clients))
    }

    /// Refused with `FeatureUnavailable`, nothing sent: iggy-route has no decoder for the
    /// option catalog's reply.
    async fn describe_options(&self, _scope: OptionsScope) -> Result<Vec<OptionSpec>, IggyError> {
        self.admit(Needs::SignedIn).await?;
        Err(IggyError::FeatureUnavailable)
    }

    async fn ping(&self) -> Result<(), IggyError> {
        self.admit(Needs::Connection).await?;
        Client::ping(self)
            .await
            .map_err(IntoIggyError::into_iggy_error)
    }

    /// `Config::heartbeat_interval`: how long a link of iggy-route's sits idle before it
    /// pings.
    async fn heartbeat_interval(&self) -> NonZeroIggyDuration {
        self.sdk_state().heartbeat_interval()
    }

    /// Reads again the assignment of every group this client polled without naming a
    /// partition, as the SDK's heartbeat does. A failed read is logged and leaves the
    /// group's kept assignment as it was, as with the SDK.
    async fn refresh_consumer_group_assignments(&self) {
        for key in self.sdk_state().groups.keys() {
            if let Err(error) = self.sync_assignment(&key).await {
                let (stream, topic, group) = &key;
                warn!(%stream, %topic, %group, %error, "consumer group assignment not refreshed");
            }
        }
    }

    /// `GET_SNAPSHOT_FILE` to the node holding the session; its reply is the snapshot.
    async fn snapshot(
        &self,
        compression: SnapshotCompression,
        snapshot_types: Vec<SystemSnapshotType>,
    ) -> Result<Snapshot, IggyError> {
        self.admit(Needs::SignedIn).await?;
        let types: Vec<u8> = snapshot_types
            .iter()
            .map(SystemSnapshotType::as_code)
            .collect();
        let call = bodies::snapshot(compression.as_code(), &types)?;
        let archive = self
            .run(call)
            .await
            .map_err(IntoIggyError::into_iggy_error)?;
        Ok(Snapshot::new(archive))
    }
}
