//! The load through iggy-route on mio: one blocking `Client` shared by every producer
//! thread.

use bytes::Bytes;
use iggy_route_mio::{Client, Identifier, Message, Partitioning};

use super::Load;
use super::load::{Acked, Measurement, Progress, batch_key, payload};
use super::producer::{BlockingSendPath, produce_blocking};

/// Runs `load` on one OS thread per producer until its deadline, then waits for the sends
/// in flight (see [`produce_blocking`]).
pub fn produce(
    client: &Client,
    stream: &Identifier,
    topic: &Identifier,
    load: &Load,
    progress: &Progress,
) -> Measurement {
    let payload = payload(load);
    let paths = (0..load.producers)
        .map(|producer| MioSend {
            client,
            stream,
            topic,
            producer,
            payload: payload.clone(),
            messages: load.messages_per_send(),
        })
        .collect();
    produce_blocking(paths, load, progress)
}

/// One producer thread's send path: `Client::send` on the shared client, with a messages
/// key of its own per batch.
struct MioSend<'a> {
    client: &'a Client,
    stream: &'a Identifier,
    topic: &'a Identifier,
    producer: usize,
    payload: Bytes,
    messages: usize,
}

impl BlockingSendPath for MioSend<'_> {
    type Batch = (Partitioning, Vec<Message>);

    fn prepare(&mut self, send: u64) -> Result<Self::Batch, String> {
        let messages = (0..self.messages)
            .map(|_| Message {
                payload: self.payload.clone(),
                ..Message::default()
            })
            .collect();
        let key = Partitioning::messages_key_u64(batch_key(self.producer, send));
        Ok((key, messages))
    }

    fn send(&mut self, (key, messages): Self::Batch) -> Result<Acked, String> {
        self.client
            .send(self.stream.clone(), self.topic.clone(), key, messages)
            .map(|receipt| Acked {
                messages: u64::from(receipt.messages),
                partition: Some(receipt.partition_id),
            })
            .map_err(|error| error.to_string())
    }
}
