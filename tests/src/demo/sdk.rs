//! The load through the published SDK `iggy 0.11.0`, the baseline: one `IggyClient` per
//! producer task, as an application with N independent producers would hold them, each
//! sending keyed batches with `Partitioning::messages_key`.

use std::sync::Arc;

use bytes::Bytes;
use iggy::prelude::{
    Client as _, Identifier, IggyClient, IggyError, IggyMessage, MessageClient as _, Partitioning,
};

use iggy_route_core::partitioning::resolve_partition;

use super::Load;
use super::load::{Acked, Measurement, Progress, batch_key, payload};
use super::producer::{AsyncSendPath, produce_async};

/// Connects and signs in `count` clients through the node of `connection_string` (the
/// 0.11.0 SDK takes one address).
pub async fn connect(connection_string: &str, count: usize) -> Result<Vec<IggyClient>, IggyError> {
    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let client = IggyClient::from_connection_string(connection_string)?;
        client.connect().await?;
        clients.push(client);
    }
    Ok(clients)
}

/// Runs `load` with one producer task per client until its deadline, then waits for the
/// sends in flight (cut off at the drain limit).
pub async fn produce(
    clients: Vec<IggyClient>,
    stream: u32,
    topic: u32,
    load: &Load,
    progress: Arc<Progress>,
) -> Result<Measurement, IggyError> {
    let payload = payload(load);
    let (stream, topic) = (Identifier::numeric(stream)?, Identifier::numeric(topic)?);
    let paths = clients
        .into_iter()
        .enumerate()
        .map(|(producer, client)| SdkSend {
            client,
            stream: stream.clone(),
            topic: topic.clone(),
            producer,
            payload: payload.clone(),
            messages: load.messages_per_send(),
            partitions: load.partitions,
        })
        .collect();
    Ok(produce_async(paths, load, progress).await)
}

/// One producer task's send path: `send_messages` on its own `IggyClient`, with a
/// messages key of its own per batch.
struct SdkSend {
    client: IggyClient,
    stream: Identifier,
    topic: Identifier,
    producer: usize,
    payload: Bytes,
    messages: usize,
    /// The topic's partitions, to name the one a key hashes to.
    partitions: u32,
}

impl AsyncSendPath for SdkSend {
    /// The key, the messages, and the partition the key hashes to.
    type Batch = (Partitioning, Vec<IggyMessage>, Option<u32>);

    fn prepare(&mut self, send: u64) -> Result<Self::Batch, String> {
        let messages = (0..self.messages)
            .map(|_| IggyMessage::builder().payload(self.payload.clone()).build())
            .collect::<Result<Vec<_>, IggyError>>()
            .map_err(|error| error.to_string())?;
        let value = batch_key(self.producer, send);
        let key = Partitioning::messages_key_u64(value);
        // The SDK reports no partition: the key tells it, hashed as the server does.
        let partition = resolve_partition(&value.to_le_bytes(), self.partitions);
        Ok((key, messages, partition))
    }

    async fn send(&mut self, (key, mut messages, partition): Self::Batch) -> Result<Acked, String> {
        let count = messages.len() as u64;
        self.client
            .send_messages(&self.stream, &self.topic, &key, &mut messages)
            .await
            .map(|_response| Acked {
                messages: count,
                partition,
            })
            .map_err(|error| error.to_string())
    }

    async fn finish(self) {
        let _ = self.client.shutdown().await;
    }
}
