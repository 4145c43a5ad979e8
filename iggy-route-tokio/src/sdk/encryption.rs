//! Payload encryption as the SDK's `IggyClient` does it. Given an encryptor
//! ([`Client::with_encryptor`](crate::Client::with_encryptor)), a send seals each message's
//! payload and, when it has one, its user-header block, each on its own (the encryptor
//! puts a fresh nonce before each ciphertext), and writes them back into the caller's
//! messages as the SDK does; a poll opens them again. So a topic written by the SDK with a
//! key reads the same through iggy-route with that key, and the other way round. The
//! server stores the sealed bytes as they are: it never reads the header block.

use bytes::Bytes;
use iggy_common::{EncryptorKind, IggyError, IggyMessage, PolledMessages};

use super::convert_messages::len_u32;

/// The nonce AES-256-GCM writes before each ciphertext: anything shorter was never sealed,
/// and is refused here rather than handed to the cipher.
const NONCE_LEN: usize = 12;

/// Seal every message's payload and user headers. All or nothing: the messages are
/// changed only once every one of them was sealed.
pub(super) fn seal_messages(
    encryptor: &EncryptorKind,
    messages: &mut [IggyMessage],
) -> Result<(), IggyError> {
    let mut sealed = Vec::with_capacity(messages.len());
    for message in messages.iter() {
        let payload = Bytes::from(encryptor.encrypt(&message.payload)?);
        let headers = match &message.user_headers {
            Some(block) => Some(Bytes::from(encryptor.encrypt(block)?)),
            None => None,
        };
        sealed.push((payload, headers));
    }
    for (message, (payload, headers)) in messages.iter_mut().zip(sealed) {
        message.header.payload_length = len_u32(payload.len());
        message.payload = payload;
        if let Some(headers) = headers {
            message.header.user_headers_length = len_u32(headers.len());
            message.user_headers = Some(headers);
        }
    }
    Ok(())
}

/// Open every polled message's payload and user headers; `CannotDecryptData` when one was
/// not sealed with this key (or not sealed at all), as with the SDK.
pub(super) fn open_polled(
    encryptor: &EncryptorKind,
    polled: &mut PolledMessages,
) -> Result<(), IggyError> {
    for message in &mut polled.messages {
        message.payload = Bytes::from(open(encryptor, &message.payload)?);
        message.header.payload_length = len_u32(message.payload.len());
        if let Some(block) = &message.user_headers {
            let headers = open(encryptor, block)?;
            message.header.user_headers_length = len_u32(headers.len());
            message.user_headers = Some(Bytes::from(headers));
        }
    }
    Ok(())
}

fn open(encryptor: &EncryptorKind, sealed: &[u8]) -> Result<Vec<u8>, IggyError> {
    if sealed.len() < NONCE_LEN {
        return Err(IggyError::CannotDecryptData);
    }
    encryptor.decrypt(sealed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::str::FromStr;

    use iggy_common::{Aes256GcmEncryptor, HeaderKey, HeaderValue, IggyMessageHeader};

    use super::*;

    fn encryptor(key: u8) -> EncryptorKind {
        EncryptorKind::Aes256Gcm(Aes256GcmEncryptor::new(&[key; 32]).unwrap())
    }

    fn message_with_headers() -> IggyMessage {
        let headers = BTreeMap::from([(
            HeaderKey::from_str("tenant").unwrap(),
            HeaderValue::from_str("acme").unwrap(),
        )]);
        IggyMessage::builder()
            .payload(Bytes::from_static(b"secret order"))
            .user_headers(headers)
            .build()
            .unwrap()
    }

    fn polled(messages: Vec<IggyMessage>) -> PolledMessages {
        PolledMessages {
            partition_id: 0,
            current_offset: 0,
            count: len_u32(messages.len()),
            messages,
        }
    }

    #[test]
    fn a_sealed_message_opens_to_what_was_sent_with_the_same_key_only() {
        let original = message_with_headers();
        let mut messages = vec![message_with_headers()];
        seal_messages(&encryptor(1), &mut messages).unwrap();
        assert_ne!(messages[0].payload, original.payload);
        assert_ne!(messages[0].user_headers, original.user_headers);
        assert_eq!(
            messages[0].header.payload_length,
            len_u32(messages[0].payload.len())
        );

        let mut read = polled(messages);
        open_polled(&encryptor(1), &mut read).unwrap();
        assert_eq!(read.messages[0].payload, original.payload);
        assert_eq!(read.messages[0].user_headers, original.user_headers);
        assert_eq!(
            read.messages[0].user_headers_map().unwrap(),
            original.user_headers_map().unwrap()
        );

        let mut sealed = vec![message_with_headers()];
        seal_messages(&encryptor(1), &mut sealed).unwrap();
        let mut wrong_key = polled(sealed);
        assert_eq!(
            open_polled(&encryptor(2), &mut wrong_key).unwrap_err(),
            IggyError::CannotDecryptData
        );
    }

    #[test]
    fn bytes_too_short_to_hold_a_nonce_are_refused_not_a_panic() {
        for payload in [&b""[..], b"x", &[0u8; 11]] {
            let message = IggyMessage {
                header: IggyMessageHeader::default(),
                payload: Bytes::copy_from_slice(payload),
                user_headers: None,
            };
            let mut read = polled(vec![message]);
            assert_eq!(
                open_polled(&encryptor(1), &mut read).unwrap_err(),
                IggyError::CannotDecryptData
            );
        }
    }

    #[test]
    fn each_seal_takes_a_fresh_nonce() {
        let mut messages = vec![message_with_headers(), message_with_headers()];
        seal_messages(&encryptor(1), &mut messages).unwrap();
        assert_ne!(messages[0].payload, messages[1].payload);
    }
}
